// Extension entry point: starts `tiller` on demand, feeds its events to the chat view, and
// registers the commands. Protocol logic lives in client.ts; rendering logic in chatModel.ts.

import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';

import { ApprovalQueue } from './approvals';
import { ChatModel, type ChatOp } from './chatModel';
import { ChatViewProvider, type ChatHost, type SubmitKind } from './chatView';
import { TillerClient, clientCapabilities, isRpcError, serverArgs, type ClientHandlers } from './client';
import { ErrorCode, type AgentEvent, type ImageContent, type PermissionOutcome, type TurnCheckpoint } from './protocol';
import { MAX_MENTION_BYTES, findMentions, withFiles } from './mentions';
import { pickMode, pickModel, pickThinking } from './pickers';
import { ProcessOutputProvider, pickProcess } from './processes';
import { StatusItem, type Activity } from './status';
import { DiagnosticsTracker } from './diagnostics';
import { ProposedContentProvider, createHandlers } from './vscodeHandlers';

const FLUSH_MS = 40; // coalesce streamed deltas into at most ~25 view updates a second
const HISTORY_LIMIT = 5000; // ops kept to rebuild a re-created view

interface Connected {
  client: TillerClient;
  sessionId: string;
}

class TillerController implements ChatHost, vscode.Disposable {
  private readonly ops = new vscode.EventEmitter<ChatOp[]>();
  readonly onOps = this.ops.event;
  private readonly sessionCwds = new Map<string, string>();
  private connected: Connected | undefined;
  private starting: Promise<Connected> | undefined;
  private model = new ChatModel();
  private history: ChatOp[] = [];
  private flushTimer: NodeJS.Timeout | undefined;
  private promptsInFlight = 0;
  private stale = false; // settings changed: restart the server when idle
  private saveEdits = true; // tiller.saveEdits of the running server (sent with initialize)
  readonly handlers: ClientHandlers;
  readonly approvals = new ApprovalQueue();
  private readonly status = new StatusItem();
  private readonly diagnostics = new DiagnosticsTracker();

  constructor(
    private readonly output: vscode.OutputChannel,
    proposed: ProposedContentProvider,
    private readonly version: string,
    /** The workspace's memory: the session to resume after a restart or a window reload. */
    private readonly state: vscode.Memento,
  ) {
    this.handlers = createHandlers({
      proposed,
      approvals: this.approvals,
      saveEdits: () => this.saveEdits,
      approvedDiff: (callId, diff) => this.post(this.model.approvedDiff(callId, diff)),
      sessionCwd: (id) => this.sessionCwds.get(id),
      diagnostics: this.diagnostics,
    });
    this.approvals.onChange((items) => {
      this.post([{ op: 'approvals', items }]);
      void vscode.commands.executeCommand('setContext', 'tiller.approvalPending', items.length > 0);
      this.showActivity();
    });
  }

  /** Answer a pending permission request (`key` undefined: the first one, whose diff is open). */
  approve(key: string | undefined, option: PermissionOutcome): void {
    if (!this.approvals.answer(key, option)) {
      this.notice('info', 'That request is no longer waiting for an answer.');
    }
  }

  get busy(): boolean {
    return this.promptsInFlight > 0 || this.model.running;
  }

  /** Tiller's settings changed: restart the server (same conversation) when next needed. */
  settingsChanged(): void {
    if (this.connected && !this.stale) {
      this.notice('info', 'Settings changed: Tiller restarts with them at the next prompt, in this conversation.');
    }
    this.stale = true;
  }

  snapshot(): ChatOp[] {
    return [{ op: 'clear' }, ...this.history, { op: 'state', running: this.busy }];
  }

  async submit(kind: SubmitKind, raw: string, images: ImageContent[] = []): Promise<void> {
    const text = raw.trim();
    if (!text) {
      return;
    }
    try {
      const { client, sessionId } = await this.connect();
      const message = withFiles(text, await this.mentionedFiles(sessionId, text), images);
      if (kind === 'prompt' || !this.busy) {
        await this.run(() => client.prompt({ sessionId, message }));
      } else {
        const send = kind === 'steer' ? client.steer.bind(client) : client.followUp.bind(client);
        await send({ sessionId, message });
        this.post(this.model.queued(kind, text));
      }
    } catch (error) {
      if (isRpcError(error, ErrorCode.AgentBusyError)) {
        this.notice('error', 'Tiller is busy: use Steer, Follow-up or Stop.');
      } else {
        this.notice('error', errorText(error));
      }
      this.ops.fire([{ op: 'draft', text }]); // not kept in the history: a one-time hand-back
    }
  }

  /** Resume the conversation after an error, a stop or the turn limit (`agent/continue`). */
  async continueRun(): Promise<void> {
    try {
      const { client, sessionId } = await this.connect();
      await this.run(() => client.continueRun({ sessionId }));
    } catch (error) {
      this.notice('error', errorText(error));
    }
  }

  /** The view (re)opened: bring back the saved conversation if none is shown yet. */
  resume(): void {
    if (!this.connected && this.state.get<string>(SESSION_KEY)) {
      this.connect().catch((error: unknown) => this.notice('error', errorText(error)));
    }
  }

  /** Pick a saved session of this workspace (`session/list`) and show it (`session/load`). */
  async openHistory(): Promise<void> {
    const { client } = await this.connect();
    const cwd = workspaceCwd();
    const { sessions } = await client.listSessions({ cwd, limit: 100 });
    const picked = await vscode.window.showQuickPick(
      sessions.map((info) => ({
        label: info.title || '(no prompt yet)',
        description:
          info.sessionId === this.connected?.sessionId
            ? `${info.messageCount} messages (this chat)`
            : `${info.messageCount} messages`,
        detail: info.updated > 0 ? new Date(info.updated).toLocaleString() : 'nothing saved yet',
        sessionId: info.sessionId,
      })),
      { title: 'Tiller: Open a Conversation', matchOnDetail: true },
    );
    if (!picked) {
      return;
    }
    if (this.busy) {
      await this.abort();
    }
    await this.show(client, picked.sessionId);
  }

  async abort(): Promise<void> {
    const connected = this.connected;
    if (!connected) {
      return;
    }
    try {
      await connected.client.abort({ sessionId: connected.sessionId });
    } catch (error) {
      if (!isRpcError(error, ErrorCode.NoActiveRunError)) {
        this.notice('error', errorText(error));
      }
    }
  }

  async newChat(): Promise<void> {
    if (this.busy) {
      await this.abort();
    }
    this.model = new ChatModel();
    this.history = [];
    this.ops.fire([{ op: 'clear' }]);
    const connected = this.connected;
    if (connected && !this.stale) {
      const cwd = this.sessionCwds.get(connected.sessionId);
      const { sessionId } = await connected.client.newSession(cwd ? { cwd } : {});
      if (cwd) {
        this.sessionCwds.set(sessionId, cwd);
      }
      this.connected = { client: connected.client, sessionId };
      await this.state.update(SESSION_KEY, sessionId);
      void this.refreshState();
    } else {
      await this.state.update(SESSION_KEY, undefined); // the next start makes a new one
    }
  }

  /** Pick the conversation's model (models/list, agent/setModel). */
  async pickModel(): Promise<void> {
    const { client, sessionId } = await this.connect();
    const state = await client.getState({ sessionId });
    if (await pickModel(client, sessionId, state.model)) {
      await this.refreshState();
    }
  }

  /** Pick the conversation's thinking level (agent/setThinkingLevel). */
  async pickThinking(): Promise<void> {
    const { client, sessionId } = await this.connect();
    const state = await client.getState({ sessionId });
    if (await pickThinking(client, sessionId, state.thinkingLevel)) {
      await this.refreshState();
    }
  }

  /** The conversation's background processes: pick one for its output or Kill. */
  async pickProcess(outputs: ProcessOutputProvider): Promise<void> {
    const { client, sessionId } = await this.connect();
    await pickProcess(client, sessionId, outputs);
  }

  /** Pick the conversation's permission mode (agent/setPermissionMode). */
  async pickMode(): Promise<void> {
    const { client, sessionId } = await this.connect();
    const state = await client.getState({ sessionId });
    if (await pickMode(client, sessionId, state.permissionMode)) {
      await this.refreshState();
    }
  }

  openFile(file: string): void {
    const cwd = (this.connected && this.sessionCwds.get(this.connected.sessionId)) ?? workspaceCwd();
    void vscode.window.showTextDocument(vscode.Uri.file(path.resolve(cwd, file)), { preview: true });
  }

  /** Put back the files the agent changed since `entryId` (its changes only; conflicts stay). */
  async revert(entryId: string): Promise<void> {
    try {
      const { client, sessionId } = await this.connect();
      const result = await client.request('session/revert', { sessionId, entryId });
      const parts = [`Undone: ${result.restored.join(', ') || 'nothing'}.`];
      if (result.conflicts.length > 0) {
        parts.push(`Left alone (changed since by someone else): ${result.conflicts.join(', ')}.`);
      }
      if (result.skipped.length > 0) {
        parts.push(`Skipped: ${result.skipped.map((s) => `${s.path} (${s.reason})`).join(', ')}.`);
      }
      this.notice('info', parts.join(' '));
    } catch (error) {
      this.notice('error', errorText(error));
    }
  }

  /** Append `text` to the chat input (Add selection to Tiller). */
  addToInput(text: string): void {
    this.ops.fire([{ op: 'input', text }]);
  }

  async dispose(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.status.dispose();
    this.diagnostics.dispose();
    const client = this.connected?.client;
    this.connected = undefined;
    this.ops.dispose();
    await client?.dispose();
  }

  // ------------------------------------------------------------------------------------------

  /** The workspace files `text` mentions as `@path` (editor content, unsaved changes included). */
  private async mentionedFiles(sessionId: string, text: string): Promise<Array<{ path: string; content: string }>> {
    const cwd = this.sessionCwds.get(sessionId) ?? workspaceCwd();
    const files: Array<{ path: string; content: string }> = [];
    for (const mention of findMentions(text)) {
      const uri = vscode.Uri.file(path.resolve(cwd, mention));
      try {
        const stat = await vscode.workspace.fs.stat(uri);
        if (stat.type !== vscode.FileType.File || stat.size > MAX_MENTION_BYTES) {
          continue;
        }
        const doc = await vscode.workspace.openTextDocument(uri);
        files.push({ path: mention, content: doc.getText() });
      } catch {
        // not a file: the mention stays plain text
      }
    }
    return files;
  }

  private async run(start: () => Promise<unknown>): Promise<void> {
    this.promptsInFlight++;
    this.post([{ op: 'state', running: true }]);
    try {
      await start();
    } finally {
      this.promptsInFlight--;
      if (!this.busy) {
        this.post([...this.model.flush(), { op: 'state', running: false }]);
      }
    }
  }

  private async connect(): Promise<Connected> {
    if (this.connected && this.stale && !this.busy) {
      const old = this.connected.client;
      this.connected = undefined;
      void old.dispose();
    }
    if (this.connected && !this.connected.client.exited) {
      return this.connected;
    }
    this.starting ??= this.start().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async start(): Promise<Connected> {
    const config = vscode.workspace.getConfiguration('tiller');
    const cwd = workspaceCwd();
    const command = config.get<string>('path', 'tiller') || 'tiller';
    const args = serverArgs({
      provider: config.get<string>('provider') || undefined,
      model: config.get<string>('model') || undefined,
      baseUrl: config.get<string>('baseUrl') || undefined,
      extraArgs: config.get<string[]>('extraArgs', []),
      cwd,
    });
    this.stale = false;
    this.saveEdits = config.get<boolean>('saveEdits', true);
    this.output.appendLine(`[tiller-vscode] starting: ${command} ${args.join(' ')}`);
    const client = TillerClient.spawn({
      command,
      args,
      cwd,
      handlers: this.handlers,
      capabilities: clientCapabilities({ keepsUnsaved: !this.saveEdits }),
      clientInfo: { name: 'tiller-vscode', version: this.version },
      onStderr: (text) => this.output.append(text),
    });
    client.onEvent((event) => this.onEvent(client, event));
    client.onExit((info) => {
      const how = info.error ? info.error.message : `exit code ${String(info.code ?? info.signal)}`;
      this.output.appendLine(`[tiller-vscode] tiller stopped (${how})`);
      if (this.connected?.client === client) {
        this.connected = undefined;
        this.approvals.clear();
        if (info.error || info.code !== 0) {
          this.notice('error', `Tiller stopped (${how}). See the "Tiller" output for its log.`);
        }
        this.model.running = false;
        this.post([{ op: 'state', running: false }]);
      }
    });
    try {
      await client.initialize();
      const saved = this.state.get<string>(SESSION_KEY);
      if (saved && (await this.show(client, saved, true))) {
        return this.connected!;
      }
      const { sessionId } = await client.newSession({ cwd });
      this.sessionCwds.set(sessionId, cwd);
      this.connected = { client, sessionId };
      await this.state.update(SESSION_KEY, sessionId);
      void this.refreshState();
      return this.connected;
    } catch (error) {
      void client.dispose();
      throw error;
    }
  }

  /**
   * Make `sessionId` the conversation of this window (`session/load`) and draw its history.
   * With `quiet`, a session that cannot be loaded (deleted, unreadable) is false, not an error.
   */
  private async show(client: TillerClient, sessionId: string, quiet = false): Promise<boolean> {
    let loaded;
    try {
      loaded = await client.loadSession({ sessionId });
    } catch (error) {
      if (quiet) {
        this.output.appendLine(`[tiller-vscode] could not resume ${sessionId}: ${errorText(error)}`);
        return false;
      }
      throw error;
    }
    this.sessionCwds.set(loaded.sessionId, loaded.cwd);
    this.connected = { client, sessionId: loaded.sessionId };
    await this.state.update(SESSION_KEY, loaded.sessionId);
    this.model = new ChatModel();
    this.history = [];
    this.ops.fire([{ op: 'clear' }]);
    const turns = await this.turnCheckpoints(client, loaded.sessionId);
    this.post([...this.model.replay(loaded.messages, loaded.entryIds, turns, loaded.toolCalls ?? []), { op: 'state', running: this.busy }]);
    void this.refreshState();
    return true;
  }

  /** A loaded session's turns that changed files (session/changes); none when it has no checkpoints. */
  private async turnCheckpoints(client: TillerClient, sessionId: string): Promise<TurnCheckpoint[]> {
    try {
      const result = await client.request('session/changes', { sessionId });
      return result.checkpoints;
    } catch (error) {
      this.output.appendLine(`[tiller-vscode] no changed files for ${sessionId}: ${errorText(error)}`);
      return [];
    }
  }

  private onEvent(client: TillerClient, event: AgentEvent): void {
    const session = this.connected?.sessionId;
    if (this.connected?.client !== client || (event.sessionId !== session && event.parentSessionId !== session)) {
      return; // another conversation's (its subagents' go to their task call's card)
    }
    if (event.type === 'agent_settled') {
      void this.refreshState();
    }
    const ops = this.model.apply(event);
    if (ops.length > 0) {
      clearTimeout(this.flushTimer);
      this.flushTimer = undefined;
      this.post(ops);
    } else {
      this.flushTimer ??= setTimeout(() => {
        this.flushTimer = undefined;
        this.post(this.model.flush());
      }, FLUSH_MS);
    }
  }

  private showActivity(): void {
    const activity: Activity = this.approvals.views().length > 0 ? 'waiting' : this.busy ? 'working' : 'idle';
    this.status.setActivity(activity);
  }

  /** The model, mode and usage of the conversation, for the status bar (errors only logged). */
  private async refreshState(): Promise<void> {
    const connected = this.connected;
    if (!connected) {
      return;
    }
    try {
      this.status.setState(await connected.client.getState({ sessionId: connected.sessionId }));
    } catch (error) {
      this.output.appendLine(`[tiller-vscode] agent/getState: ${errorText(error)}`);
    }
  }

  private notice(level: 'info' | 'error', text: string): void {
    this.post([{ op: 'notice', level, text }]);
  }

  private post(ops: ChatOp[]): void {
    if (ops.length === 0) {
      return;
    }
    if (ops.some((op) => op.op === 'state')) {
      this.showActivity();
    }
    this.history.push(...ops);
    if (this.history.length > HISTORY_LIMIT) {
      this.history = this.history.slice(-HISTORY_LIMIT);
    }
    this.ops.fire(ops);
  }
}

const SESSION_KEY = 'tiller.sessionId';

/** The selection as `path:lines` and a fenced block, for the prompt. */
function selectionSnippet(editor: vscode.TextEditor): string {
  const doc = editor.document;
  const selection = editor.selection;
  const range = selection;
  const first = range.start.line + 1;
  const last = range.end.character === 0 && range.end.line > range.start.line ? range.end.line : range.end.line + 1;
  const lines = first === last ? `${first}` : `${first}-${last}`;
  const fence = doc.getText(range).includes('```') ? '````' : '```';
  return `${vscode.workspace.asRelativePath(doc.uri)}:${lines}\n${fence}${doc.languageId}\n${doc.getText(range).replace(/\n$/, '')}\n${fence}`;
}

function workspaceCwd(): string {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? os.homedir();
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

let controller: TillerController | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('Tiller');
  const proposed = new ProposedContentProvider();
  const processOutputs = new ProcessOutputProvider();
  const version = String((context.extension.packageJSON as { version?: unknown }).version ?? '0.0.0');
  const tiller = new TillerController(output, proposed, version, context.workspaceState);
  controller = tiller;

  const ask = async (kind: SubmitKind, prompt: string): Promise<void> => {
    const text = await vscode.window.showInputBox({ prompt, ignoreFocusOut: true });
    if (text) {
      await vscode.commands.executeCommand(`${ChatViewProvider.viewType}.focus`);
      await tiller.submit(kind, text);
    }
  };

  context.subscriptions.push(
    output,
    proposed,
    { dispose: () => void tiller.dispose() },
    vscode.workspace.registerTextDocumentContentProvider(ProposedContentProvider.scheme, proposed),
    processOutputs,
    vscode.workspace.registerTextDocumentContentProvider(ProcessOutputProvider.scheme, processOutputs),
    vscode.window.registerWebviewViewProvider(
      ChatViewProvider.viewType,
      new ChatViewProvider(context.extensionUri, tiller),
      { webviewOptions: { retainContextWhenHidden: true } },
    ),
    vscode.commands.registerCommand('tiller.prompt', () => ask('prompt', 'Ask Tiller')),
    vscode.commands.registerCommand('tiller.steer', () =>
      ask('steer', 'Steer Tiller (delivered after the current tool calls)'),
    ),
    vscode.commands.registerCommand('tiller.followUp', () =>
      ask('followUp', 'Follow-up for Tiller (delivered when it is done)'),
    ),
    vscode.commands.registerCommand('tiller.abort', () => tiller.abort()),
    vscode.commands.registerCommand('tiller.newChat', () => tiller.newChat()),
    vscode.commands.registerCommand('tiller.history', () =>
      tiller.openHistory().catch((error: unknown) => vscode.window.showErrorMessage(errorText(error))),
    ),
    vscode.commands.registerCommand('tiller.continue', () => tiller.continueRun()),
    vscode.commands.registerCommand('tiller.pickModel', () =>
      tiller.pickModel().catch((error: unknown) => vscode.window.showErrorMessage(errorText(error))),
    ),
    vscode.commands.registerCommand('tiller.pickThinking', () =>
      tiller.pickThinking().catch((error: unknown) => vscode.window.showErrorMessage(errorText(error))),
    ),
    vscode.commands.registerCommand('tiller.pickMode', () =>
      tiller.pickMode().catch((error: unknown) => vscode.window.showErrorMessage(errorText(error))),
    ),
    vscode.commands.registerCommand('tiller.processes', () =>
      tiller.pickProcess(processOutputs).catch((error: unknown) => vscode.window.showErrorMessage(errorText(error))),
    ),
    vscode.commands.registerCommand('tiller.addSelection', async () => {
      const editor = vscode.window.activeTextEditor;
      if (!editor) {
        return;
      }
      await vscode.commands.executeCommand(`${ChatViewProvider.viewType}.focus`);
      tiller.addToInput(
        editor.selection.isEmpty
          ? `@${vscode.workspace.asRelativePath(editor.document.uri, false)}` // the active file
          : selectionSnippet(editor),
      );
    }),
    vscode.commands.registerCommand('tiller.approval.allow', () => tiller.approve(undefined, 'allowOnce')),
    vscode.commands.registerCommand('tiller.approval.allowAlways', () =>
      tiller.approve(undefined, 'allowAlways'),
    ),
    vscode.commands.registerCommand('tiller.approval.reject', () => tiller.approve(undefined, 'rejectOnce')),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('tiller')) {
        tiller.settingsChanged();
      }
    }),
  );
}

export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}
