// extension.ts, chatView.ts and vscodeHandlers.ts under Node: `require('vscode')` returns the
// fake of fakeVscode.ts, the chat webview is a fake that records what it is posted, and the
// server is the REAL tiller against the `extension` scenario's FakeOpenAI (tests/editors/test_vscode.py):
// a bash call (its approval card in the view), a write of a new file (a diff editor and an
// approval card, answered in the view; the diff tab closes; the file is created and saved), and
// a final Markdown answer.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import type * as vscodeTypes from 'vscode';

import type { ChatOp } from '../src/chatModel';
import type { ToWebview } from '../src/messages';
import { Uri, createFakeVscode, installFakeVscode } from './fakeVscode';
import { e2eSkip, scenario, str, tillerCommand, waitUntil, workdir } from './support';

const EXTENSION_ROOT = path.resolve(__dirname, '..', '..');

function memento(): { get<T>(key: string): T | undefined; update(key: string, value: unknown): Promise<void> } {
  const values = new Map<string, unknown>();
  return {
    get: <T>(key: string) => values.get(key) as T | undefined,
    update: async (key, value) => void values.set(key, value),
  };
}

function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

test('the chat view drives tiller: prompt, approvals in the view, diff preview, undoable write', {
  ...e2eSkip(),
  timeout: 60_000,
  skip: e2eSkip().skip || (process.platform === 'win32' ? 'uses a shell wrapper' : false),
}, async () => {
  const s = scenario('extension');
  const ws = path.join(workdir(), 'extension-ws');
  fs.mkdirSync(ws, { recursive: true });
  // tiller.path is one executable; TILLER_CMD may be "python -m tiller".
  const wrapper = path.join(workdir(), 'tiller-wrapper.sh');
  fs.writeFileSync(wrapper, `#!/bin/sh\nexec ${tillerCommand()!.map(shellQuote).join(' ')} "$@"\n`, { mode: 0o755 });
  process.env.XDG_CONFIG_HOME = path.join(workdir(), 'xdg-config-extension');

  const { vscode, recorded } = createFakeVscode({
    workspaceFolder: ws,
    settings: { 'tiller.path': wrapper, 'tiller.baseUrl': s.baseUrl, 'tiller.extraArgs': ['--no-session'] },
  });
  installFakeVscode(vscode);
  const extension = require('../src/extension') as typeof import('../src/extension');
  const context = {
    subscriptions: [] as Array<{ dispose(): unknown }>,
    extensionUri: Uri.file(EXTENSION_ROOT),
    extension: { packageJSON: { version: '0.1.0' } },
    workspaceState: memento(),
  };
  extension.activate(context as unknown as vscodeTypes.ExtensionContext);

  try {
    assert.deepEqual(
      [...recorded.commands.keys()].sort(),
      [
        'tiller.abort', 'tiller.addSelection', 'tiller.approval.allow', 'tiller.approval.allowAlways',
        'tiller.approval.reject', 'tiller.continue', 'tiller.followUp', 'tiller.history', 'tiller.newChat',
        'tiller.pickMode', 'tiller.pickModel', 'tiller.pickThinking', 'tiller.processes', 'tiller.prompt', 'tiller.steer',
      ],
    );
    assert.ok(recorded.contentProviders.has('tiller-proposed'));
    const provider = recorded.views.get('tiller.chat') as vscodeTypes.WebviewViewProvider;
    assert.ok(provider, 'the chat view is registered');

    // A fake webview view.
    const posted: ChatOp[] = [];
    let receive: (message: unknown) => void = () => undefined;
    const webview = {
      options: {},
      html: '',
      cspSource: 'vscode-webview:',
      asWebviewUri: (uri: Uri) => uri,
      postMessage: async (message: ToWebview) => {
        posted.push(...message.ops);
        // The user clicks "Allow" on the first approval card each time the list changes.
        for (const op of message.ops) {
          if (op.op === 'approvals' && op.items[0]) {
            const key = op.items[0].key;
            setImmediate(() => receive({ type: 'approve', key, option: 'allowOnce' }));
          }
        }
        return true;
      },
      onDidReceiveMessage: (listener: (message: unknown) => void) => {
        receive = listener;
        return { dispose: () => undefined };
      },
    };
    const view = { webview, onDidDispose: () => ({ dispose: () => undefined }) };
    await provider.resolveWebviewView(view as unknown as vscodeTypes.WebviewView, {} as never, {} as never);
    assert.match(webview.html, /Content-Security-Policy" content="default-src 'none';[^"]*script-src 'nonce-[^']+'/);
    assert.match(webview.html, /<script nonce="[^"]+" src="[^"]*media\/chat\.js"><\/script>/);

    receive({ type: 'ready' });
    assert.deepEqual(posted[0], { op: 'clear' });
    receive({ type: 'submit', kind: 'prompt', text: 'make the file' });
    await waitUntil(
      () => posted.some((op) => op.op === 'block' && op.html.includes('<strong>done</strong>')) &&
        posted.at(-1)?.op === 'state' && (posted.at(-1) as { running: boolean }).running === false,
      'the run to end in the view',
      30_000,
    );

    // The view got the user's message, two finished tool cards and the rendered answer.
    assert.ok(posted.some((op) => op.op === 'user' && op.html === '<p>make the file</p>'));
    const toolOps = posted.filter((op): op is Extract<ChatOp, { op: 'tool' }> => op.op === 'tool');
    const final = new Map(toolOps.map((card) => [card.name, card]));
    assert.ok(toolOps.some((card) => card.status === 'waiting'), 'a card said it waits for approval');
    assert.equal(final.get('bash')?.status, 'done');
    assert.ok(final.get('bash')?.output.includes(str(s, 'echoed')));
    assert.equal(final.get('write')?.status, 'done');
    assert.equal(final.get('write')?.title, `Write ${str(s, 'file')}`);
    assert.equal(final.get('write')?.kind, 'edit');

    // The status bar says Tiller is idle again, with the session's tokens.
    await waitUntil(() => /Tiller: idle · .* tok/.test(recorded.statusItems[0]?.text ?? ''), 'the status bar', 10_000);

    // No modal: two approval cards, the command's then the write's, each gone once answered.
    assert.equal(recorded.modals.length, 0);
    const lists = posted.filter((op): op is Extract<ChatOp, { op: 'approvals' }> => op.op === 'approvals');
    const cards = new Map(lists.flatMap((op) => op.items).map((item) => [item.key, item]));
    const [command, write] = [...cards.values()];
    assert.equal(cards.size, 2);
    assert.deepEqual(command?.buttons.map((b) => b.label), ['Allow', 'Always allow', 'Reject']);
    assert.ok(command?.detail.includes(str(s, 'command')));
    assert.match(command?.always ?? '', /exact command/);
    assert.match(write?.title ?? '', new RegExp(`write ${str(s, 'file')}`));
    assert.match(write?.always ?? '', new RegExp(`write on ${str(s, 'file')}`));
    assert.deepEqual(lists.at(-1)?.items, []);
    // The diff tab closed when the write was answered.
    assert.equal(recorded.tabs.length, 0);
    assert.equal(recorded.closed.length, 1);
    const diff = recorded.executed.find((e) => e.command === 'vscode.diff');
    assert.ok(diff, 'vscode.diff was opened');
    const [left, right, title] = diff.args as [Uri, Uri, string];
    assert.equal(left.scheme, 'tiller-proposed', 'a new file diffs against an empty document');
    assert.equal(right.scheme, 'tiller-proposed');
    assert.equal(right.fsPath, path.join(ws, str(s, 'file')));
    assert.deepEqual(diff.contents.slice(0, 2), ['', str(s, 'content')]);
    assert.match(title, /proposed write/);

    // tiller.saveEdits (default on): the new file was created and filled through one
    // WorkspaceEdit, then saved, so the disk agrees with the editor.
    assert.equal(recorded.applied.length, 1);
    const applied = recorded.applied[0]!;
    assert.deepEqual(applied.created.map((uri) => uri.fsPath), [path.join(ws, str(s, 'file'))]);
    const [edit] = applied.edits;
    assert.equal(edit?.uri.scheme, 'file');
    assert.equal(edit?.text, str(s, 'content'));
    assert.equal(fs.readFileSync(path.join(ws, str(s, 'file')), 'utf8'), str(s, 'content'));
  } finally {
    await extension.deactivate();
  }
});
