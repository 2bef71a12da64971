// The model and thinking-level quick picks (pickers.ts) under Node, with fakeVscode.ts's
// `vscode` and a client that records its requests and answers as the server would.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import type { TillerClient } from '../src/client';
import { createFakeVscode, installFakeVscode } from './fakeVscode';

type Sent = Array<{ method: string; params: unknown }>;
type Item = { label: string; description?: string; detail?: string };

// One fake for the file: pickers.ts is loaded (and caches `vscode`) once.
let choose: (items: Item[]) => Item | undefined = () => undefined;
const { vscode, recorded } = createFakeVscode({ workspaceFolder: '/tmp', settings: {}, pick: (items) => choose(items) });
installFakeVscode(vscode);
const { pickModel, pickThinking } = require('../src/pickers') as typeof import('../src/pickers');

function reset(label: string): void {
  choose = (items) => items.find((item) => item.label === label);
  recorded.picks.length = 0;
  recorded.modals.length = 0;
  recorded.warnings.length = 0;
}

function fakeClient(answers: Record<string, unknown>): { client: TillerClient; sent: Sent } {
  const sent: Sent = [];
  const client = {
    request: async (method: string, params: unknown) => {
      sent.push({ method, params });
      return answers[method];
    },
  } as unknown as TillerClient;
  return { client, sent };
}

test('the thinking picker offers every level and shows the note of a level the model lacks', async () => {
  reset('xhigh');
  const note = 'claude-sonnet-4-6 has no xhigh thinking level: it runs at high';
  const { client, sent } = fakeClient({ 'agent/setThinkingLevel': { level: 'xhigh', effective: 'high', note } });

  assert.equal(await pickThinking(client, 's1', 'off'), true);
  assert.deepEqual(recorded.picks[0]!.items.map((item) => item.label), ['off', 'low', 'medium', 'high', 'xhigh', 'max']);
  assert.equal(recorded.picks[0]!.items[0]!.description, '(current)');
  assert.deepEqual(sent, [{ method: 'agent/setThinkingLevel', params: { sessionId: 's1', level: 'xhigh' } }]);
  assert.deepEqual(recorded.modals.map((modal) => modal.message), [`Tiller: ${note}`]);
});

test('the model picker shows what the provider says of each model and warns of a deprecated one', async () => {
  reset('claude-opus-4-5');
  const warning = 'claude-opus-4-5 is deprecated since 2026-11-23 and is scheduled to retire on 2027-01-22';
  const { client, sent } = fakeClient({
    'models/list': {
      providers: [{ name: 'anthropic', configured: true }, { name: 'openai', configured: false }],
      models: [
        { provider: 'anthropic', id: 'claude-opus-5-5', displayName: 'Claude Opus 5.5', contextWindow: 1_000_000,
          thinkingLevels: ['low', 'medium', 'high', 'xhigh', 'max'], lifecycle: 'active' },
        { provider: 'anthropic', id: 'claude-opus-4-5', contextWindow: 200_000,
          thinkingLevels: ['off', 'low'], lifecycle: 'deprecated', retiresAt: '2027-01-22' },
        { provider: 'anthropic', id: 'claude-sonnet-4-20250514', lifecycle: 'retired' },
        { provider: 'openai', id: 'gpt-5.6' },
      ],
    },
    'agent/setModel': { provider: 'anthropic', model: 'claude-opus-4-5', notice: warning },
  });

  assert.equal(await pickModel(client, 's1', 'claude-opus-5-5'), true);
  const items = recorded.picks[0]!.items;
  assert.deepEqual(items.map((item) => item.label), ['claude-opus-5-5', 'claude-opus-4-5', 'anthropic: its default model']);
  assert.equal(items[0]!.detail, 'Claude Opus 5.5 · 1000k context · thinking: low, medium, high, xhigh, max');
  assert.equal(items[1]!.detail, '200k context · thinking: low · deprecated, retires 2027-01-22');
  assert.deepEqual(sent[1], { method: 'agent/setModel', params: { sessionId: 's1', provider: 'anthropic', model: 'claude-opus-4-5' } });
  assert.deepEqual(recorded.warnings, [`Tiller: ${warning}`]);
});
