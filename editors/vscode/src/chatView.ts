// The "Tiller" chat webview view: renders ChatOps posted by the extension and sends the user's
// input back. The webview's own script is media/chat.js.

import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';

import type { ChatOp } from './chatModel';
import type { ImageContent, PermissionOutcome } from './protocol';
import { parseFromWebview, type SubmitKind, type ToWebview } from './messages';

export type { SubmitKind } from './messages';

/** What the view needs from the extension. */
export interface ChatHost {
  readonly onOps: vscode.Event<ChatOp[]>;
  /** Everything needed to rebuild the view from scratch (starts with a `clear`). */
  snapshot(): ChatOp[];
  submit(kind: SubmitKind, text: string, images?: ImageContent[]): Promise<void>;
  abort(): Promise<void>;
  /** Resume after an error or a stop (`agent/continue`). */
  continueRun(): Promise<void>;
  /** The view is ready: bring back the saved conversation. */
  resume(): void;
  /** Open a file the agent changed (relative to the workspace). */
  openFile(path: string): void;
  /** Undo a run's changes (session/revert to `entryId`). */
  revert(entryId: string): Promise<void>;
  /** The user answered the permission request `key` in the view. */
  approve(key: string, option: PermissionOutcome): void;
}

export class ChatViewProvider implements vscode.WebviewViewProvider {
  static readonly viewType = 'tiller.chat';

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly host: ChatHost,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    const webview = view.webview;
    webview.options = { enableScripts: true, localResourceRoots: [media] };
    webview.html = this.html(webview, media);
    const post = (message: ToWebview): void => {
      void webview.postMessage(message);
    };
    const subscriptions = [
      this.host.onOps((ops) => post({ type: 'ops', ops })),
      webview.onDidReceiveMessage((raw: unknown) => {
        const message = parseFromWebview(raw);
        if (message?.type === 'ready') {
          post({ type: 'ops', ops: this.host.snapshot() });
          this.host.resume();
        } else if (message?.type === 'submit') {
          void this.host.submit(message.kind, message.text, message.images);
        } else if (message?.type === 'abort') {
          void this.host.abort();
        } else if (message?.type === 'continue') {
          void this.host.continueRun();
        } else if (message?.type === 'open') {
          this.host.openFile(message.path);
        } else if (message?.type === 'revert') {
          void this.host.revert(message.entryId);
        } else if (message?.type === 'copy') {
          void vscode.env.clipboard.writeText(message.text);
        } else if (message?.type === 'insert') {
          void insertAtCursor(message.text);
        } else if (message?.type === 'approve') {
          this.host.approve(message.key, message.option);
        }
      }),
    ];
    view.onDidDispose(() => subscriptions.forEach((s) => s.dispose()));
  }

  private html(webview: vscode.Webview, media: vscode.Uri): string {
    const nonce = randomBytes(16).toString('base64');
    const script = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.js'));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.css'));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data:`,
      `script-src 'nonce-${nonce}'`,
    ].join('; ');
    return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="UTF-8">
  <meta http-equiv="Content-Security-Policy" content="${csp}">
  <meta name="viewport" content="width=device-width, initial-scale=1.0">
  <link rel="stylesheet" href="${style.toString()}">
  <title>Tiller</title>
</head>
<body>
  <main id="transcript" aria-live="polite"></main>
  <p id="welcome">Ask Tiller to read, change and run things in this workspace. File changes and
  commands wait for your approval here. <b>@path</b> sends a file along; <b>Add Selection to
  Tiller</b> (editor context menu, Ctrl+Alt+A) quotes code; the status bar shows what Tiller is doing.</p>
  <ul id="pending"></ul>
  <form id="composer">
    <section id="approvals" aria-label="Waiting for your approval"></section>
    <div id="attachments"></div>
    <textarea id="input" rows="3" placeholder="Ask Tiller… (Enter sends, Shift+Enter for a new line)"></textarea>
    <div class="buttons">
      <button type="submit" id="send">Send</button>
      <button type="button" id="steer" title="Change direction after the current tool calls">Steer</button>
      <button type="button" id="followUp" title="Queue for when the agent is done">Follow-up</button>
      <button type="button" id="stop" class="danger">Stop</button>
      <button type="button" id="attach" class="secondary" title="Attach an image (or paste one into the input)">Image…</button>
      <input type="file" id="attach-file" accept="image/*" multiple hidden>
    </div>
  </form>
  <script nonce="${nonce}" src="${script.toString()}"></script>
</body>
</html>`;
  }
}

/** Put `text` at the cursor (replacing the selection) of the active text editor. */
async function insertAtCursor(text: string): Promise<void> {
  const editor = vscode.window.activeTextEditor ?? vscode.window.visibleTextEditors[0];
  if (!editor) {
    void vscode.window.showInformationMessage('Open a file to insert the code into.');
    return;
  }
  await editor.edit((edit) => {
    for (const selection of editor.selections) {
      edit.replace(selection, text);
    }
  });
}
