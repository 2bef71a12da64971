// The background processes' quick pick (processes.ts) under Node, with fakeVscode.ts's `vscode`
// and a client that records its requests and answers as the server would.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import type { TillerClient } from '../src/client';
import type { ProcessInfo } from '../src/protocol';
import { Uri, createFakeVscode, installFakeVscode } from './fakeVscode';

type Item = { label: string; description?: string; detail?: string };

// One fake for the file: processes.ts is loaded (and caches `vscode`) once.
let answers: string[] = [];
const { vscode, recorded } = createFakeVscode({
  workspaceFolder: '/tmp',
  settings: {},
  pick: (items: Item[]) => {
    const want = answers.shift();
    return items.find((item) => want !== undefined && item.label.startsWith(want));
  },
});
installFakeVscode(vscode);
const { ProcessOutputProvider, pickProcess, processState } = require('../src/processes') as typeof import('../src/processes');

const SERVER: ProcessInfo = {
  id: 1, command: 'npm run dev', state: 'running', pid: 4242, toolCallId: 'call_1', startedAt: 1,
  outputBytes: 30, droppedBytes: 0,
};

function fakeClient(answersByMethod: Record<string, unknown>): { client: TillerClient; sent: Array<{ method: string; params: unknown }> } {
  const sent: Array<{ method: string; params: unknown }> = [];
  const client = {
    request: async (method: string, params: unknown) => {
      sent.push({ method, params });
      return answersByMethod[method];
    },
  } as unknown as TillerClient;
  return { client, sent };
}

function reset(...picks: string[]): void {
  answers = picks;
  recorded.picks.length = 0;
  recorded.modals.length = 0;
}

test('a process is listed with its state, and its output opens as a document', async () => {
  reset('1', 'Show the Output');
  const outputs = new ProcessOutputProvider();
  const { client, sent } = fakeClient({
    'process/list': { processes: [SERVER, { ...SERVER, id: 2, command: 'npm test', state: 'exited', exitCode: 1 }] },
    'process/output': { process: SERVER, output: '  VITE ready in 412 ms\n' },
  });

  assert.equal(await pickProcess(client, 's1', outputs), 'output');
  const [processes, actions] = recorded.picks;
  assert.deepEqual(processes!.items.map((item) => [item.label, item.description, item.detail]), [
    ['1  npm run dev', 'running', 'pid 4242 · 30 bytes of output'],
    ['2  npm test', 'exited with code 1', 'pid 4242 · 30 bytes of output'],
  ]);
  assert.deepEqual(actions!.items.map((item) => item.label), ['Show the Output', 'Kill']);
  assert.deepEqual(sent[1], { method: 'process/output', params: { sessionId: 's1', processId: 1 } });
  const uri = Uri.from({ scheme: 'tiller-process', path: '/process-1.log' });
  assert.equal(outputs.provideTextDocumentContent(uri as never), '# 1  running  npm run dev\n  VITE ready in 412 ms\n');
});

test('kill is offered while it runs and says how it ended; an ended one offers only its output', async () => {
  reset('1', 'Kill');
  const killed = { ...SERVER, state: 'killed', signal: 'SIGTERM' } as ProcessInfo;
  const { client, sent } = fakeClient({ 'process/list': { processes: [SERVER] }, 'process/kill': { process: killed } });

  assert.equal(await pickProcess(client, 's1', new ProcessOutputProvider()), 'killed');
  assert.deepEqual(sent[1], { method: 'process/kill', params: { sessionId: 's1', processId: 1 } });
  assert.deepEqual(recorded.modals.map((modal) => modal.message), ['Tiller: process 1 killed (SIGTERM)']);

  reset('1');
  const ended = fakeClient({ 'process/list': { processes: [killed] } });
  assert.equal(await pickProcess(ended.client, 's1', new ProcessOutputProvider()), undefined);
  assert.deepEqual(recorded.picks[1]!.items.map((item) => item.label), ['Show the Output']);
  assert.equal(processState({ ...SERVER, state: 'ended' }), 'ended with the server');
});

test('no processes: a message, no pick', async () => {
  reset();
  const { client } = fakeClient({ 'process/list': { processes: [] } });
  assert.equal(await pickProcess(client, 's1', new ProcessOutputProvider()), undefined);
  assert.equal(recorded.picks.length, 0);
  assert.deepEqual(recorded.modals.map((modal) => modal.message), ['Tiller: no background processes in this conversation']);
});
