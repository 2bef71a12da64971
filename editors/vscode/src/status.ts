// The status bar item (its words come from statusText.ts); a click opens the chat.

import * as vscode from 'vscode';

import { statusText, type Activity } from './statusText';

export type { Activity } from './statusText';

export class StatusItem implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  private activity: Activity = 'idle';
  private state: Parameters<typeof statusText>[1];

  constructor() {
    this.item.name = 'Tiller';
    this.item.command = 'tiller.chat.focus';
    this.render();
    this.item.show();
  }

  setActivity(activity: Activity): void {
    this.activity = activity;
    this.render();
  }

  setState(state: Parameters<typeof statusText>[1]): void {
    this.state = state;
    this.render();
  }

  dispose(): void {
    this.item.dispose();
  }

  private render(): void {
    const { text, tooltip } = statusText(this.activity, this.state);
    this.item.text = text;
    this.item.tooltip = tooltip;
  }
}
