// diagnostics.ts under Node with the fake `vscode` (fakeVscode.ts): client/getDiagnostics waits
// for the language servers to catch up with a document's text before answering, opens a file
// that is not open, gives a language nobody reports on a first chance only (but a server that an
// extension starts for it the whole time, once), lets silence end the wait for a clean file, and
// always answers by timeoutMs (or at once when cancelled).

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import type * as vscodeTypes from 'vscode';

import { CancellationTokenSource } from '../src/client';
import { Position, Range, Uri, WorkspaceEdit, createFakeVscode, installFakeVscode, type FakeDiagnostic } from './fakeVscode';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tiller-diagnostics-'));
const extensions = [
  { name: 'pylsp', main: './out/extension.js', activationEvents: ['onLanguage:python'] },
  { name: 'text-grammar', contributes: { languages: [{ id: 'plaintext' }] } }, // no code: no server
];
const { vscode, recorded } = createFakeVscode({ workspaceFolder: dir, settings: {}, extensions });
installFakeVscode(vscode);
const { DiagnosticsTracker, toItem } = require('../src/diagnostics') as typeof import('../src/diagnostics');
const workspace = vscode.workspace as unknown as typeof vscodeTypes.workspace;

const TIMING = { quietMs: 30, firstMs: 80, pollMs: 10, marginMs: 10 };

function file(name: string, text: string): string {
  const full = path.join(dir, name);
  fs.writeFileSync(full, text);
  return full;
}

function problem(line: number, message: string, severity = 0): FakeDiagnostic {
  return { range: new Range(new Position(line, 4), new Position(line, 9)), message, severity, source: 'ts', code: 2304 };
}

function ask(tracker: InstanceType<typeof DiagnosticsTracker>, paths: string[], timeoutMs = 20_000, token = new CancellationTokenSource().token) {
  return tracker.get({ sessionId: 's1', paths, timeoutMs }, token);
}

function messages(answer: { files: Array<{ diagnostics: Array<{ message: string }> }> }): string[] {
  return answer.files.flatMap((f) => f.diagnostics.map((d) => d.message));
}

/** Change the document's text as an applied WorkspaceEdit would (fires onDidChangeTextDocument). */
async function edit(uri: Uri, text: string): Promise<void> {
  const change = new WorkspaceEdit();
  change.replace(uri, new Range(new Position(0, 0), new Position(0, 1e6)), text);
  assert.ok(await workspace.applyEdit(change as unknown as vscodeTypes.WorkspaceEdit));
}

test('a diagnostic goes out 1-based, its severity named, an object code as its value', () => {
  const item = toItem({
    range: new Range(new Position(0, 2), new Position(1, 0)), message: 'm', severity: 1, source: 'eslint',
    code: { value: 'no-undef', target: Uri.file('/rules') },
  } as unknown as vscodeTypes.Diagnostic);
  assert.deepEqual(item, { line: 1, column: 3, endLine: 2, endColumn: 1, severity: 'warning', message: 'm', source: 'eslint', code: 'no-undef' });
});

test('an open document that did not change is answered at once with what it has', async () => {
  const full = file('open.ts', 'let a = b;\n');
  const doc = await workspace.openTextDocument(Uri.file(full) as unknown as vscodeTypes.Uri);
  recorded.setDiagnostics(Uri.file(full), [problem(0, "Cannot find name 'b'.")]);
  const tracker = new DiagnosticsTracker(TIMING);
  const answer = await ask(tracker, [full]);
  assert.equal(doc.uri.fsPath, full);
  assert.deepEqual(answer, { files: [{ path: full, diagnostics: [
    { line: 1, column: 5, endLine: 1, endColumn: 10, severity: 'error', message: "Cannot find name 'b'.", source: 'ts', code: 2304 },
  ] }] });
  tracker.dispose();
});

test('after a change, the answer waits for the diagnostics of the new text and a quiet moment', async () => {
  const full = file('changed.ts', 'let a = 1;\n');
  const tracker = new DiagnosticsTracker(TIMING);
  const uri = Uri.file(full);
  await workspace.openTextDocument(uri as unknown as vscodeTypes.Uri);
  recorded.setDiagnostics(uri, []); // the first report: typescript has a server
  await edit(uri, 'let a = b;\n');
  const answering = ask(tracker, [full]);
  // The server reports in two passes, after the question came.
  setTimeout(() => recorded.setDiagnostics(uri, [problem(0, 'syntax pass')]), 40);
  setTimeout(() => recorded.setDiagnostics(uri, [problem(0, "Cannot find name 'b'.")]), 55);
  const answer = await answering;
  assert.deepEqual(messages(answer), ["Cannot find name 'b'."]);
  tracker.dispose();
});

test('a file that is not open is opened for its language servers and their first report awaited', async () => {
  const other = file('first.ts', 'x;\n');
  const tracker = new DiagnosticsTracker(TIMING);
  await workspace.openTextDocument(Uri.file(other) as unknown as vscodeTypes.Uri);
  recorded.setDiagnostics(Uri.file(other), []); // typescript is known to be reported on
  const full = file('closed.ts', 'let a = b;\n');
  const answering = ask(tracker, [full]);
  setTimeout(() => recorded.setDiagnostics(Uri.file(full), [problem(0, 'late report')]), 150);
  const answer = await answering;
  assert.ok(workspace.textDocuments.some((d) => d.uri.fsPath === full), 'the document was opened');
  assert.deepEqual(messages(answer), ['late report']);
  tracker.dispose();
});

test('a language nobody reports on gets a first chance only; a missing file has none', async () => {
  const full = file('notes.txt', 'hello\n');
  const tracker = new DiagnosticsTracker(TIMING);
  const answer = await ask(tracker, [full, path.join(dir, 'missing.ts')]);
  assert.deepEqual(answer, { files: [{ path: full, diagnostics: [] }, { path: path.join(dir, 'missing.ts'), diagnostics: [] }] });
  tracker.dispose();
});

test('no report after a change: answered by timeoutMs with what there is; a cancel answers at once', async () => {
  const full = file('silent.ts', 'let a = 1;\n');
  const uri = Uri.file(full);
  const tracker = new DiagnosticsTracker(TIMING);
  await workspace.openTextDocument(uri as unknown as vscodeTypes.Uri);
  recorded.setDiagnostics(uri, [problem(0, 'stale')]);
  await edit(uri, 'let a = 2;\n');
  const answer = await ask(tracker, [full], 200);
  assert.deepEqual(messages(answer), ['stale']);
  const source = new CancellationTokenSource();
  const cancelled = ask(tracker, [full], 60_000, source.token);
  source.cancel();
  assert.deepEqual(messages((await cancelled)), ['stale']);
  tracker.dispose();
});

test('a language an extension starts a server for waits for its first report, once', async () => {
  const full = file('slow.py', 'x = y\n');
  const tracker = new DiagnosticsTracker(TIMING);
  const answering = ask(tracker, [full]);
  // Long after firstMs: the server took its time to start.
  setTimeout(() => recorded.setDiagnostics(Uri.file(full), [problem(0, "'y' is undefined")]), 4 * TIMING.firstMs);
  assert.deepEqual(messages(await answering), ["'y' is undefined"]);
  tracker.dispose();

  const quiet = new DiagnosticsTracker(TIMING);
  const other = file('never.py', 'x = 1\n');
  const started = Date.now();
  assert.deepEqual(messages(await ask(quiet, [other], 300)), []);
  assert.ok(Date.now() - started >= 300 - TIMING.marginMs, 'the first answer waited the whole time');
  // The language stayed silent that long: the next file of it has a first chance only.
  const third = file('later.py', 'x = 2\n');
  const again = Date.now();
  assert.deepEqual(messages(await ask(quiet, [third], 60_000)), []);
  assert.ok(Date.now() - again < 10 * TIMING.firstMs, 'not the whole minute');
  quiet.dispose();
});

test('a clean file in a language that reports: silence for half the time ends the wait', async () => {
  const tracker = new DiagnosticsTracker(TIMING);
  const known = file('known.ts', 'let a = b;\n');
  await workspace.openTextDocument(Uri.file(known) as unknown as vscodeTypes.Uri);
  recorded.setDiagnostics(Uri.file(known), [problem(0, "Cannot find name 'b'.")]);
  const clean = file('clean.ts', 'let a = 1;\n');
  const started = Date.now();
  assert.deepEqual(messages(await ask(tracker, [clean], 4000)), []);
  const waited = Date.now() - started;
  assert.ok(waited >= (4000 - TIMING.marginMs) / 2 && waited < 4000 - TIMING.marginMs, `waited ${waited} ms`);
  tracker.dispose();
});
