// `@path` mentions in a message: the files they name are sent along as text blocks, so the model
// has them without reading them first. No `vscode` import (tested under Node).

import type { ImageContent, PromptParams, TextContent } from './protocol';

/** A user message: text, or content blocks. */
export type UserInput = PromptParams['message'];

/** Files larger than this are mentioned by name only (the agent can still read them). */
export const MAX_MENTION_BYTES = 100_000;

const MENTION = /(^|\s)@([\w./-]*[\w/-])/g;
const FILE_BLOCK = /^\s*<file path="([^"]*)">\n/;

/** The paths mentioned as `@path` (after the start or a space: not an e-mail address), once each. */
export function findMentions(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(MENTION)) {
    const path = match[2]!;
    if (!found.includes(path)) {
      found.push(path);
    }
  }
  return found;
}

/**
 * The message to send: `text` alone, or `text` then one `<file path="…">` block per file (each
 * starting on a new line: a provider may join text blocks) and the attached images.
 */
export function withFiles(
  text: string,
  files: ReadonlyArray<{ path: string; content: string }>,
  images: readonly ImageContent[] = [],
): UserInput {
  if (files.length === 0 && images.length === 0) {
    return text;
  }
  return [
    { type: 'text', text },
    ...files.map((f): TextContent => ({ type: 'text', text: `\n\n<file path="${f.path}">\n${f.content}\n</file>` })),
    ...images,
  ];
}

/** The path of a block made by `withFiles`, else undefined. */
export function attachedPath(block: string): string | undefined {
  return FILE_BLOCK.exec(block)?.[1];
}
