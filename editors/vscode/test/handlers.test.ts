// The client's plumbing without the real server: a vscode-jsonrpc "server" connection over an
// in-memory stream pair (LSP framing) sends the server -> client requests whose shapes are fixed
// (client/requestPermission, client/readTextFile, client/writeTextFile) and checks what the
// injected handlers receive and what goes back on the wire. Also: spawn failures and dispose.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, test } from 'node:test';

import {
  CancellationTokenSource,
  StreamMessageReader,
  StreamMessageWriter,
  createMessageConnection,
  type CancellationToken,
  type MessageConnection,
} from 'vscode-jsonrpc/node';

import {
  CLIENT_CAPABILITIES,
  RESOURCE_NOT_FOUND,
  ServerExitedError,
  TillerClient,
  clientCapabilities,
  isRpcError,
  sliceLines,
  type ClientHandlers,
} from '../src/client';
import {
  ErrorCode,
  type AgentEvent,
  type ElicitParams,
  type ElicitResult,
  type GetDiagnosticsParams,
  type OpenUrlParams,
  type ReadTextFileParams,
  type RequestPermissionParams,
  type WriteTextFileParams,
} from '../src/protocol';
import { processAlive, waitUntil } from './support';

interface Calls {
  permission: RequestPermissionParams[];
  read: ReadTextFileParams[];
  write: WriteTextFileParams[];
  elicit: ElicitParams[];
  opened: OpenUrlParams[];
  diagnostics: GetDiagnosticsParams[];
  tokens: CancellationToken[];
}

let server: MessageConnection;
let client: TillerClient;
let calls: Calls;
let files: Map<string, string>;
let answer: RequestPermissionParams['options'][number];
let failWith: unknown;
let elicitAnswer: ElicitResult;

/** Fakes of the handlers the extension implements with VS Code: an in-memory file system. */
function fakeHandlers(): ClientHandlers {
  return {
    async elicit(params) {
      calls.elicit.push(params);
      return elicitAnswer;
    },
    async openUrl(params) {
      calls.opened.push(params);
      return {};
    },
    async getDiagnostics(params) {
      calls.diagnostics.push(params);
      return { files: params.paths.map((file) => ({ path: file, diagnostics: [
        { line: 2, column: 5, severity: 'error' as const, message: 'bad', source: 'ts', code: 2304 },
      ] })) };
    },
    async requestPermission(params, token) {
      calls.permission.push(params);
      calls.tokens.push(token);
      if (failWith !== undefined) {
        throw failWith;
      }
      return { outcome: answer };
    },
    async readTextFile(params, token) {
      calls.read.push(params);
      calls.tokens.push(token);
      const text = files.get(params.path);
      if (text === undefined) {
        throw Object.assign(new Error(`no such file: ${params.path}`), { code: 'ENOENT' });
      }
      return { content: sliceLines(text, params.line, params.limit) };
    },
    async writeTextFile(params, token) {
      calls.write.push(params);
      calls.tokens.push(token);
      files.set(params.path, params.content);
      return {};
    },
  };
}

beforeEach(() => {
  calls = { permission: [], read: [], write: [], elicit: [], opened: [], diagnostics: [], tokens: [] };
  elicitAnswer = { action: 'decline' };
  files = new Map([['/w/a.txt', 'one\ntwo\nthree\nfour\n']]);
  answer = 'allowOnce';
  failWith = undefined;
  const toClient = new PassThrough();
  const toServer = new PassThrough();
  client = TillerClient.connect(toClient, toServer, { handlers: fakeHandlers() });
  server = createMessageConnection(new StreamMessageReader(toServer), new StreamMessageWriter(toClient));
  server.listen();
});

afterEach(async () => {
  server.dispose();
  await client.dispose();
});

const permission: RequestPermissionParams = {
  sessionId: 's1',
  toolCallId: 'call_1',
  toolName: 'edit',
  reason: "'edit' changes a.txt",
  args: { path: 'a.txt', edits: [{ oldText: 'two', newText: 'TWO' }] },
  preview: { kind: 'diff', path: 'a.txt', diff: '--- a/a.txt\n+++ b/a.txt\n@@ -2 +2 @@\n-two\n+TWO\n' },
  options: ['allowOnce', 'allowAlways', 'rejectOnce', 'rejectAlways'],
};

async function rejectsWith(promise: Promise<unknown>, code: number, pattern?: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(isRpcError(error, code), `expected code ${code}, got ${String(error)}`);
    if (pattern) {
      assert.match(error.message, pattern);
    }
    return true;
  });
}

test('initialize advertises permissions, fs and diagnostics capabilities', async () => {
  let received: unknown;
  server.onRequest('initialize', (params: unknown) => {
    received = params;
    return { serverInfo: { name: 'fake', version: '0' }, protocolVersion: 1, capabilities: {} };
  });
  const result = await client.initialize();
  assert.equal(result.protocolVersion, 1);
  const declared = {
    permissions: true,
    fs: { readTextFile: true, writeTextFile: true },
    elicitation: { form: true, url: true },
    openUrl: true,
    diagnostics: true,
  };
  assert.deepEqual(received, { clientInfo: { name: 'tiller-vscode' }, capabilities: declared });
  assert.deepEqual(CLIENT_CAPABILITIES, declared);
});

test('initialize says fs.keepsUnsaved when written files may stay unsaved (tiller.saveEdits off)', async () => {
  const toClient = new PassThrough();
  const toServer = new PassThrough();
  const keeping = TillerClient.connect(toClient, toServer, {
    handlers: fakeHandlers(),
    capabilities: clientCapabilities({ keepsUnsaved: true }),
  });
  const other = createMessageConnection(new StreamMessageReader(toServer), new StreamMessageWriter(toClient));
  let received: unknown;
  other.onRequest('initialize', (params: unknown) => {
    received = params;
    return { serverInfo: { name: 'fake', version: '0' }, protocolVersion: 1, capabilities: {} };
  });
  other.listen();
  try {
    await keeping.initialize();
    assert.deepEqual((received as { capabilities: unknown }).capabilities, {
      permissions: true,
      fs: { readTextFile: true, writeTextFile: true, keepsUnsaved: true },
      elicitation: { form: true, url: true },
      openUrl: true,
      diagnostics: true,
    });
    assert.equal(clientCapabilities({ keepsUnsaved: false }), CLIENT_CAPABILITIES);
  } finally {
    other.dispose();
    await keeping.dispose();
  }
});

test('agent/event notifications reach onEvent in order', async () => {
  const got: AgentEvent[] = [];
  const done = new Promise<void>((resolve) =>
    client.onEvent((e) => {
      got.push(e);
      if (e.type === 'agent_settled') {
        resolve();
      }
    }),
  );
  void server.sendNotification('agent/event', { sessionId: 's', seq: 1, type: 'agent_start' });
  void server.sendNotification('agent/event', {
    sessionId: 's',
    seq: 2,
    type: 'message_update',
    kind: 'text',
    index: 0,
    delta: 'hi',
  });
  void server.sendNotification('agent/event', { sessionId: 's', seq: 3, type: 'agent_settled' });
  await done;
  assert.deepEqual(
    got.map((e) => [e.seq, e.type]),
    [
      [1, 'agent_start'],
      [2, 'message_update'],
      [3, 'agent_settled'],
    ],
  );
});

test('client/requestPermission: each preview kind reaches the handler; {outcome} goes back', async () => {
  const previews: RequestPermissionParams['preview'][] = [
    permission.preview,
    { kind: 'command', command: 'rm -rf build', cwd: '/w' },
    { kind: 'path', path: '/etc/hosts' },
  ];
  for (const [n, preview] of previews.entries()) {
    answer = n === 1 ? 'rejectOnce' : 'allowAlways';
    const params = { ...permission, toolCallId: `call_${n}`, preview };
    const result = await server.sendRequest('client/requestPermission', params);
    assert.deepEqual(result, { outcome: answer });
    assert.deepEqual(calls.permission[n], params);
  }
  assert.ok(calls.tokens.every((t) => typeof t.isCancellationRequested === 'boolean'));
});

test('client/requestPermission: invalid params are -32602 naming the fields', async () => {
  const { preview: _preview, ...noPreview } = permission;
  await rejectsWith(
    server.sendRequest('client/requestPermission', noPreview),
    ErrorCode.InvalidParams,
    /preview: Field required/,
  );
  await rejectsWith(
    server.sendRequest('client/requestPermission', { ...permission, options: ['yes'], toolCallId: 7 }),
    ErrorCode.InvalidParams,
    /toolCallId: invalid value; options: invalid value/,
  );
  await rejectsWith(
    server.sendRequest('client/requestPermission', { ...permission, preview: { kind: 'command', command: 'ls' } }),
    ErrorCode.InvalidParams,
    /preview/,
  );
  assert.equal(calls.permission.length, 0, 'the handler never saw invalid params');
});

test('client/requestPermission: an outcome outside the options is an error, not an answer', async () => {
  answer = 'allowAlways';
  await rejectsWith(
    server.sendRequest('client/requestPermission', { ...permission, options: ['allowOnce', 'rejectOnce'] }),
    ErrorCode.InternalError,
    /not one of the options/,
  );
});

test('client/requestPermission: a failing handler is -32603 with its message', async () => {
  failWith = new Error('the dialog broke');
  await rejectsWith(server.sendRequest('client/requestPermission', permission), ErrorCode.InternalError, /the dialog broke/);
});

test('client/requestPermission: the server cancelling reaches the handler token', async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const handlers = fakeHandlers();
  const toClient = new PassThrough();
  const toServer = new PassThrough();
  const other = TillerClient.connect(toClient, toServer, {
    handlers: {
      ...handlers,
      async requestPermission(_params, token) {
        if (!token.isCancellationRequested) {
          await new Promise<void>((resolve) => token.onCancellationRequested(() => resolve()));
        }
        release();
        return { outcome: 'rejectOnce' };
      },
    },
  });
  const fakeServer = createMessageConnection(new StreamMessageReader(toServer), new StreamMessageWriter(toClient));
  fakeServer.listen();
  const source = new CancellationTokenSource();
  const pending = fakeServer.sendRequest('client/requestPermission', permission, source.token);
  source.cancel();
  await released;
  assert.deepEqual(await pending, { outcome: 'rejectOnce' });
  fakeServer.dispose();
  await other.dispose();
});

test('client/readTextFile: {content}, with 1-based line and limit', async () => {
  assert.deepEqual(await server.sendRequest('client/readTextFile', { sessionId: 's1', path: '/w/a.txt' }), {
    content: 'one\ntwo\nthree\nfour\n',
  });
  assert.deepEqual(
    await server.sendRequest('client/readTextFile', { sessionId: 's1', path: '/w/a.txt', line: 2, limit: 2 }),
    { content: 'two\nthree\n' },
  );
  assert.deepEqual(calls.read[1], { sessionId: 's1', path: '/w/a.txt', line: 2, limit: 2 });
});

test('client/readTextFile: a missing file is -32002; a bad line is -32602', async () => {
  await rejectsWith(
    server.sendRequest('client/readTextFile', { sessionId: 's1', path: '/w/missing.txt' }),
    RESOURCE_NOT_FOUND,
    /no such file/,
  );
  await rejectsWith(
    server.sendRequest('client/readTextFile', { sessionId: 's1', path: '/w/a.txt', line: 0 }),
    ErrorCode.InvalidParams,
    /line: invalid value/,
  );
});

test('client/writeTextFile: the handler gets {sessionId, path, content}; {} goes back', async () => {
  const params = { sessionId: 's1', path: '/w/new.txt', content: 'fresh\n' };
  assert.deepEqual(await server.sendRequest('client/writeTextFile', params), {});
  assert.deepEqual(calls.write, [params]);
  assert.equal(files.get('/w/new.txt'), 'fresh\n');
  await rejectsWith(
    server.sendRequest('client/writeTextFile', { sessionId: 's1', path: '/w/x' }),
    ErrorCode.InvalidParams,
    /content: Field required/,
  );
});

test('client/elicit: the handler gets the question; accept keeps the content of a form only', async () => {
  const form = {
    sessionId: 's1', server: 'deploy', toolCallId: 'c1', mode: 'form', message: 'Which environment?',
    requestedSchema: { type: 'object', properties: { env: { type: 'string' } } },
  };
  elicitAnswer = { action: 'accept', content: { env: 'staging' } };
  assert.deepEqual(await server.sendRequest('client/elicit', form), { action: 'accept', content: { env: 'staging' } });
  const url = { sessionId: 's1', server: 'bank', mode: 'url', message: 'Link', url: 'https://bank.example/x' };
  assert.deepEqual(await server.sendRequest('client/elicit', url), { action: 'accept' });
  elicitAnswer = { action: 'cancel' };
  assert.deepEqual(await server.sendRequest('client/elicit', form), { action: 'cancel' });
  assert.deepEqual(calls.elicit.map((p) => p.server), ['deploy', 'bank', 'deploy']);
  await assert.rejects(server.sendRequest('client/elicit', { ...url, url: undefined }), (error: unknown) =>
    isRpcError(error, ErrorCode.InvalidParams) && /url: Field required/.test((error as Error).message));
});

test('client/openUrl: the handler gets the URL; {} goes back', async () => {
  const params = { sessionId: 's1', server: 'linear', url: 'https://auth.example/a', reason: 'Sign in to MCP server linear' };
  assert.deepEqual(await server.sendRequest('client/openUrl', params), {});
  assert.deepEqual(calls.opened, [params]);
});

test('client/getDiagnostics: the handler gets the paths and the time it has; {files} goes back', async () => {
  const params = { sessionId: 's1', toolCallId: 'call_1', paths: ['/w/a.ts'], timeoutMs: 3000 };
  assert.deepEqual(await server.sendRequest('client/getDiagnostics', params), { files: [
    { path: '/w/a.ts', diagnostics: [{ line: 2, column: 5, severity: 'error', message: 'bad', source: 'ts', code: 2304 }] },
  ] });
  assert.deepEqual(calls.diagnostics, [params]);
  await rejectsWith(server.sendRequest('client/getDiagnostics', { sessionId: 's1', paths: [], timeoutMs: 1 }),
    ErrorCode.InvalidParams, /paths/);
  await rejectsWith(server.sendRequest('client/getDiagnostics', { sessionId: 's1', paths: ['/w/a.ts'] }),
    ErrorCode.InvalidParams, /timeoutMs/);
});

test('an unknown server request is -32601', async () => {
  await rejectsWith(server.sendRequest('client/somethingElse', {}), ErrorCode.MethodNotFound);
});

test('a server that cannot be started rejects requests with ServerExitedError', async () => {
  const missing = TillerClient.spawn({
    command: path.join(os.tmpdir(), 'no-such-dir', 'tiller'),
    handlers: fakeHandlers(),
  });
  await assert.rejects(missing.initialize(), (error: unknown) => {
    assert.ok(error instanceof ServerExitedError, String(error));
    assert.match(error.message, /could not start .*ENOENT/);
    return true;
  });
  assert.ok(missing.exited?.error);
  await missing.dispose();
});

test('a server that dies rejects pending requests with its stderr', async () => {
  const dying = TillerClient.spawn({
    command: process.execPath,
    args: ['-e', "process.stdin.once('data', () => { console.error('boom: bad config'); process.exit(3); })"],
    handlers: fakeHandlers(),
  });
  await assert.rejects(dying.initialize(), (error: unknown) => {
    assert.ok(error instanceof ServerExitedError, String(error));
    assert.match(error.message, /exited with code 3/);
    assert.match(error.message, /boom: bad config/);
    return true;
  });
  assert.equal(dying.exited?.code, 3);
  await dying.dispose();
});

const posixWithPs = process.platform !== 'win32' && spawnSync('ps', ['-A']).status === 0;

test('dispose kills a server that ignores end of input, and its process tree', { skip: !posixWithPs }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tiller-vscode-'));
  const pidFile = path.join(dir, 'grandchild.pid');
  // A stubborn "server": ignores stdin EOF and starts a grandchild in its own process group.
  const script = `
    const { spawn } = require('node:child_process');
    const child = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    require('node:fs').writeFileSync(${JSON.stringify(pidFile)}, String(child.pid));
    process.stdin.resume();
    process.stdin.on('end', () => {});
    setInterval(() => {}, 1000);
  `;
  const stubborn = TillerClient.spawn({ command: process.execPath, args: ['-e', script], handlers: fakeHandlers() });
  await waitUntil(() => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8') !== '', 'the grandchild started');
  const grandchild = Number(fs.readFileSync(pidFile, 'utf8'));
  assert.ok(processAlive(grandchild));

  const started = Date.now();
  const exit = await stubborn.dispose(300);

  assert.equal(exit.signal, 'SIGKILL', JSON.stringify(exit));
  assert.ok(Date.now() - started < 5000);
  await waitUntil(() => !processAlive(grandchild), 'the grandchild is gone');
  fs.rmSync(dir, { recursive: true, force: true });
});
