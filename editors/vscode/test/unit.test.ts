// Pure modules: the Markdown renderer, the chat model, the permission preview, small helpers.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ChatModel, MAX_TOOL_OUTPUT, type ChatOp } from '../src/chatModel';
import { parseFromWebview } from '../src/messages';
import { attachedPath, findMentions, withFiles } from '../src/mentions';
import { compactCount, statusText } from '../src/statusText';
import { dismissedOutcome, serverArgs, sliceLines } from '../src/client';
import { escapeHtml, renderInline, renderMarkdown } from '../src/markdown';
import { elicit, formFields, type AskUi } from '../src/mcpAsk';
import { applyUnifiedDiff, proposedContent } from '../src/preview';
import type { AgentEvent, RequestPermissionParams } from '../src/protocol';

// ---------------------------------------------------------------------------------------------
// Markdown

test('markdown escapes every HTML character outside markup', () => {
  assert.equal(escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  const html = renderMarkdown('<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>');
  assert.doesNotMatch(html, /<script|<img/);
  assert.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
});

test('markdown inline: code, strong, emphasis, strikethrough, safe links only', () => {
  assert.equal(renderInline('`<b>` and **bold** and *em* and _em_ and ~~gone~~'),
    '<code>&lt;b&gt;</code> and <strong>bold</strong> and <em>em</em> and <em>em</em> and <del>gone</del>');
  assert.equal(renderInline('**`code` inside**'), '<strong><code>code</code> inside</strong>');
  assert.equal(renderInline('[docs](https://example.com/a?b=1&c="2")'),
    '<a href="https://example.com/a?b=1&amp;c=&quot;2&quot;">docs</a>');
  assert.equal(renderInline('[x](javascript:alert(1))'), '[x](javascript:alert(1))');
  assert.equal(renderInline('[click](javascript:alert)'), 'click (javascript:alert)');
  assert.equal(renderInline('snake_case_name and a * b * c'), 'snake_case_name and a * b * c');
  assert.equal(renderInline('half **bold'), 'half **bold', 'an unclosed marker streams as text');
});

test('markdown blocks: headings, fences, lists, quotes, tables, rules', () => {
  assert.equal(renderMarkdown('# Title\nSome *text*.'), '<h1>Title</h1>\n<p>Some <em>text</em>.</p>');
  assert.equal(
    renderMarkdown('```ts\nconst a = 1 < 2;\n```\nafter'),
    '<pre><code class="language-ts">const a = 1 &lt; 2;</code></pre>\n<p>after</p>',
  );
  assert.equal(renderMarkdown('- a\n- b **c**'), '<ul><li>a</li><li>b <strong>c</strong></li></ul>');
  assert.equal(renderMarkdown('3. x\n4. y'), '<ol start="3"><li>x</li><li>y</li></ol>');
  assert.equal(renderMarkdown('> quoted\n> more'), '<blockquote><p>quoted\nmore</p></blockquote>');
  assert.equal(renderMarkdown('---'), '<hr>');
  assert.equal(
    renderMarkdown('| a | b |\n|---|--:|\n| 1 | <2> |'),
    '<table><thead><tr><th>a</th><th style="text-align:right">b</th></tr></thead>' +
      '<tbody><tr><td>1</td><td style="text-align:right">&lt;2&gt;</td></tr></tbody></table>',
  );
});

test('markdown renders a reply still streaming: an unclosed fence is a code block so far', () => {
  assert.equal(
    renderMarkdown('Look:\n```py\nprint("<hi>")'),
    '<p>Look:</p>\n<pre><code class="language-py">print(&quot;&lt;hi&gt;&quot;)</code></pre>',
  );
  assert.doesNotMatch(renderMarkdown('```"><script>\nx\n```'), /<script>/);
});

// ---------------------------------------------------------------------------------------------
// Chat model

let seq = 0;
function ev(event: Record<string, unknown>): AgentEvent {
  return { sessionId: 's', seq: ++seq, ...event } as unknown as AgentEvent;
}
const assistantStart = ev({ type: 'message_start', message: { role: 'assistant', content: [], timestamp: 0 } });

test('chat model: deltas only mark dirty; flush renders the block; message_end is authoritative', () => {
  const model = new ChatModel();
  assert.deepEqual(model.apply(ev({ type: 'agent_start' })), [{ op: 'state', running: true }]);
  model.apply(ev({ type: 'message_start', message: { role: 'user', content: 'hi <there>', timestamp: 0 } }));
  model.apply(assistantStart);
  assert.deepEqual(model.apply(ev({ type: 'message_update', kind: 'text', index: 0, delta: 'Hel' })), []);
  assert.deepEqual(model.apply(ev({ type: 'message_update', kind: 'text', index: 0, delta: 'lo **x' })), []);
  const flushed = model.flush();
  assert.equal(flushed.length, 1);
  assert.deepEqual(flushed[0], { op: 'block', id: 'a2-0', kind: 'text', html: '<p>Hello **x</p>' });
  assert.deepEqual(model.flush(), [], 'nothing new');
  model.apply(ev({ type: 'message_update', kind: 'text', index: 0, delta: '**' }));
  const end = model.apply(
    ev({ type: 'message_end', message: { role: 'assistant', content: [{ type: 'text', text: 'Hello **x**' }], timestamp: 0 } }),
  );
  assert.deepEqual(end, [{ op: 'block', id: 'a2-0', kind: 'text', html: '<p>Hello <strong>x</strong></p>' }]);
  const settled = model.apply(ev({ type: 'agent_settled' }));
  assert.deepEqual(settled, [{ op: 'state', running: false }]);
});

test('chat model: a user message is escaped; a delivered steer leaves the pending list', () => {
  const model = new ChatModel();
  assert.deepEqual(model.queued('steer', 'use tabs'), [{ op: 'pending', items: [{ kind: 'steer', text: 'use tabs' }] }]);
  const ops = model.apply(ev({ type: 'message_start', message: { role: 'user', content: 'use tabs', timestamp: 0 } }));
  assert.deepEqual(ops, [
    { op: 'user', id: 'u1', html: '<p>use tabs</p>' },
    { op: 'pending', items: [] },
  ]);
  const other = model.apply(ev({ type: 'message_start', message: { role: 'user', content: '<b>', timestamp: 0 } }));
  assert.deepEqual(other, [{ op: 'user', id: 'u2', html: '<p>&lt;b&gt;</p>' }]);
});

test('chat model: tool card from streamed call to running, progress and an error result', () => {
  const model = new ChatModel();
  model.apply(assistantStart);
  model.apply(ev({ type: 'message_update', kind: 'toolCallStart', index: 0, toolCallId: 'c1', toolName: 'bash' }));
  model.apply(ev({ type: 'message_update', kind: 'toolCallArgs', index: 0, delta: '{"command": "ma' }));
  const streaming = model.flush();
  assert.deepEqual(streaming, [
    { op: 'tool', id: 't1-c1', name: 'bash', title: 'bash', summary: '', args: '{"command": "ma', status: 'streaming', output: '' },
  ]);
  const ops: ChatOp[] = [];
  ops.push(...model.apply(ev({ type: 'tool_execution_start', toolCallId: 'c1', toolName: 'bash', args: { command: 'make' }, title: 'make', kind: 'execute' })));
  model.apply(ev({ type: 'tool_execution_update', toolCallId: 'c1', toolName: 'bash', partialResult: { output: 'x'.repeat(MAX_TOOL_OUTPUT + 10) } }));
  const progress = model.flush();
  ops.push(
    ...model.apply(
      ev({
        type: 'tool_execution_end',
        toolCallId: 'c1',
        toolName: 'bash',
        isError: true,
        result: { role: 'toolResult', toolCallId: 'c1', toolName: 'bash', content: [{ type: 'text', text: 'make: *** failed' }], isError: true, timestamp: 0 },
      }),
    ),
  );
  assert.deepEqual(ops[0], {
    op: 'tool', id: 't1-c1', name: 'bash', title: 'bash', summary: 'make', kind: 'execute', args: '{\n  "command": "make"\n}', status: 'running', output: '',
  });
  assert.equal(progress.length, 1);
  assert.equal(progress[0]!.op === 'tool' && progress[0]!.output.length, MAX_TOOL_OUTPUT + 1, 'output is tail-truncated');
  assert.deepEqual(ops[1], {
    op: 'tool', id: 't1-c1', name: 'bash', title: 'bash', summary: 'make', kind: 'execute', args: '{\n  "command": "make"\n}', status: 'error', output: 'make: *** failed',
  });
});

test('chat model: a task call draws its subagent as a card inside it, live', () => {
  const model = new ChatModel();
  model.apply(assistantStart);
  model.apply(ev({ type: 'tool_execution_start', toolCallId: 't1', toolName: 'task', args: { description: 'Find it', prompt: 'find' }, title: 'Find it', kind: 'other' }));
  const named = model.apply(ev({ type: 'tool_execution_update', toolCallId: 't1', toolName: 'task', partialResult: { sessionId: 'c', agent: 'explore' } }));
  assert.deepEqual(named.length === 1 && named[0]!.op === 'tool' && named[0]!.child, { sessionId: 'c', agent: 'explore', calls: [], text: '' });
  const child = (event: Record<string, unknown>): AgentEvent =>
    ({ sessionId: 'c', parentSessionId: 's', parentToolCallId: 't1', seq: 1, ...event }) as unknown as AgentEvent;
  model.apply(child({ type: 'agent_start' }));
  const started = model.apply(child({ type: 'tool_execution_start', toolCallId: 'g1', toolName: 'grep', args: { pattern: 'x' }, title: "Search 'x' in .", kind: 'search' }));
  const asking = model.apply(child({ type: 'tool_execution_update', toolCallId: 'g1', toolName: 'grep', partialResult: { status: 'awaitingPermission' } }));
  model.apply(child({ type: 'tool_execution_end', toolCallId: 'g1', toolName: 'grep', isError: false, result: { role: 'toolResult', toolCallId: 'g1', toolName: 'grep', content: [], isError: false, timestamp: 0 } }));
  model.apply(child({ type: 'message_end', message: { role: 'assistant', content: [{ type: 'text', text: 'x is in a.py' }], provider: 'p', model: 'm', usage: {}, stopReason: 'stop', timestamp: 0 } }));
  const ended = model.apply(child({ type: 'agent_end', stopReason: 'stop', usage: {} }));
  const settled = model.apply(child({ type: 'agent_settled' }));
  const card = (ops: ChatOp[]) => (ops.length === 1 && ops[0]!.op === 'tool' ? ops[0] : undefined);
  assert.deepEqual(card(started)?.child?.calls, [{ title: "Search 'x' in .", status: 'running' }]);
  assert.deepEqual(card(asking)?.child?.calls, [{ title: "Search 'x' in .", status: 'waiting' }]);
  assert.deepEqual(card(ended)?.child, {
    sessionId: 'c', agent: 'explore', calls: [{ title: "Search 'x' in .", status: 'done' }], text: 'x is in a.py', ended: 'stop',
  });
  assert.equal(card(ended)?.status, 'running', 'the task call itself still runs');
  assert.deepEqual(settled, [], "a subagent's settling is not the chat's");
  assert.equal(model.running, false, "the subagent's agent_start does not start the chat's run");
});

test('chat model: a retry discards the partial message; errors and aborts become notices', () => {
  const model = new ChatModel();
  model.apply(assistantStart);
  model.apply(ev({ type: 'message_update', kind: 'thinking', index: 0, delta: 'hmm' }));
  model.apply(ev({ type: 'message_update', kind: 'toolCallStart', index: 1, toolCallId: 'c9', toolName: 'read' }));
  const retry = model.apply(
    ev({ type: 'retry_scheduled', attempt: 1, maxAttempts: 3, delayMs: 1500, errorMessage: 'openai: 429' }),
  );
  assert.deepEqual(retry, [
    { op: 'discard', ids: ['a1-0', 't1-c9'] },
    { op: 'notice', level: 'info', text: 'Retrying (1/3) in 1.5s: openai: 429' },
  ]);
  assert.deepEqual(model.flush(), [], 'discarded blocks are not rendered later');
  const failed = model.apply(ev({ type: 'agent_end', stopReason: 'error', errorMessage: 'openai: 401', usage: {} }));
  assert.deepEqual(failed, [{ op: 'notice', level: 'error', text: 'openai: 401', action: 'continue' }]);
  const aborted = model.apply(ev({ type: 'agent_end', stopReason: 'aborted', usage: {} }));
  assert.deepEqual(aborted, [{ op: 'notice', level: 'info', text: 'Stopped.', action: 'continue' }]);
});

test('chat model: a call id repeated in a later run gets its own card', () => {
  const model = new ChatModel();
  const end = (id: string) => ev({
    type: 'tool_execution_end', toolCallId: id, toolName: 'bash', isError: false,
    result: { role: 'toolResult', toolCallId: id, toolName: 'bash', content: [{ type: 'text', text: `out ${seq}` }], isError: false, timestamp: 0 },
  });
  const ids: string[] = [];
  for (let run = 0; run < 2; run++) {
    model.apply(ev({ type: 'agent_start' }));
    model.apply(assistantStart);
    model.apply(ev({ type: 'message_update', kind: 'toolCallStart', index: 0, toolCallId: 'call_0', toolName: 'bash' }));
    const start = model.apply(ev({ type: 'tool_execution_start', toolCallId: 'call_0', toolName: 'bash', args: { command: `run ${run}` } }));
    const done = model.apply(end('call_0'));
    const card = [...start, ...done].filter((op) => op.op === 'tool').map((op) => op.op === 'tool' && op.id);
    assert.equal(new Set(card).size, 1, 'start and end update one card');
    ids.push(String(card[0]));
    model.apply(ev({ type: 'agent_settled' }));
  }
  assert.notEqual(ids[0], ids[1], 'the second run did not reuse the first card');
});

test('chat model: a provider error is one notice, not two', () => {
  const model = new ChatModel();
  model.apply(ev({ type: 'agent_start' }));
  model.apply(assistantStart);
  const ops = [
    ...model.apply(ev({ type: 'message_end', message: { role: 'assistant', content: [], stopReason: 'error', errorMessage: 'openai: 500', timestamp: 0 } })),
    ...model.apply(ev({ type: 'agent_end', stopReason: 'error', errorMessage: 'openai: 500', usage: {} })),
    ...model.apply(ev({ type: 'agent_settled' })),
  ];
  assert.deepEqual(ops.filter((op) => op.op === 'notice'), [
    { op: 'notice', level: 'error', text: 'openai: 500', action: 'continue' },
  ]);
});

test('chat model: a card waiting for approval says so, then runs', () => {
  const model = new ChatModel();
  model.apply(assistantStart);
  model.apply(ev({ type: 'tool_execution_start', toolCallId: 'w', toolName: 'write', args: { path: 'a' } }));
  const waiting = model.apply(ev({ type: 'tool_execution_update', toolCallId: 'w', toolName: 'write', partialResult: { status: 'awaitingPermission' } }));
  assert.equal(waiting[0]?.op === 'tool' && waiting[0].status, 'waiting');
  model.apply(ev({ type: 'tool_execution_update', toolCallId: 'w', toolName: 'write', partialResult: { output: 'x' } }));
  const running = model.flush();
  assert.equal(running[0]?.op === 'tool' && running[0].status, 'running');
});

test('chat model: an approved change stays in its card', () => {
  const model = new ChatModel();
  model.apply(assistantStart);
  model.apply(ev({ type: 'tool_execution_start', toolCallId: 'w', toolName: 'write', args: { path: 'a' } }));
  const ops = model.approvedDiff('w', '@@ -1 +1 @@\n-a\n+b\n');
  assert.equal(ops[0]?.op === 'tool' && ops[0].diff, '@@ -1 +1 @@\n-a\n+b\n');
  assert.deepEqual(model.approvedDiff('unknown', 'x'), []);
});

test('chat model: a loaded conversation is drawn as the run drew it', () => {
  const model = new ChatModel();
  const ops = model.replay([
    { role: 'user', content: 'list files', timestamp: 0 },
    {
      role: 'assistant', timestamp: 0, stopReason: 'toolUse',
      content: [{ type: 'text', text: 'Looking **now**.' }, { type: 'toolCall', id: 'c1', name: 'bash', arguments: { command: 'ls' } }],
    },
    { role: 'toolResult', toolCallId: 'c1', toolName: 'bash', content: [{ type: 'text', text: 'a.txt' }], isError: false, timestamp: 0 },
    { role: 'assistant', timestamp: 0, stopReason: 'error', errorMessage: 'openai: 500', content: [] },
  ] as unknown as Parameters<ChatModel['replay']>[0], [], [], [{ toolCallId: 'c1', title: 'ls', kind: 'execute' }]);
  const kinds = ops.map((op) => op.op);
  assert.deepEqual(kinds, ['user', 'block', 'tool', 'tool', 'notice']);
  const last = ops[3];
  assert.ok(last?.op === 'tool');
  assert.deepEqual([last.id, last.status, last.summary, last.output], ['t2-c1', 'done', 'ls', 'a.txt']);
  assert.deepEqual(ops[4], { op: 'notice', level: 'error', text: 'openai: 500', action: 'continue' });
});

test('chat model: tools it cannot know by name show as the server describes them, live and loaded', () => {
  const model = new ChatModel();
  model.apply(assistantStart);
  const card = (id: string, name: string, shown: Record<string, unknown>) => {
    const ops = model.apply(ev({ type: 'tool_execution_start', toolCallId: id, toolName: name, args: { x: 1 }, ...shown }));
    const op = ops.find((o) => o.op === 'tool');
    assert.ok(op?.op === 'tool');
    return [op.title, op.summary, op.kind];
  };
  assert.deepEqual(card('t', 'touch', { title: 'Touch a.txt', kind: 'edit', path: '/w/a.txt' }), ['Touch a.txt', '', 'edit']);
  assert.deepEqual(card('c', 'runner', { title: 'make all', kind: 'execute' }), ['runner', 'make all', 'execute']);
  assert.deepEqual(card('p', 'stamp', { title: 'stamp', kind: 'edit', path: '/w/a.txt' }), ['stamp', '/w/a.txt', 'edit']);
  assert.deepEqual(card('m', 'mcp__git__git_status', { title: 'git: git_status', kind: 'other' }), ['git: git_status', '', 'other']);
  assert.deepEqual(card('b', 'mystery', { title: 'mystery', kind: 'other' }), ['mystery', '', 'other']);

  // A loaded session: session/load's toolCalls, one per call in order (the id used twice).
  const ops = new ChatModel().replay([
    { role: 'user', content: 'go', timestamp: 0 },
    { role: 'assistant', timestamp: 0, stopReason: 'toolUse', content: [
      { type: 'toolCall', id: 'x', name: 'runner', arguments: { script: 'make' } },
      { type: 'toolCall', id: 'y', name: 'stamp', arguments: {} },
    ] },
    { role: 'toolResult', toolCallId: 'x', toolName: 'runner', content: [], isError: false, timestamp: 0 },
    { role: 'toolResult', toolCallId: 'y', toolName: 'stamp', content: [], isError: false, timestamp: 0 },
    { role: 'assistant', timestamp: 0, stopReason: 'toolUse', content: [{ type: 'toolCall', id: 'x', name: 'touch', arguments: {} }] },
    { role: 'toolResult', toolCallId: 'x', toolName: 'touch', content: [], isError: false, timestamp: 0 },
  ] as unknown as Parameters<ChatModel['replay']>[0], [], [], [
    { toolCallId: 'x', title: 'make', kind: 'execute' },
    { toolCallId: 'y', title: 'stamp', kind: 'edit', path: '/w/a.txt' },
    { toolCallId: 'x', title: 'Touch b', kind: 'edit', path: '/w/b' },
  ]);
  const cards = new Map<string, [string, string]>();
  for (const op of ops) {
    if (op.op === 'tool') {
      cards.set(op.id, [op.title, op.summary]);
    }
  }
  assert.deepEqual([...cards.values()], [['runner', 'make'], ['stamp', '/w/a.txt'], ['Touch b', '']]);
});

test('chat model: a loaded run that changed files ends with its changed files and Undo', () => {
  const messages = [
    { role: 'user', content: 'write two files', timestamp: 0 },
    {
      role: 'assistant', timestamp: 0, stopReason: 'toolUse',
      content: [{ type: 'toolCall', id: 'c1', name: 'write', arguments: { path: 'b.txt', content: 'b' } }],
    },
    { role: 'toolResult', toolCallId: 'c1', toolName: 'write', content: [{ type: 'text', text: 'ok' }], isError: false, timestamp: 0 },
    {
      role: 'assistant', timestamp: 0, stopReason: 'toolUse',
      content: [{ type: 'toolCall', id: 'c2', name: 'write', arguments: { path: 'a.txt', content: 'a' } }],
    },
    { role: 'toolResult', toolCallId: 'c2', toolName: 'write', content: [{ type: 'text', text: 'ok' }], isError: false, timestamp: 0 },
    { role: 'assistant', timestamp: 0, stopReason: 'stop', content: [{ type: 'text', text: 'Done.' }] },
    { role: 'user', content: 'thanks', timestamp: 0 },
    { role: 'assistant', timestamp: 0, stopReason: 'stop', content: [{ type: 'text', text: 'Welcome.' }] },
  ] as unknown as Parameters<ChatModel['replay']>[0];
  const ids = ['u1', 'a1', 'r1', 'a2', 'r2', 'a3', 'u2', 'a4'];
  const turns = [
    { entryId: 'k1', files: ['b.txt'], afterEntryId: 'a1' },
    { entryId: 'k2', files: ['a.txt', 'b.txt'], afterEntryId: 'a2' },
    { entryId: 'k9', files: ['gone.txt'], afterEntryId: 'not-in-this-branch' },
  ];
  const ops = new ChatModel().replay(messages, ids, turns);
  const at = ops.findIndex((op) => op.op === 'changes');
  assert.deepEqual(ops[at], { op: 'changes', id: 'changes-loaded-6', entryId: 'k1', files: ['a.txt', 'b.txt'] });
  assert.equal(ops.filter((op) => op.op === 'changes').length, 1);
  assert.ok(ops[at + 1]?.op === 'user', 'the changes close the first run, before the next prompt');
  assert.deepEqual(new ChatModel().replay(messages).filter((op) => op.op === 'changes'), []);
});

// ---------------------------------------------------------------------------------------------
// Permission preview

const edit: RequestPermissionParams = {
  sessionId: 's',
  toolCallId: 'c',
  toolName: 'edit',
  reason: "'edit' changes f.txt",
  args: { path: 'f.txt', edits: [{ oldText: 'two', newText: 'TWO' }] },
  preview: { kind: 'diff', path: 'f.txt', diff: '--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n' },
  options: ['allowOnce', 'rejectOnce'],
};

test('preview: the server\'s diff applied to the buffer, whatever the tool', () => {
  const current = 'one\ntwo\nthree\n';
  assert.equal(proposedContent(edit, current), 'one\nTWO\nthree\n');
  const other = { ...edit, toolName: 'mcp__fs__patch', args: { anything: 1 } };
  assert.equal(proposedContent(other, current), 'one\nTWO\nthree\n', 'only the diff counts');
  const badDiff = { ...edit, preview: { kind: 'diff' as const, path: 'f.txt', diff: '@@ -1 +1 @@\n-zzz\n+y\n' } };
  assert.equal(proposedContent(badDiff, current), undefined, 'a diff that does not apply: shown as text');
  const command = { ...edit, args: {}, preview: { kind: 'command' as const, command: 'ls', cwd: '/' } };
  assert.equal(proposedContent(command, current), undefined);
  const path = { ...edit, preview: { kind: 'path' as const, path: '/elsewhere/f.txt' } };
  assert.equal(proposedContent(path, current), undefined);
});

test('preview: unified diffs with new files, missing final newlines and mismatches', () => {
  assert.equal(applyUnifiedDiff('', '--- a/n\n+++ b/n\n@@ -0,0 +1,2 @@\n+a\n+b\n'), 'a\nb\n');
  assert.equal(
    applyUnifiedDiff('a\nb', '--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n'),
    'a\nc\n',
  );
  assert.equal(applyUnifiedDiff('a\nb\n', '@@ -1,2 +1,2 @@\n a\n-x\n+c\n'), undefined);
  assert.equal(applyUnifiedDiff('same\n', ''), 'same\n');
});


// ---------------------------------------------------------------------------------------------
// Helpers

test('serverArgs maps the settings to tiller flags (LSP framing forced)', () => {
  assert.deepEqual(serverArgs({}), ['--framing', 'lsp']);
  assert.deepEqual(
    serverArgs({ provider: 'openai', model: 'gpt-4o-mini', baseUrl: 'http://x/v1', cwd: '/w', extraArgs: ['--max-turns', '5'] }),
    ['--framing', 'lsp', '--provider', 'openai', '--model', 'gpt-4o-mini', '--base-url', 'http://x/v1', '--cwd', '/w', '--max-turns', '5'],
  );
});

test('sliceLines is 1-based and keeps line endings', () => {
  assert.equal(sliceLines('a\nb\nc', 2), 'b\nc');
  assert.equal(sliceLines('a\nb\nc', 1, 1), 'a\n');
  assert.equal(sliceLines('a\nb\nc', undefined, 2), 'a\nb\n');
  assert.equal(sliceLines('a\nb\n', 5), '');
});

test('a dismissed permission prompt answers with the mildest rejection offered', () => {
  assert.equal(dismissedOutcome(['allowOnce', 'rejectOnce', 'rejectAlways']), 'rejectOnce');
  assert.equal(dismissedOutcome(['allowOnce', 'rejectAlways']), 'rejectAlways');
});

test('webview messages are validated', () => {
  const png = { mimeType: 'image/png', data: 'iVBORw0KGgo=' };
  assert.deepEqual(parseFromWebview({ type: 'submit', kind: 'prompt', text: 'see', images: [png] }), {
    type: 'submit', kind: 'prompt', text: 'see', images: [{ type: 'image', ...png }],
  });
  assert.equal(parseFromWebview({ type: 'submit', kind: 'prompt', text: 'see', images: [{ mimeType: 'text/html', data: 'x' }] }), undefined);
  assert.deepEqual(parseFromWebview({ type: 'submit', kind: 'steer', text: 'x' }), { type: 'submit', kind: 'steer', text: 'x' });
  assert.deepEqual(parseFromWebview({ type: 'abort' }), { type: 'abort' });
  assert.equal(parseFromWebview({ type: 'submit', kind: 'rm', text: 'x' }), undefined);
  assert.equal(parseFromWebview('ready'), undefined);
});

test('status bar text: activity, model, tokens and cost', () => {
  assert.equal(compactCount(999), '999');
  assert.equal(compactCount(1234), '1.2k');
  assert.equal(compactCount(56_789), '57k');
  assert.equal(compactCount(2_500_000), '2.5M');
  assert.equal(statusText('idle', undefined).text, '$(comment-discussion) Tiller: idle');
  const state = {
    provider: 'openai', model: 'gpt-4o-mini', permissionMode: 'ask' as const,
    usage: { inputTokens: 1200, outputTokens: 300, cacheReadTokens: 0, cacheWriteTokens: 0, cost: 0.0042 },
  };
  assert.equal(statusText('waiting', state).text, '$(bell-dot) Tiller: waiting for approval · gpt-4o-mini · 1.5k tok · $0.004');
  assert.match(statusText('working', state).tooltip, /Permission mode: ask/);
  const fresh = { ...state, usage: { ...state.usage, inputTokens: 0, outputTokens: 0, cost: 0 } };
  assert.equal(statusText('idle', fresh).text, '$(comment-discussion) Tiller: idle · gpt-4o-mini');
});

test('@path mentions: found after a space or the start, sent as file blocks, shown by name', () => {
  assert.deepEqual(findMentions('see @src/a.ts and @b.md, not me@example.com; @src/a.ts again'), ['src/a.ts', 'b.md']);
  assert.equal(withFiles('hi', []), 'hi');
  const message = withFiles('explain @a.py', [{ path: 'a.py', content: 'x = 1' }]);
  assert.deepEqual(message, [
    { type: 'text', text: 'explain @a.py' },
    { type: 'text', text: '\n\n<file path="a.py">\nx = 1\n</file>' },
  ]);
  const image = { type: 'image' as const, data: 'iVBORw0KGgo=', mimeType: 'image/png' };
  assert.deepEqual(withFiles('look', [], [image]), [{ type: 'text', text: 'look' }, image]);
  assert.equal(attachedPath('\n\n<file path="a.py">\nx = 1\n</file>'), 'a.py');
  assert.equal(attachedPath('plain'), undefined);
  const model = new ChatModel();
  const ops = model.apply(ev({ type: 'message_start', message: { role: 'user', content: message, timestamp: 0 } }));
  assert.equal(ops[0]?.op === 'user' && ops[0].html, '<p>explain @a.py</p>\n<p>Attached: <code>a.py</code></p>');
});

test('chat model: a run that changed files ends with their list and the first checkpoint to undo it', () => {
  const model = new ChatModel();
  model.apply(ev({ type: 'agent_start' }));
  model.apply(ev({ type: 'checkpoint', entryId: 'e1', files: ['b.txt'], notCovered: [] }));
  model.apply(ev({ type: 'checkpoint', entryId: 'e2', files: ['b.txt', 'a.txt'], notCovered: [] }));
  const ops = model.apply(ev({ type: 'agent_settled' }));
  assert.deepEqual(ops, [
    { op: 'changes', id: 'changes-1', entryId: 'e1', files: ['a.txt', 'b.txt'] },
    { op: 'state', running: false },
  ]);
  model.apply(ev({ type: 'agent_start' }));
  assert.deepEqual(model.apply(ev({ type: 'agent_settled' })), [{ op: 'state', running: false }], 'no changes, no list');
});

test('a notice event (a deprecated or replaced model, a level it lacks) becomes an info notice', () => {
  const model = new ChatModel();
  const warning = model.apply(ev({ type: 'notice', level: 'warning', message: 'claude-opus-4-5 is deprecated' }));
  assert.deepEqual(warning, [{ op: 'notice', level: 'info', text: '⚠ claude-opus-4-5 is deprecated' }]);
  const info = model.apply(ev({ type: 'notice', level: 'info', message: 'using claude-sonnet-5-5' }));
  assert.deepEqual(info, [{ op: 'notice', level: 'info', text: 'using claude-sonnet-5-5' }]);
});

test('hook_end becomes a line unless the hook ran quietly; failures are errors', () => {
  const model = new ChatModel();
  const hook = { hookId: 'hook-1', hookEvent: 'PreToolUse', command: 'no-rm.sh', source: 'config.toml', toolCallId: 'c1' } as const;
  assert.deepEqual(model.apply(ev({ type: 'hook_start', ...hook })), []);
  assert.deepEqual(model.apply(ev({ type: 'hook_end', ...hook, outcome: 'ok', exitCode: 0 })), []);
  assert.deepEqual(model.apply(ev({ type: 'hook_end', ...hook, outcome: 'blocked', exitCode: 2, decision: 'block', message: 'use trash' })), [
    { op: 'notice', level: 'info', text: '⚠ PreToolUse hook blocked (no-rm.sh): use trash' },
  ]);
  assert.deepEqual(model.apply(ev({ type: 'hook_end', ...hook, hookEvent: 'PostToolUse', command: 'ruff format', outcome: 'ok', message: 'formatted a.py' })), [
    { op: 'notice', level: 'info', text: '↪ PostToolUse hook ran (ruff format): formatted a.py' },
  ]);
  assert.deepEqual(model.apply(ev({ type: 'hook_end', ...hook, outcome: 'timeout', message: 'timed out after 1 seconds; it was killed' })), [
    { op: 'notice', level: 'error', text: '⚠ PreToolUse hook timed out (no-rm.sh): timed out after 1 seconds; it was killed' },
  ]);
});

// ---------------------------------------------------------------------------------------------
// An MCP server's questions (mcpAsk)

function scriptedUi(answers: (string | undefined)[]): AskUi & { asked: string[]; opened: string[]; refused: string[] } {
  const asked: string[] = [];
  const opened: string[] = [];
  const refused: string[] = [];
  return {
    asked,
    opened,
    refused,
    async pick(items, title) {
      asked.push(`${title} {${items.join('|')}}`);
      return answers.shift();
    },
    async input(title, value, check) {
      asked.push(`${title} [${value ?? ''}]`);
      let answer = answers.shift();
      while (answer !== undefined && check(answer) !== undefined) {
        refused.push(`${answer}: ${check(answer)}`);
        answer = answers.shift();
      }
      return answer;
    },
    async open(url) {
      opened.push(url);
      return true;
    },
  };
}

const FORM = {
  sessionId: 's1', server: 'deploy', mode: 'form' as const, message: 'Which environment?',
  requestedSchema: {
    type: 'object', required: ['env'],
    properties: {
      env: { type: 'string', enum: ['staging', 'production'] },
      dryRun: { type: 'boolean', title: 'Dry run' },
      count: { type: 'integer', default: 2 },
      hero: { type: 'string', oneOf: [{ const: 'h1', title: 'Superman' }] },
      note: { type: 'string', description: 'why' },
    },
  },
};

test('mcpAsk: a form asks required fields first, then by name, and types the answers', async () => {
  assert.deepEqual(formFields(FORM.requestedSchema).map((f) => f.name), ['env', 'count', 'dryRun', 'hero', 'note']);
  const ui = scriptedUi(['Fill in', 'production', 'x', '3', 'false', 'Superman', '']);
  assert.deepEqual(await elicit(ui, FORM), {
    action: 'accept', content: { env: 'production', count: 3, dryRun: false, hero: 'h1' },
  });
  assert.deepEqual(ui.asked, [
    'deploy asks: Which environment? {Fill in|Decline}', 'env * {staging|production}', 'count [2]',
    'Dry run {true|false}', 'hero {Superman}', 'note (why) []',
  ]);
  assert.deepEqual(ui.refused, ['x: an integer']);
});

test('mcpAsk: declining, dismissing, and a page to open', async () => {
  assert.deepEqual(await elicit(scriptedUi(['Decline']), FORM), { action: 'decline' });
  assert.deepEqual(await elicit(scriptedUi(['Fill in', 'staging', undefined]), FORM), { action: 'cancel' });
  assert.deepEqual(await elicit(scriptedUi([undefined]), FORM), { action: 'cancel' });
  const ui = scriptedUi(['Open']);
  const url = { sessionId: 's1', server: 'bank', mode: 'url' as const, message: 'Link it', url: 'https://bank.example/l' };
  assert.deepEqual(await elicit(ui, url), { action: 'accept' });
  assert.deepEqual(ui.opened, ['https://bank.example/l']);
  assert.deepEqual(await elicit(scriptedUi(['Decline']), url), { action: 'decline' });
});
