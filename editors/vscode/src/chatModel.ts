// Turns the `agent/event` stream into operations on the chat view (ChatOp), which the webview
// applies to its DOM. Text deltas only mark their block dirty; `flush()` re-renders the dirty
// blocks, so the host can coalesce a burst of deltas into one update. No `vscode` import.

import type { ApprovalView } from './approvals';
import { renderMarkdown } from './markdown';
import { attachedPath } from './mentions';
import type { AgentEvent, Message, ToolCallShown, ToolKind, ToolResultMessage, TurnCheckpoint } from './protocol';

export type ToolStatus = 'streaming' | 'waiting' | 'running' | 'done' | 'error';
export type QueueKind = 'steer' | 'followUp';

/** One change to the chat view. Every `html` field is safe to assign to innerHTML. */
export type ChatOp =
  | { op: 'clear' }
  | { op: 'user'; id: string; html: string }
  | { op: 'block'; id: string; kind: 'text' | 'thinking'; html: string }
  | {
      op: 'tool';
      id: string;
      /** The tool's name. */
      name: string;
      /** What the card's title shows: the call's title, or the tool's name (see toolTitle). */
      title: string;
      /** Shown after the title, in the editor's font: a command, or the path it acts on. */
      summary: string;
      /** What the tool does, as the server says (absent until its call starts). */
      kind?: ToolKind;
      args: string;
      status: ToolStatus;
      output: string;
      /** The approved change (a unified diff), shown collapsed in the card. */
      diff?: string;
      /** A `task` call's subagent, drawn as a collapsible card inside this one. */
      child?: ChildView;
    }
  | { op: 'discard'; ids: string[] }
  /** `action: 'continue'`: the notice offers Retry/Continue (`agent/continue`). */
  | { op: 'notice'; level: 'info' | 'error'; text: string; action?: 'continue' }
  | { op: 'state'; running: boolean }
  /** The files a run changed (`checkpoint` events); `entryId` undoes the run (session/revert). */
  | { op: 'changes'; id: string; entryId: string; files: string[] }
  /** Append `text` to the input (Add selection to Tiller). */
  | { op: 'input'; text: string }
  /** A send failed: put `text` back into the input. */
  | { op: 'draft'; text: string }
  | { op: 'pending'; items: Array<{ kind: QueueKind; text: string }> }
  /** The permission requests waiting for an answer, first one first (replaces the last list). */
  | { op: 'approvals'; items: ApprovalView[] };

/** Tool output shown in a card is the tail, at most this many characters. */
export const MAX_TOOL_OUTPUT = 8000;

/** A subagent's progress, as the card of its parent's `task` call shows it. */
export interface ChildView {
  sessionId: string;
  agent: string;
  /** Its tool calls in order, each with its title and status. */
  calls: Array<{ title: string; status: ToolStatus }>;
  /** What it said last (its final report, once it ended). */
  text: string;
  /** How its run ended (a stop reason), once it did. */
  ended?: string;
}

interface Block {
  id: string;
  kind: 'text' | 'thinking';
  text: string;
}

interface ToolCard {
  id: string;
  callId: string;
  diff?: string;
  child?: ChildView;
  name: string;
  /** How the server shows the call (tool_execution_start, session/load's toolCalls). */
  shown?: Omit<ToolCallShown, 'toolCallId'>;
  args: string;
  parsedArgs: Record<string, unknown> | undefined;
  status: ToolStatus;
  output: string;
}

export class ChatModel {
  private messageCount = 0;
  private assistant = 0; // number of the assistant message in progress
  private blocks = new Map<number, Block>(); // by content index, for the message in progress
  private toolsByIndex = new Map<number, string>(); // content index -> card id
  private tools = new Map<string, ToolCard>(); // by card id: `t<assistant message>-<toolCallId>`
  private latestCard = new Map<string, string>(); // toolCallId -> its newest card id
  private errorShown: string | undefined; // the error notice already shown for this run
  private runs = 0;
  private changes: { entryId: string; files: Set<string> } | undefined; // this run's, so far
  private dirty = new Set<string>(); // block ids and tool ids
  private pending: Array<{ kind: QueueKind; text: string }> = [];
  private childCalls = new Map<string, Map<string, number>>(); // card id -> child call id -> index
  running = false;

  /**
   * The ops for `event`, after the ops of whatever was still dirty (so order is kept). An event
   * of a subagent (it has `parentToolCallId`) goes to the card of its parent's `task` call.
   */
  apply(event: AgentEvent): ChatOp[] {
    if (event.parentToolCallId !== undefined) {
      return this.childEvent(event.parentToolCallId, event);
    }
    switch (event.type) {
      case 'message_update':
        this.update(event);
        return [];
      case 'agent_start':
        this.running = true;
        this.errorShown = undefined;
        this.runs++;
        this.changes = undefined;
        return [...this.flush(), { op: 'state', running: true }];
      case 'message_start':
        return [...this.flush(), ...this.messageStart(event.message)];
      case 'message_end':
        return [...this.messageEnd(event.message), ...this.flush()];
      case 'tool_execution_start': {
        const card = this.tool(event.toolCallId, event.toolName);
        card.args = JSON.stringify(event.args, null, 2);
        card.parsedArgs = event.args;
        card.shown = shownOf(event);
        card.status = 'running';
        this.dirty.add(card.id);
        return this.flush();
      }
      case 'tool_execution_update': {
        const card = this.tool(event.toolCallId, event.toolName);
        const partial = event.partialResult;
        const status = isObject(partial) ? partial.status : undefined;
        if (status === 'awaitingPermission') {
          card.status = 'waiting';
          this.dirty.add(card.id);
          return this.flush();
        }
        if (card.status === 'waiting') {
          card.status = 'running';
          this.dirty.add(card.id);
        }
        if (isObject(partial) && 'output' in partial) {
          card.output = tail(String(partial.output));
          this.dirty.add(card.id);
        }
        if (isObject(partial) && typeof partial.sessionId === 'string' && typeof partial.agent === 'string') {
          card.child = { sessionId: partial.sessionId, agent: partial.agent, calls: [], text: '' };
          this.dirty.add(card.id);
          return this.flush();
        }
        return [];
      }
      case 'tool_execution_end': {
        const card = this.tool(event.toolCallId, event.toolName);
        card.status = event.isError ? 'error' : 'done';
        card.output = tail(resultText(event.result));
        this.dirty.add(card.id);
        return this.flush();
      }
      case 'retry_scheduled': {
        const ids = [...[...this.blocks.values()].map((b) => b.id), ...this.toolsByIndex.values()];
        for (const id of ids) {
          this.dirty.delete(id);
          const card = this.tools.get(id);
          if (card && this.latestCard.get(card.callId) === id) {
            this.latestCard.delete(card.callId);
          }
          this.tools.delete(id);
        }
        this.blocks.clear();
        this.toolsByIndex.clear();
        const seconds = Math.round(event.delayMs / 100) / 10;
        return [
          ...(ids.length > 0 ? [{ op: 'discard', ids } as ChatOp] : []),
          {
            op: 'notice',
            level: 'info',
            text: `Retrying (${event.attempt}/${event.maxAttempts}) in ${seconds}s: ${event.errorMessage}`,
          },
        ];
      }
      case 'agent_end': {
        const ops = this.flush();
        if (event.stopReason === 'error') {
          const text = event.errorMessage ?? 'The run failed.';
          if (text !== this.errorShown) {
            ops.push({ op: 'notice', level: 'error', text, action: 'continue' });
          }
        } else if (event.stopReason === 'aborted') {
          ops.push({ op: 'notice', level: 'info', text: 'Stopped.', action: 'continue' });
        } else if (event.stopReason === 'maxTurns') {
          ops.push({ op: 'notice', level: 'info', text: 'Stopped at the turn limit.', action: 'continue' });
        }
        return ops;
      }
      case 'notice': // the model is deprecated, was replaced, or lacks the thinking level
        return [...this.flush(), { op: 'notice', level: 'info', text: event.level === 'warning' ? `⚠ ${event.message}` : event.message }];
      case 'hook_start': // shown when it ends: a hook that says nothing stays quiet
        return this.flush();
      case 'hook_end': {
        const line = hookLine(event);
        if (line === undefined) {
          return this.flush();
        }
        const level = event.outcome === 'error' || event.outcome === 'timeout' ? 'error' : 'info';
        return [...this.flush(), { op: 'notice', level, text: line }];
      }
      case 'checkpoint':
        this.changes ??= { entryId: event.entryId, files: new Set() };
        for (const file of event.files) {
          this.changes.files.add(file);
        }
        return this.flush();
      case 'agent_settled': {
        this.running = false;
        const ops = this.flush();
        if (this.changes && this.changes.files.size > 0) {
          const { entryId, files } = this.changes;
          ops.push({ op: 'changes', id: `changes-${this.runs}`, entryId, files: [...files].sort() });
        }
        this.changes = undefined;
        return [...ops, { op: 'state', running: false }];
      }
      default:
        return this.flush();
    }
  }

  /** Ops re-rendering every block and card changed since the last flush. */
  flush(): ChatOp[] {
    const ops: ChatOp[] = [];
    for (const block of this.blocks.values()) {
      if (this.dirty.delete(block.id)) {
        ops.push({ op: 'block', id: block.id, kind: block.kind, html: renderMarkdown(block.text) });
      }
    }
    for (const card of this.tools.values()) {
      if (this.dirty.delete(card.id)) {
        ops.push(toolOp(card));
      }
    }
    this.dirty.clear();
    return ops;
  }

  /** The user approved call `callId`'s file change: its card keeps the diff (collapsed). */
  approvedDiff(callId: string, diff: string): ChatOp[] {
    const id = this.latestCard.get(callId);
    const card = id === undefined ? undefined : this.tools.get(id);
    if (!card) {
      return [];
    }
    card.diff = diff;
    this.dirty.add(card.id);
    return this.flush();
  }

  /**
   * The ops drawing a saved conversation (`session/load`'s messages), as the run drew it: with
   * `entryIds` and the session's `turns` (session/changes), each run's changed files and Undo
   * come at the run's end again.
   */
  replay(
    messages: readonly Message[],
    entryIds: readonly string[] = [],
    turns: readonly TurnCheckpoint[] = [],
    toolCalls: readonly ToolCallShown[] = [],
  ): ChatOp[] {
    const changes = runChanges(messages, entryIds, turns);
    const ops: ChatOp[] = [];
    let shownCalls = 0; // toolCalls has one entry per tool call of `messages`, in order
    for (const [index, message] of messages.entries()) {
      const ended = changes.get(index);
      if (ended) {
        ops.push(ended);
      }
      if (message.role === 'toolResult') {
        const card = this.tool(message.toolCallId, message.toolName);
        card.status = message.isError ? 'error' : 'done';
        card.output = tail(resultText(message));
        this.dirty.add(card.id);
        ops.push(...this.flush());
      } else {
        ops.push(...this.messageStart(message), ...this.messageEnd(message));
        for (const content of message.role === 'assistant' ? message.content : []) {
          if (content.type !== 'toolCall') {
            continue;
          }
          const shown = toolCalls[shownCalls++];
          const id = this.latestCard.get(content.id);
          const card = id === undefined ? undefined : this.tools.get(id);
          if (shown && card) {
            card.shown = shownOf(shown);
            this.dirty.add(card.id);
          }
        }
        ops.push(...this.flush());
      }
    }
    const last = changes.get(messages.length);
    return last ? [...ops, last] : ops;
  }

  /** A subagent's event: its progress in the card of its parent's call `callId`. */
  private childEvent(callId: string, event: AgentEvent): ChatOp[] {
    const id = this.latestCard.get(callId);
    const card = id === undefined ? undefined : this.tools.get(id);
    if (!card) {
      return [];
    }
    const child = (card.child ??= { sessionId: event.sessionId, agent: 'subagent', calls: [], text: '' });
    const calls = (this.childCalls.get(card.id) ?? new Map<string, number>());
    this.childCalls.set(card.id, calls);
    switch (event.type) {
      case 'tool_execution_start':
        calls.set(event.toolCallId, child.calls.length);
        child.calls.push({ title: toolTitle(event.toolName, shownOf(event)).title, status: 'running' });
        break;
      case 'tool_execution_update': {
        const at = calls.get(event.toolCallId);
        const partial = event.partialResult;
        if (at === undefined || !isObject(partial) || partial.status !== 'awaitingPermission') {
          return [];
        }
        child.calls[at]!.status = 'waiting';
        break;
      }
      case 'tool_execution_end': {
        const at = calls.get(event.toolCallId);
        if (at !== undefined) {
          child.calls[at]!.status = event.isError ? 'error' : 'done';
        }
        break;
      }
      case 'message_end': {
        const text = event.message.role === 'assistant' ? textOf(event.message) : '';
        if (text === '') {
          return [];
        }
        child.text = text;
        break;
      }
      case 'agent_end':
        child.ended = event.stopReason;
        break;
      default:
        return [];
    }
    this.dirty.add(card.id);
    return this.flush();
  }

  /** A steering or follow-up message was accepted; it shows as pending until delivered. */
  queued(kind: QueueKind, text: string): ChatOp[] {
    this.pending.push({ kind, text });
    return [{ op: 'pending', items: [...this.pending] }];
  }

  /** Steering and follow-up messages accepted but not delivered yet. */
  pendingItems(): Array<{ kind: QueueKind; text: string }> {
    return [...this.pending];
  }

  private update(event: Extract<AgentEvent, { type: 'message_update' }>): void {
    switch (event.kind) {
      case 'text':
      case 'thinking': {
        let block = this.blocks.get(event.index);
        if (!block) {
          block = { id: `a${this.assistant}-${event.index}`, kind: event.kind, text: '' };
          this.blocks.set(event.index, block);
        }
        block.text += event.delta ?? '';
        this.dirty.add(block.id);
        return;
      }
      case 'toolCallStart': {
        const card = this.newTool(event.toolCallId ?? '', event.toolName ?? '');
        this.toolsByIndex.set(event.index, card.id);
        this.dirty.add(card.id);
        return;
      }
      case 'toolCallArgs': {
        const id = this.toolsByIndex.get(event.index);
        const card = id === undefined ? undefined : this.tools.get(id);
        if (card && card.status === 'streaming') {
          card.args += event.delta ?? '';
          this.dirty.add(card.id);
        }
        return;
      }
    }
  }

  private messageStart(message: Message): ChatOp[] {
    if (message.role === 'user') {
      const blocks = typeof message.content === 'string' ? [message.content] : message.content.map(
        (c) => (c.type === 'text' ? c.text : '[image]'),
      );
      // Files sent with `@path` mentions show as their names, not their contents.
      const text = blocks.filter((b) => attachedPath(b) === undefined).join('\n');
      const files = blocks.map(attachedPath).filter((p): p is string => p !== undefined);
      const shown = files.length > 0 ? `${text}\n\nAttached: ${files.map((f) => `\`${f}\``).join(', ')}` : text;
      const ops: ChatOp[] = [{ op: 'user', id: `u${++this.messageCount}`, html: renderMarkdown(shown) }];
      const delivered = this.pending.findIndex((p) => p.text === text);
      if (delivered !== -1) {
        this.pending.splice(delivered, 1);
        ops.push({ op: 'pending', items: [...this.pending] });
      }
      return ops;
    }
    if (message.role === 'assistant') {
      this.assistant = ++this.messageCount;
      this.blocks = new Map();
      this.toolsByIndex = new Map();
    }
    return [];
  }

  private messageEnd(message: Message): ChatOp[] {
    if (message.role !== 'assistant') {
      return [];
    }
    // The complete message is authoritative: it replaces whatever the deltas built.
    message.content.forEach((content, index) => {
      if (content.type === 'text' || content.type === 'thinking') {
        const text = content.type === 'text' ? content.text : content.thinking;
        const block = this.blocks.get(index) ?? { id: `a${this.assistant}-${index}`, kind: content.type, text };
        if (block.text !== text || !this.blocks.has(index)) {
          block.text = text;
          this.blocks.set(index, block);
          this.dirty.add(block.id);
        }
      } else if (content.type === 'toolCall') {
        const known = this.toolsByIndex.get(index);
        const card = (known === undefined ? undefined : this.tools.get(known)) ?? this.newTool(content.id, content.name);
        this.toolsByIndex.set(index, card.id);
        if (card.status === 'streaming') {
          card.args = JSON.stringify(content.arguments, null, 2);
          card.parsedArgs = content.arguments;
          this.dirty.add(card.id);
        }
      }
    });
    if (message.stopReason === 'error' && message.errorMessage) {
      this.errorShown = message.errorMessage; // agent_end repeats it: shown once
      return [{ op: 'notice', level: 'error', text: message.errorMessage, action: 'continue' }];
    }
    return [];
  }

  /** The newest card of call `callId` (providers may reuse ids across runs), made if none. */
  private tool(callId: string, name: string): ToolCard {
    const id = this.latestCard.get(callId);
    return (id === undefined ? undefined : this.tools.get(id)) ?? this.newTool(callId, name);
  }

  /** A fresh card for call `callId` of the assistant message in progress. */
  private newTool(callId: string, name: string): ToolCard {
    let id = `t${this.assistant}-${callId}`;
    for (let n = 2; this.tools.has(id); n++) {
      id = `t${this.assistant}-${callId}-${n}`;
    }
    const card: ToolCard = { id, callId, name, args: '', parsedArgs: undefined, status: 'streaming', output: '' };
    this.tools.set(id, card);
    this.latestCard.set(callId, id);
    return card;
  }
}

function toolOp(card: ToolCard): ChatOp {
  const { title, summary } = toolTitle(card.name, card.shown);
  return {
    op: 'tool',
    id: card.id,
    name: card.name,
    title,
    summary,
    ...(card.shown === undefined ? {} : { kind: card.shown.kind }),
    args: card.args,
    status: card.status,
    output: card.output,
    ...(card.diff === undefined ? {} : { diff: card.diff }),
    ...(card.child === undefined ? {} : { child: { ...card.child, calls: card.child.calls.map((c) => ({ ...c })) } }),
  };
}

/** The text blocks of an assistant message, joined. */
function textOf(message: Extract<Message, { role: 'assistant' }>): string {
  return message.content.map((c) => (c.type === 'text' ? c.text : '')).join('').trim();
}

/** How the server showed a call; undefined when it did not say (an older server). */
function shownOf(info: { title?: unknown; kind?: unknown; path?: unknown }): Omit<ToolCallShown, 'toolCallId'> | undefined {
  if (typeof info.title !== 'string' || typeof info.kind !== 'string') {
    return undefined;
  }
  const path = typeof info.path === 'string' ? { path: info.path } : {};
  return { title: info.title, kind: info.kind as ToolKind, ...path };
}

/**
 * A tool call's card title, from how the server shows the call (never from the tool's name):
 * a command (kind `execute`) after its tool's name; else the title its tool gave it
 * (`Edit src/app.py`); else the tool's name and the path it acts on. Until the call starts,
 * its tool's name.
 */
export function toolTitle(name: string, shown: Omit<ToolCallShown, 'toolCallId'> | undefined): { title: string; summary: string } {
  if (shown?.kind === 'execute' && shown.title !== '') {
    return { title: name, summary: oneLine(shown.title) };
  }
  if (shown && shown.title !== '' && shown.title !== name) {
    return { title: oneLine(shown.title), summary: '' };
  }
  return { title: name, summary: shown?.path === undefined ? '' : oneLine(shown.path) };
}

function oneLine(text: string): string {
  const line = text.split('\n')[0] ?? '';
  return line.length > 120 ? `${line.slice(0, 119)}…` : line;
}

/** The text of a tool result's content blocks (images as a placeholder). */
export function resultText(result: ToolResultMessage): string {
  return result.content.map((c) => (c.type === 'text' ? c.text : `[image ${c.mimeType}]`)).join('\n');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function tail(text: string): string {
  return text.length > MAX_TOOL_OUTPUT ? `…${text.slice(-MAX_TOOL_OUTPUT)}` : text;
}

/**
 * The `changes` op of each run that changed files, keyed by the index of the message it goes
 * before (the run's end: the next user message, or the end). A run's first checkpoint undoes it;
 * its files are all its checkpoints' files, as `agent_settled` shows them live.
 */
function runChanges(
  messages: readonly Message[],
  entryIds: readonly string[],
  turns: readonly TurnCheckpoint[],
): Map<number, ChatOp> {
  const runs = new Map<number, { entryId: string; files: Set<string> }>();
  for (const turn of turns) {
    const at = turn.afterEntryId === undefined ? -1 : entryIds.indexOf(turn.afterEntryId);
    if (at < 0 || turn.files.length === 0) {
      continue;
    }
    let end = at + 1;
    while (end < messages.length && messages[end]?.role !== 'user') {
      end += 1;
    }
    const run = runs.get(end) ?? { entryId: turn.entryId, files: new Set<string>() };
    turn.files.forEach((file) => run.files.add(file));
    runs.set(end, run);
  }
  const ops = new Map<number, ChatOp>();
  for (const [end, run] of runs) {
    ops.set(end, { op: 'changes', id: `changes-loaded-${end}`, entryId: run.entryId, files: [...run.files].sort() });
  }
  return ops;
}

/** One line for a hook that ended (`hook_end`): what it did, unless it ran quietly (ok, with
 * nothing to say). */
export function hookLine(event: Extract<AgentEvent, { type: 'hook_end' }>): string | undefined {
  if (event.outcome === 'ok' && !event.message) {
    return undefined;
  }
  const what = {
    ok: 'ran',
    blocked: 'blocked',
    error: 'failed',
    timeout: 'timed out',
  }[event.outcome];
  const said = event.message ? `: ${event.message}` : '';
  return `${event.outcome === 'ok' ? '↪' : '⚠'} ${event.hookEvent} hook ${what} (${event.command})${said}`;
}
