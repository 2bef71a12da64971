// approvals.ts under Node: the queue of permission requests the chat view shows.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CancellationTokenSource } from 'vscode-jsonrpc/node';

import { ApprovalQueue, describeRequest } from '../src/approvals';
import type { RequestPermissionParams } from '../src/protocol';

function request(toolCallId: string, command: string): RequestPermissionParams {
  return {
    sessionId: 's1',
    toolCallId,
    toolName: 'bash',
    args: { command },
    preview: { kind: 'command', command, cwd: '/w' },
    reason: '',
    options: ['allowOnce', 'allowAlways', 'rejectOnce', 'rejectAlways'],
  };
}

function ask(queue: ApprovalQueue, id: string, log: string[], token = new CancellationTokenSource().token) {
  const params = request(id, `echo ${id}`);
  return queue.ask(params, describeRequest(params, (f) => f), token, {
    shown: () => void log.push(`shown ${id}`),
    settled: () => void log.push(`settled ${id}`),
  });
}

test('requests queue: only the first is shown; answering it shows the next', async () => {
  const queue = new ApprovalQueue();
  const log: string[] = [];
  const lists: string[][] = [];
  queue.onChange((views) => lists.push(views.map((v) => v.toolCallId)));
  const first = ask(queue, 'a', log);
  const second = ask(queue, 'b', log);
  assert.deepEqual(log, ['shown a']);
  assert.deepEqual(lists.at(-1), ['a', 'b']);
  const [a, b] = queue.views();
  assert.deepEqual(a?.buttons.map((x) => x.option), ['allowOnce', 'allowAlways', 'rejectOnce']);
  assert.ok(queue.answer(a!.key, 'allowAlways'));
  assert.equal(await first, 'allowAlways');
  assert.deepEqual(log, ['shown a', 'settled a', 'shown b']);
  assert.equal(queue.answer(a!.key, 'allowOnce'), false, 'a second answer is refused');
  assert.ok(queue.answer(undefined, 'rejectOnce'), 'undefined answers the first one');
  assert.equal(await second, 'rejectOnce');
  assert.equal(b?.toolCallId, 'b');
  assert.deepEqual(lists.at(-1), []);
});

test('a withdrawn request leaves the queue and settles with undefined', async () => {
  const queue = new ApprovalQueue();
  const log: string[] = [];
  const source = new CancellationTokenSource();
  const first = ask(queue, 'a', log, source.token);
  const second = ask(queue, 'b', log);
  const key = queue.views()[0]!.key;
  source.cancel();
  assert.equal(await first, undefined);
  assert.deepEqual(log, ['shown a', 'settled a', 'shown b']);
  assert.equal(queue.answer(key, 'allowOnce'), false, 'a late answer is refused');
  queue.clear();
  assert.equal(await second, undefined);
  assert.deepEqual(queue.views(), []);
});

test('an option the server did not offer is not a button and cannot be answered', async () => {
  const queue = new ApprovalQueue();
  const params = { ...request('a', 'ls'), options: ['allowOnce', 'rejectOnce'] } as RequestPermissionParams;
  const answered = queue.ask(params, describeRequest(params, (f) => f), new CancellationTokenSource().token);
  const [view] = queue.views();
  assert.deepEqual(view?.buttons.map((b) => b.label), ['Allow', 'Reject']);
  assert.equal(queue.answer(view!.key, 'allowAlways'), false);
  assert.ok(queue.answer(view!.key, 'allowOnce'));
  assert.equal(await answered, 'allowOnce');
});

test('"always" says what it covers', () => {
  const write: RequestPermissionParams = {
    sessionId: 's', toolCallId: 'w', toolName: 'write', args: {},
    preview: { kind: 'diff', path: '/w/src/a.py', diff: '' }, options: ['allowOnce'],
    reason: "'write' changes /w/src/a.py",
  };
  const words = describeRequest(write, (f) => f.replace('/w/', ''));
  assert.equal(words.title, 'Tiller wants to write src/a.py');
  assert.match(words.always, /write on src\/a\.py, for the rest of this session/);
  assert.match(words.detail, /^'write' changes/);
  assert.match(describeRequest(request('c', 'git status'), (f) => f).always, /exact command/);
  const hooks = describeRequest({
    sessionId: 's', toolCallId: 'hooks:.claude/settings.json', toolName: 'hooks', args: {},
    preview: { kind: 'hooks', file: '.claude/settings.json', commands: ['Stop: make test', 'PreToolUse (Bash): no-rm.sh'] },
    options: ['allowOnce', 'allowAlways'], reason: '.claude/settings.json in this workspace asks to run 2 commands as hooks',
  }, (f) => f);
  assert.equal(hooks.title, 'Tiller wants to run the hooks in .claude/settings.json');
  assert.equal(hooks.detail, '.claude/settings.json in this workspace asks to run 2 commands as hooks\nStop: make test\nPreToolUse (Bash): no-rm.sh');
  assert.match(hooks.always, /as they are now \(a change asks again\)/);
  const escalated = request('e', 'npm install');
  escalated.preview = { kind: 'command', command: 'npm install', cwd: '/w',
    sandbox: { mode: 'off', network: true, escalated: 'unsandboxed', reason: 'fetch packages' } };
  assert.match(describeRequest(escalated, (f) => f).detail,
    /npm install\nin \/w\nasks to run outside the sandbox: fetch packages$/);
  const boxed = request('b', 'make');
  boxed.preview = { kind: 'command', command: 'make', cwd: '/w',
    sandbox: { mode: 'workspace-write', network: true } };
  assert.match(describeRequest(boxed, (f) => f).detail, /sandboxed \(workspace-write, network\)$/);
});
