// A small, safe Markdown renderer for the chat view: every character of the source is escaped
// before it reaches HTML, only http(s)/mailto links are kept, and partial input (a reply still
// streaming: an unclosed code fence, a half-written `**bold`) renders sensibly.
// No `vscode` import, no DOM: it runs in the extension host and under plain Node.

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

/** Render Markdown `source` as an HTML fragment. */
export function renderMarkdown(source: string): string {
  return renderBlocks(source.replace(/\r\n?/g, '\n').split('\n'));
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(?:\s+(.*)|$)/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function isBlank(line: string): boolean {
  return line.trim() === '';
}

function startsBlock(line: string): boolean {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

function renderBlocks(lines: string[]): string {
  const out: string[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (isBlank(line)) {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1]!;
      const lang = (fence[2] ?? '').replace(/[^\w+#.-]/g, '');
      const body: string[] = [];
      i++;
      while (i < lines.length) {
        const close = lines[i]!.trim();
        if (close.startsWith(marker) && /^(`+|~+)$/.test(close) && close[0] === marker[0]) {
          i++;
          break;
        }
        body.push(lines[i]!);
        i++;
      }
      const cls = lang ? ` class="language-${escapeHtml(lang)}"` : '';
      out.push(`<pre><code${cls}>${escapeHtml(body.join('\n'))}</code></pre>`);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const level = heading[1]!.length;
      out.push(`<h${level}>${renderInline(heading[2] ?? '')}</h${level}>`);
      i++;
      continue;
    }
    if (RULE.test(line)) {
      out.push('<hr>');
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body: string[] = [];
      while (i < lines.length && !isBlank(lines[i]!)) {
        const quoted = QUOTE.exec(lines[i]!);
        body.push(quoted ? quoted[1]! : lines[i]!);
        i++;
      }
      out.push(`<blockquote>${renderBlocks(body)}</blockquote>`);
      continue;
    }
    const item = ITEM.exec(line);
    if (item) {
      i = renderList(lines, i, out);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]!) && lines[i + 1]!.includes('-')) {
      i = renderTable(lines, i, out);
      continue;
    }
    const paragraph: string[] = [];
    while (i < lines.length && !isBlank(lines[i]!) && (paragraph.length === 0 || !startsBlock(lines[i]!))) {
      paragraph.push(lines[i]!.replace(/^\s+/, ''));
      i++;
    }
    out.push(`<p>${renderInline(paragraph.join('\n'))}</p>`);
  }
  return out.join('\n');
}

function renderList(lines: string[], start: number, out: string[]): number {
  const first = ITEM.exec(lines[start]!)!;
  const ordered = /\d/.test(first[2]!);
  const startNumber = ordered ? parseInt(first[2]!, 10) : 1;
  const items: string[][] = [];
  let i = start;
  while (i < lines.length) {
    const line = lines[i]!;
    const item = ITEM.exec(line);
    if (item && /\d/.test(item[2]!) === ordered && item[1]!.length <= first[1]!.length + 1) {
      items.push([item[3] ?? '']);
      i++;
      continue;
    }
    if (isBlank(line)) {
      // A blank line continues the list only if an indented line or another item follows.
      const next = lines[i + 1];
      if (next !== undefined && (/^ {2,}\S/.test(next) || (ITEM.exec(next)?.[1]?.length ?? 99) <= first[1]!.length)) {
        items[items.length - 1]!.push('');
        i++;
        continue;
      }
      break;
    }
    if (/^ {2,}/.test(line) || !startsBlock(line)) {
      items[items.length - 1]!.push(line.replace(/^ {2,4}/, ''));
      i++;
      continue;
    }
    break;
  }
  const tag = ordered ? 'ol' : 'ul';
  const attrs = ordered && startNumber !== 1 ? ` start="${startNumber}"` : '';
  const rendered = items.map((body) => {
    const html = renderBlocks(body);
    // A tight item (one paragraph) renders without the <p>.
    const tight = /^<p>([\s\S]*)<\/p>$/.exec(html);
    return `<li>${tight && !tight[1]!.includes('<p>') ? tight[1] : html}</li>`;
  });
  out.push(`<${tag}${attrs}>${rendered.join('')}</${tag}>`);
  return i;
}

function splitRow(line: string): string[] {
  const trimmed = line.trim().replace(/^\|/, '').replace(/\|$/, '');
  return trimmed.split('|').map((cell) => cell.trim());
}

function renderTable(lines: string[], start: number, out: string[]): number {
  const header = splitRow(lines[start]!);
  const aligns = splitRow(lines[start + 1]!).map((cell) =>
    cell.startsWith(':') && cell.endsWith(':') ? 'center' : cell.endsWith(':') ? 'right' : cell.startsWith(':') ? 'left' : '',
  );
  const cell = (tag: string, text: string, index: number): string => {
    const align = aligns[index] ? ` style="text-align:${aligns[index]}"` : '';
    return `<${tag}${align}>${renderInline(text)}</${tag}>`;
  };
  const rows: string[] = [];
  let i = start + 2;
  while (i < lines.length && !isBlank(lines[i]!) && lines[i]!.includes('|')) {
    rows.push(`<tr>${splitRow(lines[i]!).map((text, n) => cell('td', text, n)).join('')}</tr>`);
    i++;
  }
  out.push(
    `<table><thead><tr>${header.map((text, n) => cell('th', text, n)).join('')}</tr></thead>` +
      `<tbody>${rows.join('')}</tbody></table>`,
  );
  return i;
}

const INLINE = new RegExp(
  [
    /(`+)([\s\S]*?[^`]|[^`]?)\1(?!`)/.source, // 1, 2: code span
    /!?\[([^\]\n]+)\]\(([^()\s]+)(?:\s+"[^"\n]*")?\)/.source, // 3, 4: link (images become links)
    /<((?:https?:\/\/|mailto:)[^\s<>]+)>/.source, // 5: autolink
    /\*\*(?=\S)([\s\S]*?\S)\*\*/.source, // 6: strong
    /__(?=\S)([\s\S]*?\S)__(?!\w)/.source, // 7: strong
    /\*(?=[^\s*])([\s\S]*?[^\s*])\*(?!\*)/.source, // 8: emphasis
    /(?<!\w)_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/.source, // 9: emphasis
    /~~(?=\S)([\s\S]*?\S)~~/.source, // 10: strikethrough
  ].join('|'),
  'g',
);

/** Render inline Markdown: code spans, links, emphasis; everything else escaped. */
export function renderInline(text: string): string {
  let out = '';
  let last = 0;
  INLINE.lastIndex = 0;
  for (let match = INLINE.exec(text); match !== null; match = INLINE.exec(text)) {
    out += escapeText(text.slice(last, match.index));
    last = match.index + match[0].length;
    const [, ticks, code, label, url, autolink, strong1, strong2, em1, em2, strike] = match;
    if (ticks !== undefined) {
      const body = code ?? '';
      const trimmed = /^ .* $/.test(body) && body.trim() !== '' ? body.slice(1, -1) : body;
      out += `<code>${escapeHtml(trimmed)}</code>`;
    } else if (label !== undefined && url !== undefined) {
      out += SAFE_URL.test(url)
        ? `<a href="${escapeHtml(url)}">${renderInline(label)}</a>`
        : `${renderInline(label)} (${escapeHtml(url)})`;
    } else if (autolink !== undefined) {
      out += `<a href="${escapeHtml(autolink)}">${escapeHtml(autolink)}</a>`;
    } else if (strong1 !== undefined || strong2 !== undefined) {
      out += `<strong>${renderInline(strong1 ?? strong2 ?? '')}</strong>`;
    } else if (em1 !== undefined || em2 !== undefined) {
      out += `<em>${renderInline(em1 ?? em2 ?? '')}</em>`;
    } else if (strike !== undefined) {
      out += `<del>${renderInline(strike)}</del>`;
    }
    INLINE.lastIndex = last;
  }
  return out + escapeText(text.slice(last));
}

/** Escaped text with Markdown hard breaks (two trailing spaces or a backslash) as <br>. */
function escapeText(text: string): string {
  return escapeHtml(text).replace(/( {2,}|\\)\n/g, '<br>\n');
}
