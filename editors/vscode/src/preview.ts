// What a permission request would change: the proposed content of a file, computed from the
// server's unified diff. No `vscode` import (tested under Node).

import type { RequestPermissionParams } from './protocol';

/**
 * The file content the tool call would leave behind, given the `current` content ('' for a new
 * file): the server's unified diff (`preview.kind === 'diff'`, made against the editor's buffer)
 * applied to it. Undefined when there is none or it does not apply (the caller then shows the
 * diff text). Nothing here reads the tool's arguments: it is the same for every tool the server can
 * predict a change of.
 */
export function proposedContent(params: RequestPermissionParams, current: string): string | undefined {
  const { preview } = params;
  return preview.kind === 'diff' ? applyUnifiedDiff(current, preview.diff) : undefined;
}

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

/**
 * Apply a unified diff (as `difflib.unified_diff` writes it, with `\ No newline at end of file`
 * markers) to `original`. Undefined if a context or removed line does not match.
 */
export function applyUnifiedDiff(original: string, diff: string): string | undefined {
  if (diff === '') {
    return original;
  }
  const source = splitKeepingEnds(original);
  const out: string[] = [];
  let cursor = 0; // index into source
  const diffLines = diff.split('\n');
  let i = 0;
  while (i < diffLines.length && !HUNK.test(diffLines[i]!)) {
    i++; // the ---/+++ header
  }
  if (i === diffLines.length) {
    return undefined;
  }
  while (i < diffLines.length) {
    const hunk = HUNK.exec(diffLines[i]!);
    if (!hunk) {
      if (diffLines[i] === '') {
        i++;
        continue;
      }
      return undefined;
    }
    const oldStart = Number(hunk[1]);
    const oldCount = hunk[2] === undefined ? 1 : Number(hunk[2]);
    const firstIndex = oldCount === 0 ? oldStart : oldStart - 1;
    if (firstIndex < cursor || firstIndex > source.length) {
      return undefined;
    }
    out.push(...source.slice(cursor, firstIndex));
    cursor = firstIndex;
    i++;
    // Each body line with its end; a following "\ No newline" marker strips the "\n".
    while (i < diffLines.length && /^[ +\-\\]/.test(diffLines[i]!) && !HUNK.test(diffLines[i]!)) {
      const line = diffLines[i]!;
      if (line.startsWith('\\')) {
        i++;
        continue;
      }
      const noNewline = diffLines[i + 1]?.startsWith('\\') ?? false;
      const text = line.slice(1) + (noNewline ? '' : '\n');
      if (line[0] === '+') {
        out.push(text);
      } else {
        if (source[cursor] !== text) {
          return undefined;
        }
        if (line[0] === ' ') {
          out.push(text);
        }
        cursor++;
      }
      i++;
    }
  }
  out.push(...source.slice(cursor));
  return out.join('');
}

function splitKeepingEnds(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}
