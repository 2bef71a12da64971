// A small stand-in for the `vscode` module (VS Code cannot run on these machines): just the API
// the extension uses, recording what it is asked to do, so extension.ts, chatView.ts and
// vscodeHandlers.ts can be driven under Node. `installFakeVscode()` makes `require('vscode')`
// return it.

import Module = require('node:module');
import * as path from 'node:path';

type Listener<T> = (value: T) => unknown;

export class EventEmitter<T> {
  private listeners: Array<Listener<T>> = [];
  readonly event = (listener: Listener<T>): { dispose(): void } => {
    this.listeners.push(listener);
    return { dispose: () => (this.listeners = this.listeners.filter((l) => l !== listener)) };
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      listener(value);
    }
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
    readonly query: string,
  ) {}
  static file(fsPath: string): Uri {
    return new Uri('file', path.resolve(fsPath), '');
  }
  static from(c: { scheme: string; path?: string; query?: string }): Uri {
    return new Uri(c.scheme, c.path ?? '', c.query ?? '');
  }
  static joinPath(base: Uri, ...segments: string[]): Uri {
    return new Uri(base.scheme, path.posix.join(base.path, ...segments), base.query);
  }
  get fsPath(): string {
    return this.path;
  }
  with(change: { scheme?: string; path?: string; query?: string }): Uri {
    return new Uri(change.scheme ?? this.scheme, change.path ?? this.path, change.query ?? this.query);
  }
  toString(): string {
    return `${this.scheme}://${this.path}${this.query ? `?${this.query}` : ''}`;
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  constructor(
    readonly start: Position,
    readonly end: Position,
  ) {}
}

const LANGUAGES: Record<string, string> = { '.ts': 'typescript', '.py': 'python' };

/** A text document: `offset` positions are encoded in `character` of line 0 (enough here). */
export class TextDocument {
  isDirty = false;
  /** From the file name's extension (plaintext when unknown). */
  readonly languageId: string;
  constructor(
    readonly uri: Uri,
    public text: string,
  ) {
    this.languageId = LANGUAGES[path.extname(uri.path)] ?? 'plaintext';
  }
  /** Writes a `file:` document to disk (an untitled one would need a Save As dialog). */
  async save(): Promise<boolean> {
    if (this.uri.scheme !== 'file') {
      return false;
    }
    const fs = await import('node:fs');
    fs.mkdirSync(path.dirname(this.uri.fsPath), { recursive: true });
    fs.writeFileSync(this.uri.fsPath, this.text);
    this.isDirty = false;
    return true;
  }
  getText(): string {
    return this.text;
  }
  positionAt(offset: number): Position {
    return new Position(0, offset);
  }
}

export class WorkspaceEdit {
  readonly edits: Array<{ uri: Uri; range: Range; text: string }> = [];
  readonly created: Uri[] = [];
  replace(uri: Uri, range: Range, text: string): void {
    this.edits.push({ uri, range, text });
  }
  insert(uri: Uri, position: Position, text: string): void {
    this.edits.push({ uri, range: new Range(position, position), text });
  }
  /** Like VS Code: an empty file on disk, opened as a document by the text edits that follow. */
  createFile(uri: Uri): void {
    this.created.push(uri);
  }
}

export class TabInputText {
  constructor(readonly uri: Uri) {}
}

export class TabInputTextDiff {
  constructor(
    readonly original: Uri,
    readonly modified: Uri,
  ) {}
}

export interface Recorded {
  commands: Map<string, (...args: unknown[]) => unknown>;
  /** Each executed command, with the content of any virtual-document URI among its args. */
  executed: Array<{ command: string; args: unknown[]; contents: Array<string | undefined> }>;
  modals: Array<{ message: string; options: { modal?: boolean; detail?: string }; items: string[] }>;
  applied: WorkspaceEdit[];
  /** Open editor tabs: `vscode.diff` opens one, `tabGroups.close` closes it. */
  tabs: Array<{ input: TabInputText | TabInputTextDiff }>;
  statusItems: Array<{ text: string; tooltip: string }>;
  closed: Array<{ input: TabInputText | TabInputTextDiff }>;
  views: Map<string, unknown>;
  contentProviders: Map<string, { provideTextDocumentContent(uri: Uri): string }>;
  output: string[];
  /** Each quick pick shown: its title and items. */
  picks: Array<{ title?: string; items: Array<{ label: string; description?: string; detail?: string }> }>;
  /** Warning messages shown. */
  warnings: string[];
  /** Set a URI's diagnostics as a language server would (fires onDidChangeDiagnostics). */
  setDiagnostics(uri: Uri, diagnostics: FakeDiagnostic[]): void;
  /** Each onDidChangeTextDocument fired (the document's URI). */
  textChanges: string[];
}

/** A diagnostic as `vscode.languages.getDiagnostics` gives it (severity: Error 0 ... Hint 3). */
export interface FakeDiagnostic {
  range: Range;
  message: string;
  severity: number;
  source?: string;
  code?: string | number | { value: string | number; target: Uri };
}

export interface FakeVscodeOptions {
  workspaceFolder: string;
  settings: Record<string, unknown>;
  /** Which button a modal dialog "clicks" (the extension should not show any). */
  answer?: (message: string, items: string[]) => string | undefined;
  /** Which item a quick pick "picks" (default: none, as if dismissed). */
  pick?: (items: Array<{ label: string; description?: string; detail?: string }>) => unknown;
  /** The installed extensions' manifests (`vscode.extensions.all`; default none). */
  extensions?: Array<Record<string, unknown>>;
}

export function createFakeVscode(options: FakeVscodeOptions): { vscode: Record<string, unknown>; recorded: Recorded } {
  const recorded: Recorded = {
    commands: new Map(),
    executed: [],
    modals: [],
    applied: [],
    tabs: [],
    statusItems: [],
    closed: [],
    views: new Map(),
    contentProviders: new Map(),
    output: [],
    picks: [],
    warnings: [],
    setDiagnostics: (uri, list) => {
      diagnostics.set(uri.toString(), list);
      diagnosticsChanged.fire({ uris: [uri] });
    },
    textChanges: [],
  };
  const textDocuments: TextDocument[] = [];
  const diagnostics = new Map<string, FakeDiagnostic[]>();
  const diagnosticsChanged = new EventEmitter<{ uris: Uri[] }>();
  const textChanged = new EventEmitter<{ document: TextDocument; contentChanges: unknown[] }>();
  const opened = new EventEmitter<TextDocument>();
  const disposable = { dispose: () => undefined };
  const vscode = {
    EventEmitter,
    Uri,
    Position,
    Range,
    WorkspaceEdit,
    TabInputText,
    TabInputTextDiff,
    StatusBarAlignment: { Left: 1, Right: 2 },
    window: {
      createStatusBarItem: () => {
        const item = { text: '', tooltip: '', name: '', command: '', show: () => undefined, dispose: () => undefined };
        recorded.statusItems.push(item);
        return item;
      },
      tabGroups: {
        get all() {
          return [{ tabs: [...recorded.tabs] }];
        },
        close: async (tabs: Array<{ input: TabInputText | TabInputTextDiff }>) => {
          recorded.tabs = recorded.tabs.filter((tab) => !tabs.includes(tab));
          recorded.closed.push(...tabs);
          return true;
        },
      },
      createOutputChannel: () => ({
        append: (text: string) => recorded.output.push(text),
        appendLine: (text: string) => recorded.output.push(`${text}\n`),
        dispose: () => undefined,
      }),
      registerWebviewViewProvider: (id: string, provider: unknown) => {
        recorded.views.set(id, provider);
        return disposable;
      },
      showInformationMessage: async (
        message: string,
        modalOptions: { modal?: boolean; detail?: string },
        ...items: string[]
      ) => {
        recorded.modals.push({ message, options: modalOptions, items });
        return options.answer?.(message, items);
      },
      showTextDocument: async () => undefined,
      showInputBox: async () => undefined,
      showQuickPick: async (
        items: Array<{ label: string; description?: string; detail?: string }>,
        pickOptions?: { title?: string },
      ) => {
        recorded.picks.push({ title: pickOptions?.title, items });
        return options.pick?.(items);
      },
      showWarningMessage: async (message: string) => {
        recorded.warnings.push(message);
        return undefined;
      },
    },
    commands: {
      registerCommand: (id: string, run: (...args: unknown[]) => unknown) => {
        recorded.commands.set(id, run);
        return disposable;
      },
      executeCommand: async (command: string, ...args: unknown[]) => {
        const contents = args.map((arg) =>
          arg instanceof Uri ? recorded.contentProviders.get(arg.scheme)?.provideTextDocumentContent(arg) : undefined,
        );
        recorded.executed.push({ command, args, contents });
        if (command === 'vscode.diff') {
          recorded.tabs.push({ input: new TabInputTextDiff(args[0] as Uri, args[1] as Uri) });
        }
        return undefined;
      },
    },
    extensions: {
      all: (options.extensions ?? []).map((packageJSON) => ({ id: String(packageJSON.name), packageJSON, isActive: false })),
    },
    languages: {
      onDidChangeDiagnostics: diagnosticsChanged.event,
      getDiagnostics: (uri: Uri) => diagnostics.get(uri.toString()) ?? [],
    },
    workspace: {
      onDidChangeTextDocument: textChanged.event,
      onDidOpenTextDocument: opened.event,
      workspaceFolders: [{ uri: Uri.file(options.workspaceFolder), name: 'ws', index: 0 }],
      textDocuments,
      getConfiguration: (section: string) => ({
        get: <T>(key: string, fallback?: T): T | undefined =>
          (options.settings[`${section}.${key}`] as T | undefined) ?? fallback,
      }),
      onDidChangeConfiguration: () => disposable,
      registerTextDocumentContentProvider: (
        scheme: string,
        provider: { provideTextDocumentContent(uri: Uri): string },
      ) => {
        recorded.contentProviders.set(scheme, provider);
        return disposable;
      },
      asRelativePath: (p: string) => path.relative(options.workspaceFolder, p),
      openTextDocument: async (uri: Uri) => {
        const fs = await import('node:fs');
        const text = uri.scheme === 'file' ? fs.readFileSync(uri.fsPath, 'utf8') : '';
        const doc = new TextDocument(uri, text);
        textDocuments.push(doc);
        opened.fire(doc);
        return doc;
      },
      applyEdit: async (edit: WorkspaceEdit) => {
        recorded.applied.push(edit);
        const fs = await import('node:fs');
        for (const uri of edit.created) {
          fs.mkdirSync(path.dirname(uri.fsPath), { recursive: true });
          fs.writeFileSync(uri.fsPath, '', { flag: 'a' });
          const created = new TextDocument(uri, fs.readFileSync(uri.fsPath, 'utf8'));
          textDocuments.push(created);
          opened.fire(created);
        }
        for (const change of edit.edits) {
          const doc = textDocuments.find((d) => d.uri.toString() === change.uri.toString());
          if (!doc) {
            return false;
          }
          doc.text = doc.text.slice(0, change.range.start.character) + change.text + doc.text.slice(change.range.end.character);
          doc.isDirty = true;
          recorded.textChanges.push(doc.uri.toString());
          textChanged.fire({ document: doc, contentChanges: [change] });
        }
        return true;
      },
    },
  };
  return { vscode, recorded };
}

/** Make `require('vscode')` return `fake` in this process. */
export function installFakeVscode(fake: Record<string, unknown>): void {
  const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const original = loader._load;
  loader._load = function (request: string, ...rest: unknown[]): unknown {
    return request === 'vscode' ? fake : original.call(this, request, ...rest);
  };
}
