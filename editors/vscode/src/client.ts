// The Tiller protocol client: spawns `tiller`, speaks JSON-RPC with LSP framing over its stdio,
// and exposes typed wrappers, an `agent/event` emitter and the server -> client request handlers.
//
// This module must not import `vscode`: the extension injects VS Code implementations of the
// handlers, and the tests drive it under plain Node against the real server.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import {
  CancellationToken,
  Emitter,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
  createMessageConnection,
  type Disposable,
  type Event,
  type MessageConnection,
} from 'vscode-jsonrpc/node';

import {
  ErrorCode,
  PermissionOutcome,
  type AgentEvent,
  type ClientCapabilities,
  type ElicitParams,
  type ElicitResult,
  type EmptyResult,
  type GetDiagnosticsParams,
  type GetDiagnosticsResult,
  type GetMessagesResult,
  type GetStateResult,
  type InitializeResult,
  type Methods,
  type OpenUrlParams,
  type PromptParams,
  type QueueParams,
  type QueueResult,
  type ReadTextFileParams,
  type ReadTextFileResult,
  type RequestPermissionParams,
  type RequestPermissionResult,
  type RunResultModel,
  type ServerNotifications,
  type ServerRequests,
  type SessionListParams,
  type SessionNewParams,
  type SessionNewResult,
  type SessionListResult,
  type SessionLoadResult,
  type SessionParams,
  type SetPermissionModeParams,
  type SetPermissionModeResult,
  type WriteTextFileParams,
} from './protocol';

export { CancellationTokenSource, ResponseError } from 'vscode-jsonrpc/node';
export type { CancellationToken, Disposable, Event } from 'vscode-jsonrpc/node';

const EVENT_METHOD: keyof ServerNotifications = 'agent/event';

/** The code this client answers a file request with when the file does not exist (ACP's). */
export const RESOURCE_NOT_FOUND = -32002;

/** What this client tells the server it can do (sent with `initialize`). */
export const CLIENT_CAPABILITIES: ClientCapabilities = {
  permissions: true,
  fs: { readTextFile: true, writeTextFile: true },
  elicitation: { form: true, url: true },
  openUrl: true,
  diagnostics: true,
};

/**
 * The server -> client requests (sent only because `initialize` declares CLIENT_CAPABILITIES;
 * the server cancels with `$/cancelRequest` when it stops waiting), answered by the embedder: the extension supplies VS Code
 * implementations, tests supply fakes. Params are validated before a handler sees them.
 * Throw a `ResponseError` to choose the error code; a Node error with `code: 'ENOENT'` is
 * answered with -32002 (resource not found), anything else with -32603 and its message.
 */
export interface ClientHandlers {
  requestPermission(
    params: RequestPermissionParams,
    token: CancellationToken,
  ): Promise<RequestPermissionResult>;
  readTextFile(params: ReadTextFileParams, token: CancellationToken): Promise<ReadTextFileResult>;
  writeTextFile(params: WriteTextFileParams, token: CancellationToken): Promise<EmptyResult>;
  /** An MCP server's question (a form, or a page to open). */
  elicit(params: ElicitParams, token: CancellationToken): Promise<ElicitResult>;
  /** Open an MCP server's sign-in page in the browser. */
  openUrl(params: OpenUrlParams, token: CancellationToken): Promise<EmptyResult>;
  /** The diagnostics of files, once the language servers have caught up (within timeoutMs). */
  getDiagnostics(params: GetDiagnosticsParams, token: CancellationToken): Promise<GetDiagnosticsResult>;
}

/** CLIENT_CAPABILITIES, plus `fs.keepsUnsaved` when written files may stay unsaved. */
export function clientCapabilities(options: { keepsUnsaved?: boolean } = {}): ClientCapabilities {
  return options.keepsUnsaved
    ? { ...CLIENT_CAPABILITIES, fs: { ...CLIENT_CAPABILITIES.fs, keepsUnsaved: true } }
    : CLIENT_CAPABILITIES;
}

export interface ClientOptions {
  handlers: ClientHandlers;
  /** Sent with `initialize` (default CLIENT_CAPABILITIES). */
  capabilities?: ClientCapabilities;
  clientInfo?: { name: string; version?: string };
}

export interface SpawnOptions extends ClientOptions {
  /** The server executable (`tiller.path`). */
  command: string;
  args?: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Each chunk the server writes to stderr (its log). */
  onStderr?: (text: string) => void;
  /** How long `dispose` waits for the server to exit after closing its stdin (default 3000). */
  disposeTimeoutMs?: number;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started (e.g. ENOENT). */
  error?: Error;
  /** The last lines the server wrote to stderr. */
  stderrTail: string;
}

/** A request failed because the server process is gone (or never started). */
export class ServerExitedError extends Error {
  constructor(
    message: string,
    readonly exit: ExitInfo,
  ) {
    super(message);
    this.name = 'ServerExitedError';
  }
}

/** True if `error` is a JSON-RPC error response with `code` (e.g. `ErrorCode.AgentBusyError`). */
export function isRpcError(error: unknown, code?: number): error is ResponseError<unknown> {
  return error instanceof ResponseError && (code === undefined || error.code === code);
}

const STDERR_TAIL_CHARS = 4000;

export class TillerClient {
  private readonly events = new Emitter<AgentEvent>();
  private readonly exits = new Emitter<ExitInfo>();
  private exitInfo: ExitInfo | undefined;
  private readonly closed: Promise<never>;
  private rejectClosed!: (error: Error) => void;
  private stderrTail = '';
  private readonly clientInfo: { name: string; version?: string };
  private readonly capabilities: ClientCapabilities;
  private readonly disposeTimeoutMs: number;

  /** Every `agent/event` notification, in arrival order. */
  readonly onEvent: Event<AgentEvent> = this.events.event;
  /** The server process ended (or could not start); pending requests have been rejected. */
  readonly onExit: Event<ExitInfo> = this.exits.event;

  private constructor(
    private readonly connection: MessageConnection,
    private readonly child: ChildProcess | undefined,
    options: ClientOptions & { disposeTimeoutMs?: number },
  ) {
    this.clientInfo = options.clientInfo ?? { name: 'tiller-vscode' };
    this.capabilities = options.capabilities ?? CLIENT_CAPABILITIES;
    this.disposeTimeoutMs = options.disposeTimeoutMs ?? 3000;
    this.closed = new Promise<never>((_, reject) => {
      this.rejectClosed = reject;
    });
    this.closed.catch(() => undefined); // observed by each request's race
    connection.onNotification(EVENT_METHOD, (params: unknown) => {
      this.events.fire(params as AgentEvent);
    });
    registerHandlers(connection, options.handlers);
    connection.listen();
  }

  /** Spawn the server and connect to its stdio (LSP framing). */
  static spawn(options: SpawnOptions): TillerClient {
    const child = spawn(options.command, options.args ?? [], {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      // Its own process group, so a stuck server can be killed with everything it started.
      detached: process.platform !== 'win32',
      windowsHide: true,
    });
    const connection = createMessageConnection(
      new StreamMessageReader(child.stdout!),
      new StreamMessageWriter(child.stdin!),
    );
    const client = new TillerClient(connection, child, options);
    client.watch(child, options);
    return client;
  }

  /** Connect over existing streams (tests, or a server started elsewhere). */
  static connect(input: Readable, output: Writable, options: ClientOptions): TillerClient {
    const connection = createMessageConnection(
      new StreamMessageReader(input),
      new StreamMessageWriter(output),
    );
    const client = new TillerClient(connection, undefined, options);
    connection.onClose(() =>
      client.finish({ code: null, signal: null, stderrTail: '' }, 'the connection closed'),
    );
    return client;
  }

  /** The server's process id (undefined for `connect`ed clients or a failed spawn). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Set once the server has exited. */
  get exited(): ExitInfo | undefined {
    return this.exitInfo;
  }

  // ------------------------------------------------------------------------------------------
  // Methods (protocol.md, "Methods")

  initialize(): Promise<InitializeResult> {
    return this.request('initialize', {
      clientInfo: this.clientInfo,
      capabilities: this.capabilities,
    });
  }

  newSession(params: SessionNewParams = {}): Promise<SessionNewResult> {
    return this.request('session/new', params);
  }

  listSessions(params: SessionListParams = {}): Promise<SessionListResult> {
    return this.request('session/list', params);
  }

  /** Makes a saved session live; its history to render. Unknown id: -32013. */
  loadSession(params: { sessionId: string }): Promise<SessionLoadResult> {
    return this.request('session/load', params);
  }

  /** Resolves when the run has ended. Cancelling `token` sends `$/cancelRequest` (an abort). */
  prompt(params: PromptParams, token?: CancellationToken): Promise<RunResultModel> {
    return this.request('agent/prompt', params, token);
  }

  continueRun(params: SessionParams = {}, token?: CancellationToken): Promise<RunResultModel> {
    return this.request('agent/continue', params, token);
  }

  steer(params: QueueParams): Promise<QueueResult> {
    return this.request('agent/steer', params);
  }

  followUp(params: QueueParams): Promise<QueueResult> {
    return this.request('agent/followUp', params);
  }

  /** Rejects with -32011 (`ErrorCode.NoActiveRunError`) when nothing runs. */
  abort(params: SessionParams = {}): Promise<EmptyResult> {
    return this.request('agent/abort', params);
  }

  getState(params: SessionParams = {}): Promise<GetStateResult> {
    return this.request('agent/getState', params);
  }

  getMessages(params: SessionParams = {}): Promise<GetMessagesResult> {
    return this.request('agent/getMessages', params);
  }

  setPermissionMode(params: SetPermissionModeParams): Promise<SetPermissionModeResult> {
    return this.request('agent/setPermissionMode', params);
  }

  /** Any method of protocol.md, its params and result typed by its name. */
  async request<M extends keyof Methods>(
    method: M,
    params: Methods[M]['params'],
    token?: CancellationToken,
  ): Promise<Methods[M]['result']> {
    type R = Methods[M]['result'];
    if (this.exitInfo) {
      throw this.exitError();
    }
    const sent =
      token === undefined
        ? this.connection.sendRequest<R>(method, params)
        : this.connection.sendRequest<R>(method, params, token);
    return Promise.race([sent, this.closed]);
  }

  // ------------------------------------------------------------------------------------------
  // Shutting down

  /**
   * Close the server's stdin (it then aborts its runs, kills their tools and exits), wait up to
   * `timeoutMs` for it to exit, then kill its whole process tree. Resolves with the exit info.
   */
  async dispose(timeoutMs: number = this.disposeTimeoutMs): Promise<ExitInfo> {
    const child = this.child;
    if (child === undefined) {
      this.connection.dispose();
      this.finish({ code: null, signal: null, stderrTail: '' }, 'the client was disposed');
      return this.exitInfo!;
    }
    if (!this.exitInfo) {
      const gone = new Promise<void>((resolve) => this.onExit(() => resolve()));
      try {
        child.stdin?.end();
      } catch {
        // already closed
      }
      if (!(await settlesWithin(gone, timeoutMs)) && child.pid !== undefined) {
        killProcessTree(child.pid);
        await settlesWithin(gone, 2000);
      }
    }
    this.connection.dispose();
    return this.exitInfo ?? { code: null, signal: null, stderrTail: this.stderrTail };
  }

  // ------------------------------------------------------------------------------------------

  private watch(child: ChildProcess, options: SpawnOptions): void {
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL_CHARS);
      options.onStderr?.(text);
    });
    // Writes after the server died fail with EPIPE; the exit handling reports it.
    child.stdin?.on('error', () => undefined);
    child.on('error', (error) => {
      this.finish(
        { code: null, signal: null, error, stderrTail: this.stderrTail },
        `could not start ${JSON.stringify(options.command)}: ${error.message}`,
      );
    });
    let exitCode: number | null = null;
    let exitSignal: NodeJS.Signals | null = null;
    const done = (): void => {
      const how = exitSignal ? `signal ${exitSignal}` : `code ${String(exitCode)}`;
      this.finish(
        { code: exitCode, signal: exitSignal, stderrTail: this.stderrTail },
        `tiller exited with ${how}`,
      );
    };
    child.on('exit', (code, signal) => {
      exitCode = code;
      exitSignal = signal;
      // 'close' follows once stdout is drained (so the last events are delivered); a
      // grandchild holding the pipes open must not keep the client waiting forever.
      setTimeout(done, 1000).unref();
    });
    child.on('close', done);
  }

  private finish(info: ExitInfo, why: string): void {
    if (this.exitInfo) {
      return;
    }
    this.exitInfo = info;
    const tail = info.stderrTail.trim().split('\n').slice(-5).join('\n');
    this.rejectClosed(new ServerExitedError(tail ? `${why}:\n${tail}` : why, info));
    this.exits.fire(info);
  }

  private exitError(): Error {
    return new ServerExitedError('tiller is not running', this.exitInfo!);
  }
}

function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    promise.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}

// ---------------------------------------------------------------------------------------------
// Killing a process tree

/** The pids of every descendant of `root` (POSIX `ps`; empty if unavailable). */
export function descendantPids(root: number): number[] {
  const ps = spawnSync('ps', ['-A', '-o', 'pid=', '-o', 'ppid='], { encoding: 'utf8' });
  if (ps.status !== 0 || typeof ps.stdout !== 'string') {
    return [];
  }
  const children = new Map<number, number[]>();
  for (const line of ps.stdout.split('\n')) {
    const [pid, ppid] = line.trim().split(/\s+/).map(Number);
    if (pid === undefined || ppid === undefined || Number.isNaN(pid) || Number.isNaN(ppid)) {
      continue;
    }
    const list = children.get(ppid) ?? [];
    list.push(pid);
    children.set(ppid, list);
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      if (!found.includes(child)) {
        found.push(child);
        queue.push(child);
      }
    }
  }
  return found;
}

/** SIGKILL `pid`, its process group and all its descendants (`taskkill /T /F` on Windows). */
export function killProcessTree(pid: number): void {
  if (process.platform === 'win32') {
    spawnSync('taskkill', ['/pid', String(pid), '/T', '/F'], { windowsHide: true });
    return;
  }
  const targets = [pid, ...descendantPids(pid)];
  for (const target of targets) {
    try {
      process.kill(target, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  try {
    process.kill(-pid, 'SIGKILL'); // the group the server leads (spawned detached)
  } catch {
    // no such group
  }
}

// ---------------------------------------------------------------------------------------------
// Server -> client requests

type Check = (value: unknown) => boolean;
const isString: Check = (v) => typeof v === 'string';
const isPositiveInt: Check = (v) => typeof v === 'number' && Number.isInteger(v) && v >= 1;
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function invalid(method: string, problems: string[]): ResponseError<void> {
  return new ResponseError(ErrorCode.InvalidParams, `Invalid params: ${method}: ${problems.join('; ')}`);
}

/** Check `params` of server request `method` against `required`/`optional` field checks; return
 * them typed, or throw -32602. */
function validate<M extends keyof ServerRequests>(
  method: M,
  params: unknown,
  required: Record<string, Check>,
  optional: Record<string, Check> = {},
): ServerRequests[M]['params'] {
  if (!isObject(params)) {
    throw invalid(method, ['params must be an object']);
  }
  const problems: string[] = [];
  for (const [field, check] of Object.entries(required)) {
    if (!(field in params)) {
      problems.push(`${field}: Field required`);
    } else if (!check(params[field])) {
      problems.push(`${field}: invalid value`);
    }
  }
  for (const [field, check] of Object.entries(optional)) {
    if (field in params && !check(params[field])) {
      problems.push(`${field}: invalid value`);
    }
  }
  if (problems.length > 0) {
    throw invalid(method, problems);
  }
  return params as unknown as ServerRequests[M]['params'];
}

function isPreview(value: unknown): value is RequestPermissionParams['preview'] {
  if (!isObject(value)) {
    return false;
  }
  switch (value.kind) {
    case 'diff':
      return isString(value.path) && isString(value.diff);
    case 'command':
      return isString(value.command) && isString(value.cwd);
    case 'path':
      return isString(value.path);
    default:
      return false;
  }
}

function isPermissionOption(value: unknown): value is PermissionOutcome {
  return typeof value === 'string' && (PermissionOutcome as readonly string[]).includes(value);
}

function isOptionList(value: unknown): value is PermissionOutcome[] {
  return Array.isArray(value) && value.length > 0 && value.every(isPermissionOption);
}

export function parsePermissionParams(params: unknown): RequestPermissionParams {
  return validate('client/requestPermission', params, {
    sessionId: isString,
    toolCallId: isString,
    toolName: isString,
    args: isObject,
    preview: isPreview,
    options: isOptionList,
  }, { reason: isString });
}

export function parseReadParams(params: unknown): ReadTextFileParams {
  return validate(
    'client/readTextFile',
    params,
    { sessionId: isString, path: isString },
    { line: isPositiveInt, limit: isPositiveInt },
  );
}

export function parseWriteParams(params: unknown): WriteTextFileParams {
  return validate('client/writeTextFile', params, {
    sessionId: isString,
    path: isString,
    content: isString,
  });
}

export function parseElicitParams(params: unknown): ElicitParams {
  const parsed = validate('client/elicit', params, {
    sessionId: isString,
    server: isString,
    mode: (value) => value === 'form' || value === 'url',
    message: isString,
  }, { toolCallId: isString, requestedSchema: isObject, url: isString, elicitationId: isString });
  if (parsed.mode === 'url' && typeof parsed.url !== 'string') {
    throw invalid('client/elicit', ['url: Field required']);
  }
  return parsed;
}

export function parseOpenUrlParams(params: unknown): OpenUrlParams {
  return validate('client/openUrl', params, {
    sessionId: isString,
    server: isString,
    url: isString,
    reason: isString,
  });
}

export function parseGetDiagnosticsParams(params: unknown): GetDiagnosticsParams {
  return validate('client/getDiagnostics', params, {
    sessionId: isString,
    paths: (value) => Array.isArray(value) && value.length > 0 && value.every(isString),
    timeoutMs: (value) => typeof value === 'number' && Number.isFinite(value) && value >= 0,
  }, { toolCallId: isString });
}

const ELICIT_ACTIONS: readonly string[] = ['accept', 'decline', 'cancel'];

/** The answer when the user dismisses a permission prompt: the mildest rejection offered. */
export function dismissedOutcome(options: readonly PermissionOutcome[]): PermissionOutcome {
  if (options.includes('rejectOnce')) {
    return 'rejectOnce';
  }
  return options.includes('rejectAlways') ? 'rejectAlways' : 'rejectOnce';
}

/** Lines `line` (1-based) .. `line + limit - 1` of `text`, keeping line endings. */
export function sliceLines(text: string, line?: number, limit?: number): string {
  if (line === undefined && limit === undefined) {
    return text;
  }
  const lines = text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
  const start = (line ?? 1) - 1;
  const end = limit === undefined ? lines.length : start + limit;
  return lines.slice(start, end).join('');
}

function toResponseError(method: string, error: unknown): ResponseError<unknown> {
  if (error instanceof ResponseError) {
    return error;
  }
  const code = isObject(error) ? error.code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  if (code === 'ENOENT' || code === 'FileNotFound' || code === 'EntryNotFound') {
    return new ResponseError(RESOURCE_NOT_FOUND, `${method}: ${message}`);
  }
  return new ResponseError(ErrorCode.InternalError, `${method}: ${message}`);
}

/** Register the validated, error-mapped handlers of the server -> client requests. */
export function registerHandlers(connection: MessageConnection, handlers: ClientHandlers): Disposable[] {
  function on<M extends keyof ServerRequests>(
    method: M,
    parse: (params: unknown) => ServerRequests[M]['params'],
    handle: (params: ServerRequests[M]['params'], token: CancellationToken) => Promise<ServerRequests[M]['result']>,
  ): Disposable {
    return connection.onRequest(method, async (params: unknown, token: CancellationToken) => {
      const parsed = parse(params);
      try {
        return await handle(parsed, token);
      } catch (error) {
        throw toResponseError(method, error);
      }
    });
  }
  return [
    on('client/requestPermission', parsePermissionParams, async (params, token) => {
      const result = await handlers.requestPermission(params, token);
      if (!params.options.includes(result.outcome)) {
        throw new ResponseError(
          ErrorCode.InternalError,
          `client/requestPermission: outcome ${JSON.stringify(result.outcome)} is not one of the options`,
        );
      }
      return typeof result.reason === 'string' && result.reason !== ''
        ? { outcome: result.outcome, reason: result.reason }
        : { outcome: result.outcome };
    }),
    on('client/readTextFile', parseReadParams, async (params, token) => {
      const result = await handlers.readTextFile(params, token);
      return { content: result.content };
    }),
    on('client/writeTextFile', parseWriteParams, async (params, token) => {
      await handlers.writeTextFile(params, token);
      return {};
    }),
    on('client/elicit', parseElicitParams, async (params, token) => {
      const result = await handlers.elicit(params, token);
      if (!ELICIT_ACTIONS.includes(result.action)) {
        throw new ResponseError(ErrorCode.InternalError, `client/elicit: unknown action ${JSON.stringify(result.action)}`);
      }
      return result.action === 'accept' && params.mode === 'form'
        ? { action: 'accept', content: result.content ?? {} }
        : { action: result.action };
    }),
    on('client/openUrl', parseOpenUrlParams, async (params, token) => {
      await handlers.openUrl(params, token);
      return {};
    }),
    on('client/getDiagnostics', parseGetDiagnosticsParams, async (params, token) => {
      const result = await handlers.getDiagnostics(params, token);
      return { files: result.files };
    }),
  ];
}

// ---------------------------------------------------------------------------------------------
// Command lines

export interface ServerSettings {
  provider?: string;
  model?: string;
  baseUrl?: string;
  extraArgs?: readonly string[];
  /** The workspace root (`--cwd`). */
  cwd?: string;
}

/** The `tiller` arguments for the extension's settings (empty settings add nothing). */
export function serverArgs(settings: ServerSettings): string[] {
  const args: string[] = ['--framing', 'lsp'];
  if (settings.provider) {
    args.push('--provider', settings.provider);
  }
  if (settings.model) {
    args.push('--model', settings.model);
  }
  if (settings.baseUrl) {
    args.push('--base-url', settings.baseUrl);
  }
  if (settings.cwd) {
    args.push('--cwd', settings.cwd);
  }
  args.push(...(settings.extraArgs ?? []));
  return args;
}
