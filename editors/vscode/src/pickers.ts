// Quick picks for the session's model (`models/list`, `agent/setModel`) and permission mode
// (`agent/setPermissionMode`). Each returns true when it changed something.

import * as vscode from 'vscode';

import type { TillerClient } from './client';
import type { PermissionMode } from './protocol';

export async function pickModel(client: TillerClient, sessionId: string, current?: string): Promise<boolean> {
  const { providers, models } = await client.request('models/list', {});
  const usable = new Set(providers.filter((p) => p.configured).map((p) => p.name));
  const items = [
    ...models
      .filter((m) => usable.has(m.provider))
      .map((m) => ({
        label: m.id,
        description: m.id === current ? `${m.provider} (current)` : m.provider,
        provider: m.provider,
        model: m.id as string | undefined,
      })),
    ...[...usable].map((name) => ({
      label: `${name}: its default model`,
      description: '',
      provider: name,
      model: undefined as string | undefined,
    })),
  ];
  const picked = await vscode.window.showQuickPick(items, { title: 'Tiller: Model for this conversation' });
  if (!picked) {
    return false;
  }
  await client.request('agent/setModel', { sessionId, provider: picked.provider, ...(picked.model ? { model: picked.model } : {}) });
  return true;
}

const MODES: Array<{ mode: PermissionMode; detail: string }> = [
  { mode: 'ask', detail: 'Ask before file changes and commands' },
  { mode: 'acceptEdits', detail: 'File changes in the workspace without asking; ask before commands' },
  { mode: 'auto', detail: 'Everything without asking' },
  { mode: 'readonly', detail: 'Only reads: file changes and commands are refused' },
];

export async function pickMode(client: TillerClient, sessionId: string, current?: PermissionMode): Promise<boolean> {
  const picked = await vscode.window.showQuickPick(
    MODES.map((m) => ({ label: m.mode, description: m.mode === current ? '(current)' : '', detail: m.detail })),
    { title: 'Tiller: Permission mode for this conversation' },
  );
  if (!picked) {
    return false;
  }
  await client.setPermissionMode({ sessionId, mode: picked.label as PermissionMode });
  return true;
}
