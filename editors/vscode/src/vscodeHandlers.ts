// VS Code implementations of the server -> client requests (see ClientHandlers in client.ts):
// permission requests queued for the chat view (approvals.ts) with a diff preview that closes
// when the request is answered or withdrawn, reads that see unsaved editor content, and writes
// through WorkspaceEdit (undoable), then saved so the disk agrees (`tiller.saveEdits`, default on;
// off leaves them dirty and new files untitled, and initialize says so with `fs.keepsUnsaved`);
// the language servers' diagnostics of files (diagnostics.ts).

import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';

import { describeRequest, type ApprovalQueue } from './approvals';
import type { DiagnosticsTracker } from './diagnostics';
import { elicit, type AskUi } from './mcpAsk';
import { dismissedOutcome, sliceLines, type ClientHandlers } from './client';
import { proposedContent } from './preview';
import type { RequestPermissionParams } from './protocol';

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
  /** Where permission requests wait for an answer (the chat view shows them). */
  approvals: ApprovalQueue;
  /** A file change was allowed: `diff` is what the user approved (for the chat's card). */
  approvedDiff(toolCallId: string, diff: string): void;
  /** `tiller.saveEdits`: save accepted edits (and create new files on disk) at once. */
  saveEdits(): boolean;
  /** The working directory of a session (relative paths resolve against it). */
  sessionCwd(sessionId: string): string | undefined;
  /** Answers client/getDiagnostics (diagnostics.ts). */
  diagnostics: DiagnosticsTracker;
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

async function existsOnDisk(file: string): Promise<boolean> {
  try {
    await fs.stat(file);
    return true;
  } catch {
    return false;
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.stat(file);
    return true;
  } catch {
    return openDocument(file) !== undefined;
  }
}

/** Close the editor tabs showing any of `uris` (as a document or either side of a diff). */
async function closeTabsShowing(uris: readonly vscode.Uri[]): Promise<void> {
  if (uris.length === 0) {
    return;
  }
  const wanted = new Set(uris.map((uri) => uri.toString()));
  const showing = (uri: vscode.Uri | undefined): boolean => uri !== undefined && wanted.has(uri.toString());
  const tabs = vscode.window.tabGroups.all
    .flatMap((group) => group.tabs)
    .filter((tab) => {
      const input = tab.input;
      if (input instanceof vscode.TabInputTextDiff) {
        return showing(input.modified) || showing(input.original);
      }
      return input instanceof vscode.TabInputText && showing(input.uri);
    });
  if (tabs.length > 0) {
    await vscode.window.tabGroups.close(tabs, true);
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

  const ui: AskUi = {
    async pick(items, title) {
      return vscode.window.showQuickPick(items, { title, ignoreFocusOut: true });
    },
    async input(title, value, check) {
      return vscode.window.showInputBox({ title, value, ignoreFocusOut: true, validateInput: check });
    },
    async open(url) {
      return vscode.env.openExternal(vscode.Uri.parse(url, true));
    },
  };

  return {
    async elicit(params) {
      return elicit(ui, params);
    },

    async getDiagnostics(params, token) {
      const paths = params.paths.map((file) => resolve(params.sessionId, file));
      return context.diagnostics.get({ ...params, paths }, token);
    },

    async openUrl(params) {
      const opened = await ui.open(params.url);
      if (!opened) {
        void vscode.window.showWarningMessage(`Tiller: ${params.reason}: open ${params.url}`);
      }
      return {};
    },

    async requestPermission(params, token) {
      const { preview } = params;
      const words = describeRequest(params, (file) => vscode.workspace.asRelativePath(file));
      let shown: vscode.Uri[] = [];
      let settled = false;
      const close = (): void => {
        for (const uri of shown) {
          context.proposed.forget(uri);
        }
        void closeTabsShowing(shown);
      };
      const outcome = await context.approvals.ask(params, words, token, {
        async shown() {
          if (preview.kind === 'diff') {
            shown = await showDiff(params, resolve(params.sessionId, preview.path), preview.diff);
            if (settled) {
              close(); // answered or withdrawn while the diff was opening
            }
          }
        },
        settled() {
          settled = true;
          close();
        },
      });
      if (preview.kind === 'diff' && (outcome === 'allowOnce' || outcome === 'allowAlways')) {
        context.approvedDiff(params.toolCallId, preview.diff);
      }
      return { outcome: outcome ?? dismissedOutcome(params.options) };
    },

    async readTextFile(params) {
      const text = await currentText(resolve(params.sessionId, params.path));
      return { content: sliceLines(text, params.line, params.limit) };
    },

    async writeTextFile(params) {
      const file = resolve(params.sessionId, params.path);
      const save = context.saveEdits();
      const open = openDocument(file);
      const onDisk = await existsOnDisk(file);
      const edit = new vscode.WorkspaceEdit();
      let target: vscode.Uri;
      if (save && !onDisk && open?.uri.scheme !== 'file') {
        // A new file is created on disk (one undoable workspace edit), then saved below.
        target = vscode.Uri.file(file);
        edit.createFile(target, { ignoreIfExists: true });
        edit.insert(target, new vscode.Position(0, 0), params.content);
      } else {
        // saveEdits off: a file that does not exist yet becomes an untitled document with that
        // path, and nothing touches the disk until the user saves.
        const doc =
          open ??
          (await vscode.workspace.openTextDocument(
            onDisk ? vscode.Uri.file(file) : vscode.Uri.file(file).with({ scheme: 'untitled' }),
          ));
        target = doc.uri;
        edit.replace(doc.uri, new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length)), params.content);
      }
      if (!(await vscode.workspace.applyEdit(edit))) {
        throw new Error(`VS Code did not apply the edit to ${file}`);
      }
      if (save) {
        // Disk and buffer agree, so the agent's next bash/grep/ls sees the change.
        const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === target.toString());
        if (doc && !(await doc.save())) {
          throw new Error(`VS Code did not save ${file}`);
        }
      }
      return {};
    },
  };
}
