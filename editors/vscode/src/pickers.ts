// Quick picks for the session's model (`models/list`, `agent/setModel`), thinking level
// (`agent/setThinkingLevel`) and permission mode (`agent/setPermissionMode`). Each returns true
// when it changed something; what the server says about the choice (a deprecated model, a
// level the model lacks) is shown as an information message.

import * as vscode from 'vscode';

import type { TillerClient } from './client';
import { ThinkingLevel, type ModelEntry, type PermissionMode } from './protocol';

/** What a model picker item says of a model: its name, window, thinking levels, retirement. */
export function modelDetail(model: ModelEntry): string {
  const parts: string[] = [];
  if (model.displayName && model.displayName !== model.id) {
    parts.push(model.displayName);
  }
  if (model.contextWindow) {
    parts.push(`${Math.round(model.contextWindow / 1000)}k context`);
  }
  if (model.thinkingLevels) {
    const on = model.thinkingLevels.filter((level) => level !== 'off');
    parts.push(on.length > 0 ? `thinking: ${on.join(', ')}` : 'no thinking');
  }
  if (model.lifecycle === 'deprecated') {
    parts.push(`deprecated, retires ${model.retiresAt ?? 'soon'}`);
  }
  return parts.join(' · ');
}

export async function pickModel(client: TillerClient, sessionId: string, current?: string): Promise<boolean> {
  const { providers, models } = await client.request('models/list', {});
  const usable = new Set(providers.filter((p) => p.configured).map((p) => p.name));
  const items = [
    ...models
      .filter((m) => usable.has(m.provider))
      .filter((m) => m.lifecycle !== 'retired')
      .map((m) => ({
        label: m.id,
        description: m.id === current ? `${m.provider} (current)` : m.provider,
        detail: modelDetail(m),
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
  const set = await client.request('agent/setModel', {
    sessionId,
    provider: picked.provider,
    ...(picked.model ? { model: picked.model } : {}),
  });
  if (set.notice) {
    void vscode.window.showWarningMessage(`Tiller: ${set.notice}`);
  }
  return true;
}

const LEVEL_DETAIL: Record<ThinkingLevel, string> = {
  off: 'No thinking (a model that always thinks runs at its lowest level)',
  low: 'Quick thinking',
  medium: 'Moderate thinking',
  high: 'Deep thinking',
  xhigh: 'Deeper thinking',
  max: 'As much as the model can',
};

export async function pickThinking(client: TillerClient, sessionId: string, current?: ThinkingLevel): Promise<boolean> {
  const picked = await vscode.window.showQuickPick(
    ThinkingLevel.map((level) => ({ label: level, description: level === current ? '(current)' : '', detail: LEVEL_DETAIL[level] })),
    { title: 'Tiller: Thinking level for this conversation' },
  );
  if (!picked) {
    return false;
  }
  const set = await client.request('agent/setThinkingLevel', { sessionId, level: picked.label as ThinkingLevel });
  if (set.note) {
    void vscode.window.showInformationMessage(`Tiller: ${set.note}`);
  }
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
