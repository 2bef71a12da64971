// Pending permission requests, answered in the chat view or the diff editor's title bar (never
// a modal). Requests queue in arrival order; the first one is "shown" (its diff open). A request
// leaves the queue when it is answered or when Tiller withdraws it ($/cancelRequest). No
// `vscode` import (tested under Node).

import type { CancellationToken } from 'vscode-jsonrpc/node';

import type { PermissionOutcome, RequestPermissionParams, SandboxUseModel } from './protocol';

/** The buttons offered, in order; `rejectAlways` is left to the config file's rules. */
const BUTTONS: ReadonlyArray<{ option: PermissionOutcome; label: string }> = [
  { option: 'allowOnce', label: 'Allow' },
  { option: 'allowAlways', label: 'Always allow' },
  { option: 'rejectOnce', label: 'Reject' },
];

/** What the chat view shows of one pending request. */
export interface ApprovalView {
  key: string;
  toolCallId: string;
  title: string;
  detail: string;
  /** What "Always allow" covers, said in words. */
  always: string;
  buttons: Array<{ option: PermissionOutcome; label: string }>;
}

/** Called when a request becomes the first of the queue, and when it leaves the queue. */
export interface ApprovalHooks {
  shown?(): Promise<void> | void;
  settled?(): void;
}

interface Pending {
  view: ApprovalView;
  hooks: ApprovalHooks;
  resolve(option: PermissionOutcome | undefined): void;
  shown: boolean;
}

/** How a command would run, from the preview's `sandbox` (protocol.md, "Sandbox"). */
export function sandboxWords(sandbox: SandboxUseModel): string {
  if (sandbox.mode === 'off') {
    const asked = sandbox.escalated ? 'asks to run outside the sandbox' : 'unsandboxed';
    return sandbox.reason ? `${asked}: ${sandbox.reason}` : asked;
  }
  const network = sandbox.network ? 'network' : 'no network';
  const asked = sandbox.escalated ? `; asks for network: ${sandbox.reason ?? ''}` : '';
  return `sandboxed (${sandbox.mode}, ${network}${asked})`;
}

/** The words for a request: its title, detail and what "always" would remember. */
export function describeRequest(
  params: RequestPermissionParams,
  relative: (file: string) => string,
): Omit<ApprovalView, 'key' | 'toolCallId' | 'buttons'> {
  const { preview, toolName } = params;
  let title: string;
  let detail = '';
  let always: string;
  switch (preview.kind) {
    case 'diff':
      title = `${toolName} ${relative(preview.path)}`;
      detail = 'The proposed change is open in the diff editor.';
      always = `Always allow: ${toolName} on ${relative(preview.path)}, for the rest of this session.`;
      break;
    case 'command':
      title = `run ${preview.command.split('\n')[0] ?? ''}`;
      detail = `${preview.command}\nin ${preview.cwd}`;
      if (preview.sandbox) {
        detail += `\n${sandboxWords(preview.sandbox)}`;
      }
      always = 'Always allow: this exact command (word for word), for the rest of this session.';
      break;
    case 'hooks':
      title = `run the hooks in ${preview.file}`;
      detail = preview.commands.join('\n');
      always = `Always allow: the hooks of ${preview.file} as they are now (a change asks again).`;
      break;
    case 'path':
      title = `${toolName} ${preview.path}`;
      detail = 'The path is outside the workspace.';
      always = `Always allow: ${toolName} on ${preview.path}, for the rest of this session.`;
      break;
    default:
      title = `run ${toolName}`;
      always = `Always allow: ${toolName}, for the rest of this session.`;
  }
  if (params.reason) {
    detail = detail ? `${params.reason}\n${detail}` : params.reason;
  }
  return { title: `Tiller wants to ${title}`, detail, always };
}

export class ApprovalQueue {
  private readonly pending: Pending[] = [];
  private readonly listeners: Array<(views: ApprovalView[]) => void> = [];
  private counter = 0;

  /** `listener` gets the whole queue after every change. */
  onChange(listener: (views: ApprovalView[]) => void): { dispose(): void } {
    this.listeners.push(listener);
    return {
      dispose: () => {
        const at = this.listeners.indexOf(listener);
        if (at !== -1) {
          this.listeners.splice(at, 1);
        }
      },
    };
  }

  /** The pending requests, first one first. */
  views(): ApprovalView[] {
    return this.pending.map((p) => p.view);
  }

  /**
   * Queue a request; resolves with the user's answer, or undefined when `token` is cancelled
   * (Tiller withdrew it) or `clear()` dropped it. `hooks.settled` runs in every case.
   */
  ask(
    params: RequestPermissionParams,
    words: Omit<ApprovalView, 'key' | 'toolCallId' | 'buttons'>,
    token: CancellationToken,
    hooks: ApprovalHooks = {},
  ): Promise<PermissionOutcome | undefined> {
    const view: ApprovalView = {
      ...words,
      key: `approval-${++this.counter}`,
      toolCallId: params.toolCallId,
      buttons: BUTTONS.filter((b) => params.options.includes(b.option)),
    };
    return new Promise((resolve) => {
      const entry: Pending = { view, hooks, resolve, shown: false };
      this.pending.push(entry);
      const withdraw = token.onCancellationRequested(() => this.settle(view.key, undefined));
      entry.resolve = (option) => {
        withdraw.dispose();
        resolve(option);
      };
      if (token.isCancellationRequested) {
        this.settle(view.key, undefined);
        return;
      }
      this.changed();
    });
  }

  /** Answer the request `key` (the first one when undefined). False if it is no longer pending. */
  answer(key: string | undefined, option: PermissionOutcome): boolean {
    const entry = key === undefined ? this.pending[0] : this.pending.find((p) => p.view.key === key);
    if (!entry || !entry.view.buttons.some((b) => b.option === option)) {
      return false;
    }
    return this.settle(entry.view.key, option);
  }

  /** Drop every pending request (their askers get undefined). */
  clear(): void {
    for (const entry of [...this.pending]) {
      this.settle(entry.view.key, undefined);
    }
  }

  private settle(key: string, option: PermissionOutcome | undefined): boolean {
    const at = this.pending.findIndex((p) => p.view.key === key);
    if (at === -1) {
      return false;
    }
    const [entry] = this.pending.splice(at, 1);
    entry!.resolve(option);
    try {
      entry!.hooks.settled?.();
    } finally {
      this.changed();
    }
    return true;
  }

  private changed(): void {
    const head = this.pending[0];
    if (head && !head.shown) {
      head.shown = true;
      void Promise.resolve(head.hooks.shown?.()).catch(() => undefined);
    }
    const views = this.views();
    for (const listener of [...this.listeners]) {
      listener(views);
    }
  }
}
