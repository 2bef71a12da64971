// VS Code implementations of the server -> client requests (see ClientHandlers in client.ts):
// permission prompts with a diff preview, reads that see unsaved editor content, and writes
// through WorkspaceEdit into the buffer (undoable; not saved: saving is the user's choice).

import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';

import { dismissedOutcome, sliceLines, type ClientHandlers } from './client';
import { proposedContent } from './preview';
import type { PermissionOption, RequestPermissionParams } from './protocol';

export const OPTION_LABELS: Record<PermissionOption, string> = {
  allowOnce: 'Allow',
  allowAlways: 'Always Allow',
  rejectOnce: 'Reject',
  rejectAlways: 'Always Reject',
};

/** Read-only virtual documents holding proposed file contents, for the diff editor. */
export class ProposedContentProvider implements vscode.TextDocumentContentProvider, vscode.Disposable {
  static readonly scheme = 'tiller-proposed';
  private readonly contents = new Map<string, string>();
  private readonly changes = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changes.event;

  /** A URI whose document is `content`; its path keeps the file's name (and so its language). */
  add(filePath: string, key: string, content: string): vscode.Uri {
    const uri = vscode.Uri.from({
      scheme: ProposedContentProvider.scheme,
      path: filePath.split(path.sep).join('/'),
      query: key,
    });
    this.contents.set(uri.toString(), content);
    this.changes.fire(uri);
    return uri;
  }

  forget(uri: vscode.Uri): void {
    this.contents.delete(uri.toString());
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.toString()) ?? '';
  }

  dispose(): void {
    this.changes.dispose();
    this.contents.clear();
  }
}

export interface HandlerContext {
  proposed: ProposedContentProvider;
  /** The working directory of a session (relative paths resolve against it). */
  sessionCwd(sessionId: string): string | undefined;
}

/** The open document for `file`: a file on disk, or a new file not saved yet (untitled). */
function openDocument(file: string): vscode.TextDocument | undefined {
  const wanted = path.resolve(file);
  return vscode.workspace.textDocuments.find(
    (doc) =>
      (doc.uri.scheme === 'file' || doc.uri.scheme === 'untitled') && path.resolve(doc.uri.fsPath) === wanted,
  );
}

/** The editor's content of `file` if it is open (unsaved changes included), else the disk's. */
async function currentText(file: string): Promise<string> {
  const doc = openDocument(file);
  return doc ? doc.getText() : fs.readFile(file, 'utf8');
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.stat(file);
    return true;
  } catch {
    return openDocument(file) !== undefined;
  }
}

export function createHandlers(context: HandlerContext): ClientHandlers {
  const resolve = (sessionId: string, file: string): string => {
    const base =
      context.sessionCwd(sessionId) ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd();
    return path.resolve(base, file);
  };

  async function showDiff(params: RequestPermissionParams, file: string, diff: string): Promise<vscode.Uri[]> {
    const isNew = !(await exists(file));
    const current = isNew ? '' : await currentText(file);
    const proposed = proposedContent(params, current);
    const key = params.toolCallId;
    const title = `${path.basename(file)}: proposed ${params.toolName} (Tiller)`;
    if (proposed === undefined) {
      // Could not reconstruct the result: show the server's diff itself.
      const uri = context.proposed.add(`${file}.diff`, key, diff);
      await vscode.window.showTextDocument(uri, { preview: true });
      return [uri];
    }
    const right = context.proposed.add(file, `${key}-proposed`, proposed);
    const left = isNew
      ? context.proposed.add(file, `${key}-empty`, '')
      : (openDocument(file)?.uri ?? vscode.Uri.file(file));
    await vscode.commands.executeCommand('vscode.diff', left, right, title, { preview: true });
    return isNew ? [left, right] : [right];
  }

  return {
    async requestPermission(params, token) {
      const { preview } = params;
      let message: string;
      let detail: string;
      let shown: vscode.Uri[] = [];
      switch (preview.kind) {
        case 'diff': {
          shown = await showDiff(params, resolve(params.sessionId, preview.path), preview.diff);
          message = `Tiller wants to ${params.toolName} ${vscode.workspace.asRelativePath(preview.path)}`;
          detail = 'The proposed change is open in the diff editor.';
          break;
        }
        case 'command':
          message = 'Tiller wants to run a command';
          detail = `${preview.command}\n\nin ${preview.cwd}`;
          break;
        case 'path':
          message = `Tiller wants to ${params.toolName} ${preview.path}`;
          detail = 'The path is outside the workspace.';
          break;
        case 'none':
          message = `Tiller wants to run ${params.toolName}`;
          detail = '';
          break;
      }
      if (params.reason) {
        detail = detail ? `${params.reason}\n\n${detail}` : params.reason;
      }
      try {
        const labels = params.options.map((option) => OPTION_LABELS[option]);
        const asked = vscode.window.showInformationMessage(message, { modal: true, detail }, ...labels);
        // Tiller sends $/cancelRequest when it stops waiting (abort, timeout): stop waiting too;
        // a late answer would be ignored anyway.
        const cancelled = new Promise<undefined>((done) => {
          if (token.isCancellationRequested) {
            done(undefined);
          }
          token.onCancellationRequested(() => done(undefined));
        });
        const choice = await Promise.race([asked, cancelled]);
        const outcome = params.options.find((option) => OPTION_LABELS[option] === choice);
        return { outcome: outcome ?? dismissedOutcome(params.options) };
      } finally {
        for (const uri of shown) {
          context.proposed.forget(uri);
        }
      }
    },

    async readTextFile(params) {
      const text = await currentText(resolve(params.sessionId, params.path));
      return { content: sliceLines(text, params.line, params.limit) };
    },

    async writeTextFile(params) {
      const file = resolve(params.sessionId, params.path);
      // A file that does not exist yet becomes an untitled document with that path: nothing
      // touches the disk until the user saves.
      const doc =
        openDocument(file) ??
        (await vscode.workspace.openTextDocument(
          (await exists(file)) ? vscode.Uri.file(file) : vscode.Uri.file(file).with({ scheme: 'untitled' }),
        ));
      const edit = new vscode.WorkspaceEdit();
      edit.replace(doc.uri, new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length)), params.content);
      // Into the buffer only (protocol.md: undoable, saving is the user's choice).
      if (!(await vscode.workspace.applyEdit(edit))) {
        throw new Error(`VS Code did not apply the edit to ${file}`);
      }
      return {};
    },
  };
}
