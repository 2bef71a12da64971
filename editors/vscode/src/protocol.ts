// The Tiller wire protocol (protocol.md at the repository root) as TypeScript types.
// No runtime code and no `vscode` import: shared by the client, the chat model and the tests.

export const PROTOCOL_VERSION = 1;

/** JSON-RPC error codes Tiller answers with (protocol.md, "Errors"). */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  AgentBusy: -32010,
  NoActiveRun: -32011,
  CannotContinue: -32012,
  UnknownSession: -32013,
  ProviderNotConfigured: -32014,
  /** Answered by this client to a server request for a file that does not exist. */
  ResourceNotFound: -32002,
} as const;

// ---------------------------------------------------------------------------------------------
// Messages

export interface TextContent {
  type: 'text';
  text: string;
}

export interface ImageContent {
  type: 'image';
  data: string;
  mimeType: string;
}

export interface ThinkingContent {
  type: 'thinking';
  thinking: string;
  signature?: string;
}

export interface ToolCallContent {
  type: 'toolCall';
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  /** Set when the arguments did not parse as one JSON object: `arguments` is then a repair for
   * display only, and the call was not run. */
  argumentsError?: string;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** USD, from the model's configured prices (0 when it has none). */
  cost: number;
  /** Of outputTokens, those spent reasoning (when the provider reports them). */
  reasoningTokens?: number;
  /** True when a server reported no usage and Tiller estimated the counts. */
  estimated?: boolean;
}

export type AssistantStopReason = 'stop' | 'length' | 'toolUse' | 'error' | 'aborted';
export type RunStopReason = AssistantStopReason | 'maxTurns' | 'maxTokens';

export interface UserMessage {
  role: 'user';
  content: string | Array<TextContent | ImageContent>;
  timestamp: number;
  /** The ACP client's prompt blocks, when the message came from one and differs from them. */
  acpContent?: Record<string, unknown>[];
}

export interface AssistantMessage {
  role: 'assistant';
  content: Array<TextContent | ThinkingContent | ToolCallContent>;
  provider: string;
  model: string;
  usage: Usage;
  stopReason: AssistantStopReason;
  errorMessage?: string;
  timestamp: number;
  /** The provider's own record of the reply (OpenAI's Responses API): opaque, never shown. */
  responseItems?: Array<Record<string, unknown>>;
}

export interface ToolResultMessage {
  role: 'toolResult';
  toolCallId: string;
  toolName: string;
  content: Array<TextContent | ImageContent>;
  details?: unknown;
  isError: boolean;
  timestamp: number;
}

export type Message = UserMessage | AssistantMessage | ToolResultMessage;

// ---------------------------------------------------------------------------------------------
// Methods (client -> server)

export interface ClientCapabilities {
  permissions: boolean;
  /** `keepsUnsaved`: written files may stay unsaved in the editor (the disk lags behind). */
  fs: { readTextFile: boolean; writeTextFile: boolean; keepsUnsaved?: boolean };
}

export interface InitializeParams {
  clientInfo?: { name: string; version?: string };
  /** The Tiller protocol version this client speaks (send `capabilities` with it). */
  protocolVersion?: number;
  capabilities?: ClientCapabilities | Record<string, unknown>;
  /** message_update deltas within this many ms are merged (default 16; 0: off). */
  deltaWindowMs?: number;
}

export interface InitializeResult {
  serverInfo: { name: string; version: string };
  protocolVersion: number;
  capabilities: Record<string, unknown>;
}

export type PermissionMode = 'ask' | 'acceptEdits' | 'auto' | 'readonly';

export interface SessionNewParams {
  cwd?: string;
  provider?: string;
  model?: string;
  systemPrompt?: string;
  appendSystemPrompt?: string;
  /** Default true: AGENTS.md / CLAUDE.md files go into the system prompt. */
  contextFiles?: boolean;
  /** Default `ask` for a client that declared `permissions` (this one does). */
  permissionMode?: PermissionMode;
  /** MCP servers for this session only, in ACP's shape (protocol.md, MCP servers). */
  mcpServers?: Record<string, unknown>[];
}

export interface SessionNewResult {
  sessionId: string;
}

export interface SessionParams {
  sessionId?: string;
}

export interface SessionInfo {
  sessionId: string;
  title?: string;
  cwd: string;
  created: number;
  updated: number;
  messageCount: number;
  live: boolean;
}

export interface SessionListResult {
  sessions: SessionInfo[];
  nextCursor?: string;
}

/** One turn's checkpoint in `session/changes`: `afterEntryId` places it in a loaded transcript. */
export interface TurnCheckpoint {
  entryId: string;
  files: string[];
  afterEntryId?: string;
}

export interface SessionLoadResult {
  sessionId: string;
  cwd: string;
  provider: string;
  model: string;
  messages: Message[];
  entryIds: string[];
  pendingSteering: number;
  pendingFollowUp: number;
  /** `session/fork` with `revertFiles` only: what was put back. */
  revert?: Record<string, unknown>;
  /** How each tool call of `messages` was shown when it started, in order. */
  toolCalls: ToolCallShown[];
}

/** What a tool does (ACP's tool kinds): how a call is shown, never its tool's name. */
export type ToolKind = 'read' | 'edit' | 'execute' | 'search' | 'think' | 'other';

/** A loaded tool call as its `tool_execution_start` showed it. */
export interface ToolCallShown {
  toolCallId: string;
  title: string;
  kind: ToolKind;
  path?: string;
}

export type UserInput = string | Array<TextContent | ImageContent>;

export interface PromptParams extends SessionParams {
  message: UserInput;
}

export interface RunResult {
  stopReason: RunStopReason;
  errorMessage?: string;
  usage: Usage;
}

export interface QueueParams extends SessionParams {
  message: UserInput;
}

export interface QueueResult {
  queued: number;
}

export type QueueMode = 'one-at-a-time' | 'all';

export interface AgentState {
  sessionId: string;
  isRunning: boolean;
  provider: string;
  /** Absent when the provider has no model yet. */
  model?: string;
  cwd: string;
  messageCount: number;
  pendingSteering: number;
  pendingFollowUp: number;
  steeringMode: QueueMode;
  followUpMode: QueueMode;
  thinkingLevel: 'off' | 'low' | 'medium' | 'high';
  permissionMode: PermissionMode;
  usage: Usage;
  contextFiles: { path: string; size: number; truncated: boolean }[];
  /** Context files, templates and skills left unread: they lead out of their root. */
  refusedFiles: { path: string; reason: string }[];
  /** Whether the session snapshots the workspace (session/changes, session/revert). */
  checkpoints?: { enabled: boolean; reason?: string };
  /** The agent's plan (its last `todo` call); empty when it has none. */
  plan: PlanItem[];
}

/** One step of the agent's plan (`agent/getState`'s `plan`, the `plan` event). */
type PlanItem = { content: string; status: 'pending' | 'in_progress' | 'completed' };

/** A slash command (`commands/list`, `commands_changed`); `name` has no slash. */
export interface CommandEntry {
  name: string;
  description: string;
  argumentHint?: string;
  source: 'prompt' | 'mcp' | 'skill';
}

// ---------------------------------------------------------------------------------------------
// The `agent/event` notification

export const EVENT_METHOD = 'agent/event';

interface EventBase {
  sessionId: string;
  seq: number;
}

export type MessageUpdateEvent = EventBase & { type: 'message_update'; index: number } & (
    | { kind: 'text'; delta: string }
    | { kind: 'thinking'; delta: string }
    | { kind: 'toolCallStart'; toolCallId: string; toolName: string }
    | { kind: 'toolCallArgs'; delta: string }
  );

export type CompactionReason = 'threshold' | 'overflow' | 'manual';

export type AgentEvent =
  | (EventBase & { type: 'agent_start' })
  | (EventBase & { type: 'turn_start' })
  | (EventBase & { type: 'message_start'; message: Message })
  | (EventBase & { type: 'message_end'; message: Message })
  | MessageUpdateEvent
  | (EventBase & {
      type: 'tool_execution_start';
      toolCallId: string;
      toolName: string;
      args: Record<string, unknown>;
      /** One line: `Edit src/app.py`, a command tool's command, else the tool's name. */
      title: string;
      kind: ToolKind;
      /** The absolute path the call acts on, for a tool with a path argument. */
      path?: string;
    })
  | (EventBase & {
      type: 'tool_execution_update';
      toolCallId: string;
      toolName: string;
      partialResult?: unknown;
    })
  | (EventBase & {
      type: 'tool_execution_end';
      toolCallId: string;
      toolName: string;
      result: ToolResultMessage;
      isError: boolean;
    })
  | (EventBase & { type: 'turn_end'; message: AssistantMessage; toolResults: ToolResultMessage[] })
  | (EventBase & { type: 'agent_end'; stopReason: RunStopReason; errorMessage?: string; usage: Usage })
  | (EventBase & {
      type: 'retry_scheduled';
      attempt: number;
      maxAttempts: number;
      delayMs: number;
      errorMessage: string;
    })
  | (EventBase & { type: 'retry_end'; success: boolean; attempt: number })
  | (EventBase & { type: 'compaction_start'; reason: CompactionReason; tokensBefore: number })
  | (EventBase & {
      type: 'compaction_end';
      reason: CompactionReason;
      tokensBefore: number;
      tokensAfter?: number;
      removedCount: number;
      summary?: string;
      errorMessage?: string;
    })
  | (EventBase & { type: 'checkpoint'; entryId: string; files: string[]; notCovered: string[] })
  | (EventBase & { type: 'agent_settled' })
  | (EventBase & { type: 'commands_changed'; commands: CommandEntry[] })
  | (EventBase & { type: 'plan'; items: PlanItem[] })
  | (EventBase & {
      type: 'mcp_status';
      server: {
        name: string;
        transport: string;
        status: 'starting' | 'ready' | 'failed' | 'stopped';
        error?: string;
        tools: string[];
      };
    });

export type AgentEventType = AgentEvent['type'];

// ---------------------------------------------------------------------------------------------
// Requests (server -> client)

export const PermissionOptions = ['allowOnce', 'allowAlways', 'rejectOnce', 'rejectAlways'] as const;
export type PermissionOption = (typeof PermissionOptions)[number];

export type PermissionPreview =
  | { kind: 'diff'; path: string; diff: string }
  | { kind: 'command'; command: string; cwd: string }
  | { kind: 'path'; path: string }
  | { kind: 'none' };

export interface RequestPermissionParams {
  sessionId: string;
  toolCallId: string;
  toolName: string;
  args: Record<string, unknown>;
  /** `{kind: "diff"}`: a unified diff against the editor's buffer; `path` is absolute. */
  preview: PermissionPreview;
  /** Why Tiller asks, e.g. "'write' changes /home/me/project/notes.txt". */
  reason: string;
  options: PermissionOption[];
}

export interface RequestPermissionResult {
  outcome: PermissionOption;
  /** Told to the model with a rejection ("the user rejected this call: <reason>"). */
  reason?: string;
}

export interface ReadTextFileParams {
  sessionId: string;
  path: string;
  /** 1-based first line to return. */
  line?: number;
  /** How many lines to return. */
  limit?: number;
}

export interface ReadTextFileResult {
  content: string;
}

/** Replace the file's content in the editor's buffer (undoable; saving is the user's choice). */
export interface WriteTextFileParams {
  sessionId: string;
  path: string;
  content: string;
}

export type WriteTextFileResult = Record<string, never>;

export const ServerRequest = {
  requestPermission: 'client/requestPermission',
  readTextFile: 'client/readTextFile',
  writeTextFile: 'client/writeTextFile',
} as const;
