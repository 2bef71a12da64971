// src/client.ts against the REAL tiller (spawned over stdio, LSP framing), whose model is a
// FakeOpenAI started by tests/editors/test_vscode.py: one fake per scenario, scripted with exactly the
// replies the test of that name expects. Without the environment these tests are skipped.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';

import { ChatModel, type ChatOp } from '../src/chatModel';
import {
  CancellationTokenSource,
  ServerExitedError,
  isRpcError,
  type TillerClient,
} from '../src/client';
import { applyUnifiedDiff, proposedContent } from '../src/preview';
import { ErrorCode, type AgentEvent, type RequestPermissionParams } from '../src/protocol';
import {
  FakeEditor,
  e2eSkip,
  processAlive,
  scenario,
  scenarioData,
  startTiller,
  str,
  waitUntil,
  workdir,
  writeFifo,
  type EventLog,
  type Started,
} from './support';

const options = { ...e2eSkip(), timeout: 60_000 };

/** Run `body` with a started server, then dispose it (stdin EOF) whatever happened. */
async function withTiller(
  name: string,
  body: (t: Started) => Promise<void>,
  editor: FakeEditor = new FakeEditor(),
): Promise<void> {
  const started = startTiller(name, editor);
  try {
    await body(started);
  } catch (error) {
    const log = started.stderr().trim();
    if (log && error instanceof Error) {
      error.message += `\n--- tiller stderr ---\n${log}`;
    }
    throw error;
  } finally {
    await started.client.dispose();
  }
}

async function newSession(client: TillerClient): Promise<string> {
  const init = await client.initialize();
  assert.equal(init.serverInfo.name, 'tiller');
  assert.equal(init.protocolVersion, 1);
  const { sessionId } = await client.newSession({ cwd: workdir() });
  assert.match(sessionId, /\S/);
  return sessionId;
}

function assertWellFormedRun(log: EventLog, sessionId: string): void {
  const events = log.events;
  assert.deepEqual(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
    'seq starts at 1 and increases by one',
  );
  assert.ok(events.every((e) => e.sessionId === sessionId));
  assert.equal(events[0]?.type, 'agent_start');
  assert.equal(events.at(-1)?.type, 'agent_settled');
  assert.equal(log.ofType('agent_start').length, 1);
  assert.equal(log.ofType('agent_end').length, 1);
}

/** `file` as an absolute, normalized path (TILLER_WORKDIR has no symlinks: pytest resolves it). */
function canonical(file: string): string {
  return path.resolve(file);
}

function modelOps(events: AgentEvent[]): ChatOp[] {
  const model = new ChatModel();
  return [...events.flatMap((e) => model.apply(e)), ...model.flush()];
}

function toolCallEvent<T extends 'tool_execution_start' | 'tool_execution_end'>(type: T, toolCallId: string) {
  return (e: AgentEvent): e is Extract<AgentEvent, { type: T }> =>
    e.type === type && 'toolCallId' in e && e.toolCallId === toolCallId;
}

/** The pid a running `sleep 60 & echo pid=$!; wait` printed. */
async function sleepPid(log: EventLog): Promise<number> {
  const update = await log.waitFor(
    (e) => e.type === 'tool_execution_update' && JSON.stringify(e.partialResult).includes('pid='),
    'the bash call to print its pid',
  );
  const output = update.type === 'tool_execution_update' ? JSON.stringify(update.partialResult) : '';
  const match = /pid=(\d+)/.exec(output);
  assert.ok(match, 'pid printed');
  return Number(match[1]);
}

test('prompt streams text deltas in order that concatenate to the reply', options, async () => {
  const expected = str(scenario('stream'), 'text');
  await withTiller('stream', async ({ client, log }) => {
    const sessionId = await newSession(client);
    const result = await client.prompt({ sessionId, message: 'Say hello' });

    assert.equal(result.stopReason, 'stop');
    assert.equal(result.usage.inputTokens, 10);
    assertWellFormedRun(log, sessionId);
    const deltas = log.ofType('message_update').filter((e) => e.kind === 'text');
    // a burst of chunks is merged into fewer deltas (protocol.md, message_update)
    assert.ok(deltas.length >= 1, 'the reply arrives as deltas');
    assert.equal(deltas.map((e) => (e.kind === 'text' ? e.delta : '')).join(''), expected);
    const end = log.ofType('message_end').at(-1)!;
    assert.equal(end.message.role, 'assistant');
    assert.deepEqual(end.message.content, [{ type: 'text', text: expected }]);

    const state = await client.getState({ sessionId });
    assert.equal(state.isRunning, false);
    assert.equal(state.messageCount, 2);
    assert.equal(state.sessionId, sessionId);

    // The chat view renders the streamed Markdown with the HTML escaped.
    const blocks = modelOps(log.events).filter((op) => op.op === 'block');
    const html = blocks.at(-1)!.op === 'block' ? (blocks.at(-1) as { html: string }).html : '';
    assert.match(html, /<strong>world<\/strong>/);
    assert.match(html, /&lt;b&gt;Tiller&lt;\/b&gt; &amp; friends/);
    assert.match(html, /<code>a &lt; b<\/code>/);
    assert.match(html, /<ul><li>one<\/li><li>two<\/li><\/ul>/);
    assert.doesNotMatch(html, /<b>/);
  });
});

test('a bash tool round emits tool_execution_start and tool_execution_end', options, async () => {
  const s = scenario('tools');
  const id = str(s, 'toolCallId');
  await withTiller('tools', async ({ client, log, editor }) => {
    const sessionId = await newSession(client);
    const result = await client.prompt({ sessionId, message: 'run it' });

    // `ask` is the default mode for a client that declares `permissions`: bash asked first.
    assert.equal(editor.permissions.length, 1);
    const asked = editor.permissions[0]!;
    assert.equal(asked.sessionId, sessionId);
    assert.equal(asked.toolCallId, id);
    assert.equal(asked.toolName, 'bash');
    assert.deepEqual(asked.args, { command: str(s, 'command') });
    assert.deepEqual(asked.preview, {
      kind: 'command', command: str(s, 'command'), cwd: fs.realpathSync(workdir()),
      sandbox: { mode: 'off', network: true, reason: 'the sandbox is off' }, // TILLER_CMD: --sandbox off
    });
    assert.deepEqual(asked.options, ['allowOnce', 'allowAlways', 'rejectOnce', 'rejectAlways']);
    assert.equal(typeof asked.reason, 'string');
    const waiting = log.ofType('tool_execution_update').filter((e) => e.toolCallId === id);
    assert.deepEqual(waiting[0]?.partialResult, { status: 'awaitingPermission' });

    assert.equal(result.stopReason, 'stop');
    assertWellFormedRun(log, sessionId);
    const events = log.events;
    const callStart = events.findIndex(
      (e) => e.type === 'message_update' && e.kind === 'toolCallStart' && e.toolCallId === id,
    );
    const start = events.findIndex(toolCallEvent('tool_execution_start', id));
    const end = events.findIndex(toolCallEvent('tool_execution_end', id));
    assert.ok(callStart !== -1 && callStart < start && start < end, 'streamed call, start, end');
    const startEvent = events[start]!;
    assert.ok(startEvent.type === 'tool_execution_start');
    assert.equal(startEvent.toolName, 'bash');
    assert.deepEqual(startEvent.args, { command: str(s, 'command') });
    assert.deepEqual([startEvent.title, startEvent.kind, startEvent.path], [str(s, 'command'), 'execute', undefined]);
    const endEvent = events[end]!;
    assert.ok(endEvent.type === 'tool_execution_end');
    assert.equal(endEvent.isError, false);
    assert.equal(endEvent.result.role, 'toolResult');
    const output = endEvent.result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
    assert.ok(output.includes(str(s, 'output')), output);
    assert.equal(log.ofType('turn_start').length, 2);

    // The chat view shows a finished card for the call.
    const cards = modelOps(events).filter((op): op is Extract<ChatOp, { op: 'tool' }> => op.op === 'tool');
    const last = cards.filter((c) => c.id.endsWith(`-${id}`)).at(-1)!; // keyed by message and call id
    assert.equal(last.status, 'done');
    assert.equal(last.name, 'bash');
    assert.equal(last.title, 'bash');
    assert.equal(last.summary, str(s, 'command'));
    assert.ok(last.output.includes(str(s, 'output')));
  });
});

test('while a tool waits: prompt fails with -32010, steer and followUp are queued', options, async () => {
  const s = scenario('steer');
  const id = str(s, 'toolCallId');
  await withTiller('steer', async ({ client, log }) => {
    const sessionId = await newSession(client);
    const run = client.prompt({ sessionId, message: str(s, 'prompt') });
    run.catch(() => undefined); // awaited below
    await log.waitFor(toolCallEvent('tool_execution_start', id), `${id} to start`);

    await assert.rejects(client.prompt({ sessionId, message: 'a second prompt' }), (error: unknown) => {
      assert.ok(isRpcError(error, ErrorCode.AgentBusyError), String(error));
      assert.match(error.message, /agent\/steer/);
      assert.match(error.message, /agent\/followUp/);
      return true;
    });
    assert.deepEqual(await client.steer({ sessionId, message: str(s, 'steer') }), { queued: 1 });
    assert.deepEqual(await client.followUp({ sessionId, message: str(s, 'followUp') }), { queued: 1 });
    const busy = await client.getState({ sessionId });
    assert.equal(busy.isRunning, true);
    assert.equal(busy.pendingSteering, 1);
    assert.equal(busy.pendingFollowUp, 1);

    await writeFifo(str(s, 'fifo'), 'released\n'); // lets `cat fifo` finish
    const result = await run;

    assert.equal(result.stopReason, 'stop');
    assertWellFormedRun(log, sessionId);
    const users = log
      .ofType('message_start')
      .map((e) => e.message)
      .filter((m) => m.role === 'user')
      .map((m) => m.content);
    assert.deepEqual(users, [str(s, 'prompt'), str(s, 'steer'), str(s, 'followUp')]);
    const end = log.events.find(toolCallEvent('tool_execution_end', id));
    assert.ok(end && end.type === 'tool_execution_end' && !end.isError);
  });
});

test('a rejected permission is an error result with the reason; the run goes on', options, async () => {
  const s = scenario('reject');
  const id = str(s, 'toolCallId');
  const editor = new FakeEditor();
  editor.answer = () => ({ outcome: 'rejectOnce', reason: str(s, 'reason') });
  await withTiller(
    'reject',
    async ({ client, log }) => {
      const sessionId = await newSession(client);
      const result = await client.prompt({ sessionId, message: 'touch it' });

      assert.equal(result.stopReason, 'stop');
      assert.equal(editor.permissions.length, 1);
      const end = log.events.find(toolCallEvent('tool_execution_end', id));
      assert.ok(end && end.type === 'tool_execution_end' && end.isError);
      const text = end.result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
      assert.match(text, /rejected/);
      assert.ok(text.includes(str(s, 'reason')), text);
      assert.equal(fs.existsSync(path.join(workdir(), str(s, 'file'))), false, 'the command never ran');
    },
    editor,
  );
});

test('read, edit and write go through the editor: unsaved buffers in, buffers out, disk untouched', options, async () => {
  const s = scenario('files');
  const notes = path.join(workdir(), str(s, 'notes'));
  const created = path.join(workdir(), str(s, 'created'));
  const disk = fs.readFileSync(notes, 'utf8');
  const editor = new FakeEditor();
  editor.buffers.set(notes, str(s, 'buffer')); // what the user typed but did not save
  await withTiller(
    'files',
    async ({ client, log }) => {
      const sessionId = await newSession(client);
      const result = await client.prompt({ sessionId, message: 'edit the notes' });

      assert.equal(result.stopReason, 'stop');
      const ends = log.ofType('tool_execution_end');
      assert.deepEqual(ends.map((e) => [e.toolName, e.isError]), [['read', false], ['edit', false], ['write', false]]);
      // Each call as its tool describes itself: a title, a kind, the absolute path it acts on.
      const starts = log.ofType('tool_execution_start');
      assert.deepEqual(starts.map((e) => [e.title, e.kind, canonical(e.path ?? '')]), [
        [`Read ${str(s, 'notes')}`, 'read', canonical(notes)],
        [`Edit ${str(s, 'notes')}`, 'edit', canonical(notes)],
        [`Write ${str(s, 'created')}`, 'edit', canonical(created)],
      ]);
      const readText = ends[0]!.result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
      assert.ok(readText.includes(str(s, 'buffer').split('\n')[0]!), `read saw the buffer: ${readText}`);
      assert.ok(editor.reads.some((r) => canonical(r.path) === canonical(notes)));

      // Only edit and write ask (reads in the workspace are allowed), each with a diff preview
      // from which the permission dialog's "proposed" document is rebuilt exactly.
      assert.deepEqual(editor.permissions.map((p) => p.toolName), ['edit', 'write']);
      const [editAsk, writeAsk] = editor.permissions as [RequestPermissionParams, RequestPermissionParams];
      assert.equal(editAsk.preview.kind, 'diff');
      assert.equal(writeAsk.preview.kind, 'diff');
      assert.equal(proposedContent(editAsk, str(s, 'buffer')), str(s, 'edited'));
      assert.equal(proposedContent(writeAsk, ''), str(s, 'createdContent'));
      const editDiff = editAsk.preview.kind === 'diff' ? editAsk.preview : undefined;
      assert.equal(applyUnifiedDiff(str(s, 'buffer'), editDiff!.diff), str(s, 'edited'), 'the diff is against the buffer');

      assert.deepEqual(
        editor.writes.map((w) => [canonical(w.path), w.content]),
        [
          [canonical(notes), str(s, 'edited')],
          [canonical(created), str(s, 'createdContent')],
        ],
      );
      assert.equal(fs.readFileSync(notes, 'utf8'), disk, 'the disk is untouched');
      assert.equal(fs.existsSync(created), false, 'a new file exists only in the editor');
    },
    editor,
  );
});

test('abort ends the run as aborted and kills the running command', options, async () => {
  const id = str(scenario('abort'), 'toolCallId');
  await withTiller('abort', async ({ client, log }) => {
    const sessionId = await newSession(client);
    const run = client.prompt({ sessionId, message: 'sleep' });
    run.catch(() => undefined);
    const pid = await sleepPid(log);
    assert.ok(processAlive(pid));

    assert.deepEqual(await client.abort({ sessionId }), {});
    const result = await run;

    assert.equal(result.stopReason, 'aborted');
    await log.waitFor((e) => e.type === 'agent_settled', 'agent_settled');
    const end = log.events.find(toolCallEvent('tool_execution_end', id));
    assert.ok(end && end.type === 'tool_execution_end' && end.isError);
    await waitUntil(() => !processAlive(pid), `sleep (pid ${pid}) is gone`);
    await assert.rejects(client.abort({ sessionId }), (error: unknown) => isRpcError(error, ErrorCode.NoActiveRunError));
  });
});

test('cancelling the prompt token sends $/cancelRequest, which aborts the run', options, async () => {
  const id = str(scenario('cancel'), 'toolCallId');
  await withTiller('cancel', async ({ client, log }) => {
    const sessionId = await newSession(client);
    const source = new CancellationTokenSource();
    const run = client.prompt({ sessionId, message: 'sleep' }, source.token);
    run.catch(() => undefined);
    const pid = await sleepPid(log);
    source.cancel();
    const result = await run;

    assert.equal(result.stopReason, 'aborted');
    const end = log.events.find(toolCallEvent('tool_execution_end', id));
    assert.ok(end && end.type === 'tool_execution_end' && end.isError);
    await waitUntil(() => !processAlive(pid), `sleep (pid ${pid}) is gone`);
  });
});

test('dispose closes stdin: tiller exits 0, kills its tools, pending requests reject', options, async () => {
  const { client, log } = startTiller('dispose');
  const sessionId = await newSession(client);
  const run = client.prompt({ sessionId, message: 'sleep' });
  run.catch(() => undefined);
  const pid = await sleepPid(log);

  const exit = await client.dispose(10_000);

  assert.equal(exit.code, 0, `tiller exit: ${JSON.stringify(exit)}`);
  // On end of input tiller aborts the run; its answer may still make it out before it exits.
  const outcome = await run.then(
    (result) => result.stopReason,
    (error: unknown) => error,
  );
  assert.ok(outcome === 'aborted' || outcome instanceof ServerExitedError, String(outcome));
  await assert.rejects(client.getState({ sessionId }), ServerExitedError);
  await waitUntil(() => !processAlive(pid), `sleep (pid ${pid}) is gone`);
  assert.ok(client.pid !== undefined && !processAlive(client.pid));
});

test("the permission preview applies the server's own unified diffs", options, () => {
  const cases = scenarioData<Array<{ old: string; new: string; diff: string }>>('diffs');
  assert.ok(cases.length > 0);
  for (const c of cases) {
    assert.equal(applyUnifiedDiff(c.old, c.diff), c.new, c.diff);
  }
});
