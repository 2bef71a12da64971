// Messages between the chat webview (media/chat.js) and the extension. No `vscode` import.

import type { ChatOp } from './chatModel';
import { PermissionOutcome, type ImageContent } from './protocol';

/** Pasted or attached images: `data` is base64 (no `data:` prefix). */
function parseImages(value: unknown): ImageContent[] | undefined | false {
  if (value === undefined) {
    return undefined;
  }
  if (!Array.isArray(value)) {
    return false;
  }
  const images: ImageContent[] = [];
  for (const item of value) {
    const { mimeType, data } = (item ?? {}) as Record<string, unknown>;
    if (typeof mimeType !== 'string' || !/^image\/[\w.+-]+$/.test(mimeType) || typeof data !== 'string') {
      return false;
    }
    images.push({ type: 'image', mimeType, data });
  }
  return images;
}

export type SubmitKind = 'prompt' | 'steer' | 'followUp';

/** Messages the webview posts to the extension. */
export type FromWebview =
  | { type: 'ready' }
  | { type: 'submit'; kind: SubmitKind; text: string; images?: ImageContent[] }
  | { type: 'abort' }
  | { type: 'continue' }
  | { type: 'copy' | 'insert'; text: string }
  | { type: 'open'; path: string }
  | { type: 'revert'; entryId: string }
  | { type: 'approve'; key: string; option: PermissionOutcome };

/** Messages the extension posts to the webview. */
export type ToWebview = { type: 'ops'; ops: ChatOp[] };

export function parseFromWebview(message: unknown): FromWebview | undefined {
  if (typeof message !== 'object' || message === null) {
    return undefined;
  }
  const m = message as Record<string, unknown>;
  if (m.type === 'ready' || m.type === 'abort' || m.type === 'continue') {
    return { type: m.type };
  }
  if (
    m.type === 'submit' &&
    typeof m.text === 'string' &&
    (m.kind === 'prompt' || m.kind === 'steer' || m.kind === 'followUp')
  ) {
    const images = parseImages(m.images);
    if (images === false) {
      return undefined;
    }
    return images && images.length > 0
      ? { type: 'submit', kind: m.kind, text: m.text, images }
      : { type: 'submit', kind: m.kind, text: m.text };
  }
  if (m.type === 'open' && typeof m.path === 'string') {
    return { type: 'open', path: m.path };
  }
  if (m.type === 'revert' && typeof m.entryId === 'string') {
    return { type: 'revert', entryId: m.entryId };
  }
  if ((m.type === 'copy' || m.type === 'insert') && typeof m.text === 'string') {
    return { type: m.type, text: m.text };
  }
  if (
    m.type === 'approve' &&
    typeof m.key === 'string' &&
    (PermissionOutcome as readonly unknown[]).includes(m.option)
  ) {
    return { type: 'approve', key: m.key, option: m.option as PermissionOutcome };
  }
  return undefined;
}

