// client/getDiagnostics in VS Code: what every extension's language servers report for the files
// the agent is about to change and has just changed (`vscode.languages.getDiagnostics`), once
// they have caught up with each file's text.
//
// A file that is not open is opened (`openTextDocument`: not shown), so its language servers see
// it. The answer waits, for each file, until a diagnostics change for it (`onDidChangeDiagnostics`)
// came after its last text change (`onDidChangeTextDocument`), then for a quiet moment (QUIET_MS
// without another change: servers report in several passes). Text changes and diagnostics are
// followed from the tracker's start; a document whose text has not changed since has current
// diagnostics.
//
// VS Code says nothing when a server finds a file as clean as it was, so silence has to end the
// wait: for a language some extension already reported on, half the time the server gave after
// the file's last change (or its opening); for a language that an installed extension with code
// activates on (`onLanguage:<id>`, or contributes) but nobody reported on yet, the whole time, once
// (its server may be starting, as TypeScript's does on the first file; a language still silent
// after that is taken to have none); for any other language, FIRST_MS from the file's opening.
// Whatever happens, the answer goes out before `timeoutMs` with what there is by then, or as soon
// as the server cancels.

import * as path from 'node:path';
import * as vscode from 'vscode';

import type { CancellationToken } from './client';
import type { DiagnosticItem, DiagnosticSeverity, GetDiagnosticsParams, GetDiagnosticsResult } from './protocol';

export interface DiagnosticsTiming {
  /** No diagnostics change for this long after one: the servers are done (ms). */
  quietMs: number;
  /** A language no server reports on: how long an opened document waits for a first report. */
  firstMs: number;
  /** How often waiting answers check the clock (ms). */
  pollMs: number;
  /** Answer this long before the server's timeoutMs, so the reply arrives in time. */
  marginMs: number;
}

export const TIMING: DiagnosticsTiming = { quietMs: 300, firstMs: 1000, pollMs: 50, marginMs: 150 };

const SEVERITIES: Record<number, DiagnosticSeverity> = { 0: 'error', 1: 'warning', 2: 'information', 3: 'hint' };

interface Followed {
  /** The order of its last text change (and when), and of its last diagnostics change (and when). */
  text?: number;
  textAt?: number;
  published?: number;
  publishedAt?: number;
  /** When it was first seen open (0: open before the tracker started). */
  since: number;
}

/** One diagnostic as the protocol carries it (1-based lines and columns). */
export function toItem(d: vscode.Diagnostic): DiagnosticItem {
  const item: DiagnosticItem = {
    line: d.range.start.line + 1,
    column: d.range.start.character + 1,
    endLine: d.range.end.line + 1,
    endColumn: d.range.end.character + 1,
    severity: SEVERITIES[d.severity] ?? 'error',
    message: d.message,
  };
  if (d.source) {
    item.source = d.source;
  }
  const code = typeof d.code === 'object' && d.code !== null ? d.code.value : d.code;
  if (typeof code === 'string' || typeof code === 'number') {
    item.code = code;
  }
  return item;
}

/** The open document of `file` (on disk, or a new one not saved yet), if any. */
function openDocument(file: string): vscode.TextDocument | undefined {
  const wanted = path.resolve(file);
  return vscode.workspace.textDocuments.find(
    (doc) => (doc.uri.scheme === 'file' || doc.uri.scheme === 'untitled') && path.resolve(doc.uri.fsPath) === wanted,
  );
}

/** Whether an installed extension with code activates on documents of `languageId` (declared, or
 * implied by contributing the language): it may well run a language server for them. */
function activatesOn(languageId: string): boolean {
  const event = `onLanguage:${languageId}`;
  return vscode.extensions.all.some((extension) => {
    const manifest = extension.packageJSON as {
      main?: string; browser?: string; activationEvents?: unknown; contributes?: { languages?: unknown };
    } | undefined;
    if (!manifest?.main && !manifest?.browser) {
      return false; // grammars and snippets only
    }
    const events = Array.isArray(manifest.activationEvents) ? manifest.activationEvents : [];
    const languages = Array.isArray(manifest.contributes?.languages) ? manifest.contributes.languages : [];
    return events.includes(event) || languages.some((language: { id?: unknown }) => language?.id === languageId);
  });
}

/** Follows text and diagnostics changes from its creation; `get` answers client/getDiagnostics. */
export class DiagnosticsTracker implements vscode.Disposable {
  private seq = 0;
  private readonly followed = new Map<string, Followed>();
  /** The languages some extension has reported diagnostics on. */
  private readonly reported = new Set<string>();
  /** The languages an extension activates on that stayed silent for a whole answer's time. */
  private readonly silent = new Set<string>();
  /** Whether an extension activates on each language asked about (`activatesOn`, once each:
   * `settled` asks on every poll). */
  private readonly served = new Map<string, boolean>();
  private readonly changed = new vscode.EventEmitter<void>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly timing: DiagnosticsTiming = TIMING,
    private readonly now: () => number = Date.now,
  ) {
    for (const doc of vscode.workspace.textDocuments) {
      this.followed.set(doc.uri.toString(), { since: 0 });
    }
    this.subscriptions = [
      vscode.languages.onDidChangeDiagnostics((event) => {
        for (const uri of event.uris) {
          const entry = this.entry(uri.toString());
          entry.published = ++this.seq;
          entry.publishedAt = this.now();
          const language = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString())?.languageId;
          if (language) {
            this.reported.add(language);
          }
        }
        this.changed.fire();
      }),
      vscode.workspace.onDidChangeTextDocument((event) => {
        if (event.contentChanges.length > 0) {
          const entry = this.entry(event.document.uri.toString());
          entry.text = ++this.seq;
          entry.textAt = this.now();
        }
      }),
      vscode.workspace.onDidOpenTextDocument((doc) => {
        this.entry(doc.uri.toString());
      }),
      this.changed,
    ];
  }

  private entry(key: string): Followed {
    let entry = this.followed.get(key);
    if (!entry) {
      entry = { since: this.now() };
      this.followed.set(key, entry);
    }
    return entry;
  }

  /** Whether the diagnostics of `doc` can be answered now; `silentMs`: see the file's comment. */
  private settled(doc: vscode.TextDocument, silentMs: number): boolean {
    const entry = this.entry(doc.uri.toString());
    const now = this.now();
    if (entry.published !== undefined && entry.published > (entry.text ?? 0)) {
      return now - (entry.publishedAt ?? 0) >= this.timing.quietMs;
    }
    if (entry.text === undefined && entry.since === 0) {
      return true; // open before we followed it and unchanged since: what it has is current
    }
    if (this.reported.has(doc.languageId)) {
      // its server reports, unless the file is as clean as it was
      return now - (entry.textAt ?? entry.since) >= silentMs;
    }
    if (!this.silent.has(doc.languageId) && this.hasServer(doc.languageId)) {
      return false; // its server may still be starting
    }
    return now - entry.since >= this.timing.firstMs;
  }

  private hasServer(languageId: string): boolean {
    let served = this.served.get(languageId);
    if (served === undefined) {
      served = activatesOn(languageId);
      this.served.set(languageId, served);
    }
    return served;
  }

  /** Resolves at the next diagnostics change, or after `ms`. */
  private nextChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, Math.max(ms, 0));
      const listener = this.changed.event(done);
      function done(): void {
        clearTimeout(timer);
        listener.dispose();
        resolve();
      }
    });
  }

  async get(params: GetDiagnosticsParams, token: CancellationToken): Promise<GetDiagnosticsResult> {
    const budget = Math.max(0, params.timeoutMs - this.timing.marginMs);
    const deadline = this.now() + budget;
    const docs: Array<vscode.TextDocument | undefined> = [];
    for (const file of params.paths) {
      let doc = openDocument(file);
      if (!doc) {
        try {
          doc = await vscode.workspace.openTextDocument(vscode.Uri.file(file));
        } catch {
          doc = undefined; // it does not exist (any more): no diagnostics
        }
      }
      if (doc) {
        this.entry(doc.uri.toString());
      }
      docs.push(doc);
    }
    while (!token.isCancellationRequested && this.now() < deadline) {
      if (docs.every((doc) => doc === undefined || this.settled(doc, budget / 2))) {
        break;
      }
      await this.nextChange(Math.min(this.timing.pollMs, deadline - this.now()));
    }
    if (!token.isCancellationRequested) {
      for (const doc of docs) {
        if (doc && !this.reported.has(doc.languageId) && this.now() >= deadline) {
          this.silent.add(doc.languageId);
        }
      }
    }
    return {
      files: params.paths.map((file, index) => {
        const doc = docs[index];
        return { path: file, diagnostics: doc ? vscode.languages.getDiagnostics(doc.uri).map(toItem) : [] };
      }),
    };
  }

  dispose(): void {
    for (const subscription of this.subscriptions) {
      subscription.dispose();
    }
  }
}
