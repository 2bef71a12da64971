// Shared test helpers: the real-server settings from the environment (set by
// tests/editors/test_vscode.py), a started TillerClient with an event log, and fake handlers.

import * as fs from 'node:fs';
import * as path from 'node:path';

import { TillerClient, serverArgs, sliceLines, type ClientHandlers } from '../src/client';
import type {
  AgentEvent,
  ElicitResult,
  EmptyResult,
  GetDiagnosticsParams,
  GetDiagnosticsResult,
  ReadTextFileParams,
  ReadTextFileResult,
  RequestPermissionParams,
  RequestPermissionResult,
  WriteTextFileParams,
} from '../src/protocol';

type AgentEventType = AgentEvent['type'];

/**
 * Environment contract with tests/editors/test_vscode.py:
 * - TILLER_CMD: the server command, a JSON array (["/venv/bin/python", "-m", "tiller"]) or a
 *   whitespace-separated string ("/venv/bin/python -m tiller").
 * - TILLER_SCENARIOS: JSON object, scenario name -> {baseUrl, ...details}; each scenario has its
 *   own FakeOpenAI with the replies that scenario's test expects.
 * - TILLER_WORKDIR: a scratch directory (the server's --cwd).
 * - TILLER_E2E=required: fail, rather than skip, when the above are missing.
 */
export interface Scenario {
  baseUrl: string;
  [key: string]: unknown;
}

export function tillerCommand(): string[] | undefined {
  const raw = process.env.TILLER_CMD?.trim();
  if (!raw) {
    return undefined;
  }
  if (raw.startsWith('[')) {
    const parsed: unknown = JSON.parse(raw);
    if (!Array.isArray(parsed) || parsed.length === 0 || !parsed.every((p) => typeof p === 'string')) {
      throw new Error(`TILLER_CMD must be a non-empty JSON array of strings: ${raw}`);
    }
    return parsed as string[];
  }
  return raw.split(/\s+/);
}

function scenarios(): Record<string, unknown> | undefined {
  const raw = process.env.TILLER_SCENARIOS;
  return raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
}

/** `{skip}` option for node:test when the real server is not configured (and not required). */
export function e2eSkip(): { skip: string | false } {
  const missing = ['TILLER_CMD', 'TILLER_SCENARIOS', 'TILLER_WORKDIR'].filter((name) => !process.env[name]);
  if (missing.length === 0) {
    return { skip: false };
  }
  if (process.env.TILLER_E2E === 'required') {
    throw new Error(`TILLER_E2E=required but ${missing.join(', ')} not set`);
  }
  return { skip: `set ${missing.join(', ')} (tests/editors/test_vscode.py does) to run against the real server` };
}

export function scenario(name: string): Scenario {
  const found = scenarios()?.[name];
  if (typeof found !== 'object' || found === null) {
    throw new Error(`TILLER_SCENARIOS has no scenario ${JSON.stringify(name)}`);
  }
  return found as Scenario;
}

export function scenarioData<T>(name: string): T {
  const found = scenarios()?.[name];
  if (found === undefined) {
    throw new Error(`TILLER_SCENARIOS has no entry ${JSON.stringify(name)}`);
  }
  return found as T;
}

export function str(s: Scenario, key: string): string {
  const value = s[key];
  if (typeof value !== 'string') {
    throw new Error(`scenario field ${key} is not a string: ${JSON.stringify(value)}`);
  }
  return value;
}

export function workdir(): string {
  return process.env.TILLER_WORKDIR!;
}

/**
 * A fake editor answering the server's requests the way the VS Code handlers do: buffers with
 * unsaved content (by absolute path) shadow the disk; writes go to buffers, never to the disk;
 * permission questions get `answer` (allowOnce unless a test says otherwise). Records every call.
 */
export class FakeEditor implements ClientHandlers {
  readonly permissions: RequestPermissionParams[] = [];
  readonly reads: ReadTextFileParams[] = [];
  readonly writes: WriteTextFileParams[] = [];
  readonly buffers = new Map<string, string>();
  answer: (params: RequestPermissionParams) => RequestPermissionResult = () => ({ outcome: 'allowOnce' });

  async requestPermission(params: RequestPermissionParams): Promise<RequestPermissionResult> {
    this.permissions.push(params);
    return this.answer(params);
  }

  async readTextFile(params: ReadTextFileParams): Promise<ReadTextFileResult> {
    this.reads.push(params);
    const text = this.buffers.get(path.resolve(params.path)) ?? (await fs.promises.readFile(params.path, 'utf8'));
    return { content: sliceLines(text, params.line, params.limit) };
  }

  async writeTextFile(params: WriteTextFileParams): Promise<EmptyResult> {
    this.writes.push(params);
    this.buffers.set(path.resolve(params.path), params.content);
    return {};
  }

  async elicit(): Promise<ElicitResult> {
    return { action: 'decline' };
  }

  async openUrl(): Promise<EmptyResult> {
    return {};
  }

  readonly diagnosticRequests: GetDiagnosticsParams[] = [];

  /** No language servers here: every file has no diagnostics. */
  async getDiagnostics(params: GetDiagnosticsParams): Promise<GetDiagnosticsResult> {
    this.diagnosticRequests.push(params);
    return { files: params.paths.map((file) => ({ path: file, diagnostics: [] })) };
  }
}

/** Every `agent/event` a client received, with a way to wait for one. */
export class EventLog {
  readonly events: AgentEvent[] = [];
  private waiters: Array<{ check: (e: AgentEvent) => boolean; resolve: (e: AgentEvent) => void }> = [];

  constructor(client: TillerClient) {
    client.onEvent((event) => {
      this.events.push(event);
      this.waiters = this.waiters.filter((w) => {
        if (w.check(event)) {
          w.resolve(event);
          return false;
        }
        return true;
      });
    });
  }

  /** The first event (already received or still to come) that satisfies `check`. */
  waitFor(check: (e: AgentEvent) => boolean, what: string, timeoutMs = 20000): Promise<AgentEvent> {
    const seen = this.events.find(check);
    if (seen) {
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const types = this.events.map((e) => e.type).join(', ');
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; events: ${types}`));
      }, timeoutMs);
      this.waiters.push({
        check,
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e);
        },
      });
    });
  }

  ofType<T extends AgentEventType>(type: T): Array<Extract<AgentEvent, { type: T }>> {
    return this.events.filter((e): e is Extract<AgentEvent, { type: T }> => e.type === type);
  }
}

/** An environment for the server without provider settings that would leak into a test. */
function serverEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(OPENAI_|ANTHROPIC_|TILLER_)/.test(key)) {
      env[key] = value;
    }
  }
  const config = path.join(workdir(), 'xdg-config'); // no user config file
  fs.mkdirSync(config, { recursive: true });
  env.XDG_CONFIG_HOME = config;
  return env;
}

export interface Started {
  client: TillerClient;
  log: EventLog;
  editor: FakeEditor;
  stderr: () => string;
}

/** The real tiller, pointed at `scenarioName`'s FakeOpenAI, working in TILLER_WORKDIR. */
export function startTiller(scenarioName: string, editor: FakeEditor = new FakeEditor()): Started {
  const [command, ...prefix] = tillerCommand()!;
  const s = scenario(scenarioName);
  let stderr = '';
  const client = TillerClient.spawn({
    command: command!,
    args: [...prefix, ...serverArgs({ baseUrl: s.baseUrl, cwd: workdir(), extraArgs: ['--no-session'] })],
    cwd: workdir(),
    env: serverEnv(),
    handlers: editor,
    clientInfo: { name: 'tiller-vscode-test', version: '0' },
    onStderr: (text) => {
      stderr += text;
    },
  });
  return { client, log: new EventLog(client), editor, stderr: () => stderr };
}

/**
 * Write `text` to the FIFO `fifo` once a reader has it open. Opening for writing without a
 * reader fails at once (O_NONBLOCK), so a missing reader is a clear error, never a hang.
 */
export async function writeFifo(fifo: string, text: string, timeoutMs = 10000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const handle = await fs.promises.open(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
      try {
        await handle.write(text);
      } finally {
        await handle.close();
      }
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENXIO' || Date.now() > deadline) {
        throw new Error(`could not write the fifo ${fifo} (is its reader running?): ${String(error)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

/** True while `pid` runs (a zombie counts as gone). */
export function processAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    if (fs.existsSync('/proc/self')) {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function waitUntil(check: () => boolean, what: string, timeoutMs = 10000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
