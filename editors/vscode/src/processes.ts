// The conversation's background processes (commands the agent started with `background:
// true`: a dev server, a watcher): a quick pick lists them with their state (`process/list`);
// the one picked offers its output (`process/output`, opened as a read-only document) and,
// while it runs, Kill (`process/kill`: SIGTERM, then SIGKILL; the agent is told at its next
// step).

import * as vscode from 'vscode';

import type { TillerClient } from './client';
import type { ProcessInfo } from './protocol';

/** A process's state in a few words: "running", "exited with code 1", "killed (SIGTERM)". */
export function processState(process: ProcessInfo): string {
  if (process.state === 'running') {
    return 'running';
  }
  if (process.state === 'ended') {
    return 'ended with the server';
  }
  const how = process.state === 'killed' ? 'killed' : 'exited';
  return process.signal ? `${how} (${process.signal})` : `${how} with code ${process.exitCode}`;
}

/** Read-only documents holding what `process/output` returned, one per process. */
export class ProcessOutputProvider implements vscode.TextDocumentContentProvider, vscode.Disposable {
  static readonly scheme = 'tiller-process';
  private readonly texts = new Map<string, string>();
  private readonly changes = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changes.event;

  /** The URI of process `id`'s output document, now holding `text`. */
  set(id: number, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: ProcessOutputProvider.scheme, path: `/process-${id}.log` });
    this.texts.set(uri.toString(), text);
    this.changes.fire(uri);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? '';
  }

  dispose(): void {
    this.changes.dispose();
  }
}

const SHOW = 'Show the Output';
const KILL = 'Kill';

/** Pick a process, then its output or Kill. Returns what was done (undefined: nothing). */
export async function pickProcess(
  client: TillerClient,
  sessionId: string,
  outputs: ProcessOutputProvider,
): Promise<'output' | 'killed' | undefined> {
  const { processes } = await client.request('process/list', { sessionId });
  if (processes.length === 0) {
    void vscode.window.showInformationMessage('Tiller: no background processes in this conversation');
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(
    processes.map((process) => ({
      label: `${process.id}  ${process.command}`,
      description: processState(process),
      detail: process.pid ? `pid ${process.pid} · ${process.outputBytes} bytes of output` : undefined,
      process,
    })),
    { title: 'Tiller: Background processes' },
  );
  if (!picked) {
    return undefined;
  }
  const { process } = picked;
  const actions = [{ label: SHOW }, ...(process.state === 'running' ? [{ label: KILL }] : [])];
  const action = await vscode.window.showQuickPick(actions, { title: `Tiller: Process ${process.id}` });
  if (!action) {
    return undefined;
  }
  if (action.label === KILL) {
    const killed = await client.request('process/kill', { sessionId, processId: process.id });
    void vscode.window.showInformationMessage(`Tiller: process ${process.id} ${processState(killed.process)}`);
    return 'killed';
  }
  const shown = await client.request('process/output', { sessionId, processId: process.id });
  const header = `# ${shown.process.id}  ${processState(shown.process)}  ${shown.process.command}\n`;
  const uri = outputs.set(process.id, header + shown.output);
  await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri), { preview: true });
  return 'output';
}
