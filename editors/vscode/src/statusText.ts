// The status bar's words: what Tiller is doing (idle, working, waiting for approval), the model,
// and the session's tokens and cost. No `vscode` import (tested under Node).

import type { GetStateResult } from './protocol';

export type Activity = 'idle' | 'working' | 'waiting';

const ICONS: Record<Activity, string> = { idle: '$(comment-discussion)', working: '$(sync~spin)', waiting: '$(bell-dot)' };
const WORDS: Record<Activity, string> = { idle: 'idle', working: 'working', waiting: 'waiting for approval' };

/** `1234` -> `1.2k`, `2500000` -> `2.5M`. */
export function compactCount(n: number): string {
  if (n < 1000) {
    return String(n);
  }
  if (n < 1_000_000) {
    return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  }
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/** The item's text and tooltip for `activity` and the last known session state. */
export function statusText(
  activity: Activity,
  state: Pick<GetStateResult, 'provider' | 'model' | 'usage' | 'permissionMode'> | undefined,
): { text: string; tooltip: string } {
  const parts = [`${ICONS[activity]} Tiller: ${WORDS[activity]}`];
  const tooltip = [`Tiller is ${WORDS[activity]}.`];
  if (state) {
    const model = state.model ? `${state.provider}/${state.model}` : state.provider;
    parts.push(state.model ?? state.provider);
    const tokens = state.usage.inputTokens + state.usage.outputTokens;
    if (tokens > 0) {
      parts.push(`${compactCount(tokens)} tok`);
    }
    if (state.usage.cost > 0) {
      parts.push(`$${state.usage.cost.toFixed(state.usage.cost < 1 ? 3 : 2)}`);
    }
    tooltip.push(
      `Model: ${model}`,
      `Permission mode: ${state.permissionMode}`,
      `Tokens: ${state.usage.inputTokens} in, ${state.usage.outputTokens} out; cost $${state.usage.cost.toFixed(4)}`,
      'Click to open the chat.',
    );
  }
  return { text: parts.join(' · '), tooltip: tooltip.join('\n') };
}
