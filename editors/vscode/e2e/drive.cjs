// Drives a real VS Code (code-server) in headless Chromium through the Tiller chat view, for
// tests/test_vscode_e2e.py. Usage: node drive.cjs <story.json>
// story.json: {url, chromium, screenshots, steps: {...}} (see the test). Prints one JSON line per
// finished step ({"step": name}); exits 1 with {"error", "step"} on the first failure, after a
// screenshot named after the failed step. Waits are on selectors/conditions, never fixed sleeps.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const puppeteer = require('puppeteer-core');

const story = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const WAIT = { timeout: story.timeoutMs ?? 60000 };
let shot = 0;
let current = 'start';

function report(object) {
  process.stdout.write(`${JSON.stringify(object)}\n`);
}

async function screenshot(page, name) {
  shot += 1;
  const file = path.join(story.screenshots, `${String(shot).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file });
}

/** The chat webview's inner frame (VS Code nests it: webview host > active-frame), or null if
 * it has not appeared within `ms`. */
async function chatFrame(page, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    for (const frame of page.frames()) {
      try {
        if (await frame.$('#transcript')) {
          return frame;
        }
      } catch {
        // a frame navigating away
      }
    }
    await page.waitForNetworkIdle({ idleTime: 100, timeout: 2000 }).catch(() => undefined);
  }
  return null;
}

/** Show the Tiller view and return its frame. Clicking the item of a view already shown would
 * hide it, and after a reload the workbench restores the view on its own, possibly just after
 * we looked: so the item's state is checked again until the frame is there. An item that says
 * its view is shown while no frame comes within 10 s is clicked anyway (hidden, then shown
 * again on the next round): twice, under load, the view restored by a reload never drew. */
async function openChat(page) {
  const deadline = Date.now() + WAIT.timeout;
  let stuck = false;
  while (Date.now() < deadline) {
    await page.waitForFunction(
      (force) => {
        const label = document.querySelector('.activitybar [aria-label^="Tiller"]');
        if (!label) {
          return false;
        }
        const item = label.closest('.action-item');
        if (force || !item?.classList.contains('checked')) {
          label.click();
        }
        return true;
      },
      WAIT,
      stuck,
    );
    const frame = await chatFrame(page, 10000);
    if (frame) {
      return frame;
    }
    stuck = !stuck; // after a forced click (the view hidden), the next round shows it again
  }
  throw new Error('the Tiller chat view never appeared');
}

/**
 * Click `selector` in `target` (page or frame) as soon as it exists, in one step inside the
 * page: VS Code re-renders toolbars and the view re-renders cards, so a handle taken first
 * may be detached by the time it is clicked.
 */
async function clickWhen(target, selector) {
  await target.waitForFunction(
    (wanted) => {
      const node = document.querySelector(wanted);
      if (!node || node.disabled) {
        return false;
      }
      node.click();
      return true;
    },
    WAIT,
    selector,
  );
}

/** Type `text` into the chat input and press Enter. */
async function send(frame, text) {
  const input = await frame.waitForSelector('#input', WAIT);
  await input.click();
  await input.type(text);
  await input.press('Enter');
}

/** Wait until the transcript's text contains `text`. */
async function seen(frame, text) {
  await frame.waitForFunction(
    (wanted) => document.getElementById('transcript')?.textContent?.includes(wanted),
    WAIT,
    text,
  );
}

async function idle(frame) {
  await frame.waitForFunction(() => !document.body.classList.contains('running'), WAIT);
}

/** Wait for the approval card whose title contains `title`; return its element id. */
async function approvalCard(frame, title) {
  const handle = await frame.waitForFunction(
    (wanted) =>
      [...document.querySelectorAll('#approvals .approval')].find((card) =>
        card.querySelector('.title')?.textContent?.includes(wanted),
      )?.id,
    WAIT,
    title,
  );
  return handle.jsonValue();
}

async function gone(frame, id) {
  await frame.waitForFunction((wanted) => !document.getElementById(wanted), WAIT, id);
}

/** The editor tabs' labels. */
function tabLabels(page) {
  return page.$$eval('.tabs-container .tab', (tabs) => tabs.map((tab) => tab.getAttribute('aria-label') ?? ''));
}

async function noTab(page, part) {
  await page.waitForFunction(
    (wanted) => ![...document.querySelectorAll('.tabs-container .tab')].some((tab) =>
      (tab.getAttribute('aria-label') ?? '').includes(wanted),
    ),
    WAIT,
    part,
  );
}

const steps = {
  /** A prompt streams a Markdown reply into the view. */
  async stream(page, frame, step) {
    await send(frame, step.prompt);
    await seen(frame, step.prompt);
    await seen(frame, step.reply);
    await idle(frame);
    // The status bar says Tiller is idle, with the model and the tokens used.
    await page.waitForFunction(
      (model) => [...document.querySelectorAll('.statusbar-item')].some((item) => {
        const text = item.textContent ?? '';
        return text.includes('Tiller: idle') && text.includes(model) && text.includes('tok');
      }),
      WAIT,
      step.model,
    );
    const bold = await frame.$eval('#transcript', (node) => node.querySelector('strong')?.textContent ?? '');
    if (bold !== step.bold) {
      throw new Error(`expected **${step.bold}** rendered bold, got ${JSON.stringify(bold)}`);
    }
  },

  /**
   * A file change waits in a chat card and in the diff editor (no modal): it is allowed with
   * the diff editor's title bar action; the card and the diff tab close. The command that
   * follows is allowed in its chat card, whose "always" says what it covers.
   */
  async review(page, frame, step) {
    await send(frame, step.prompt);
    const fileCard = await approvalCard(frame, step.file);
    await page.waitForFunction(
      (wanted) => [...document.querySelectorAll('.tabs-container .tab')].some((tab) =>
        (tab.getAttribute('aria-label') ?? '').includes(wanted)),
      WAIT,
      'proposed',
    );
    if (await page.$('.monaco-dialog-box')) {
      throw new Error('a modal dialog is open');
    }
    await screenshot(page, 'review-diff');
    await clickWhen(page, '.editor-actions .action-label[aria-label^="Allow"]');
    await gone(frame, fileCard);
    await noTab(page, 'proposed');
    const commandCard = await approvalCard(frame, step.command);
    const always = await frame.$eval(`#${commandCard} .always`, (node) => node.textContent ?? '');
    if (!always.includes('exact command')) {
      throw new Error(`"always" does not say what it covers: ${always}`);
    }
    await screenshot(page, 'review-command');
    await clickWhen(frame, `#${commandCard} button[data-option="allowOnce"]`);
    await gone(frame, commandCard);
    await seen(frame, step.reply);
    await idle(frame);
    // The write's card keeps the approved change, collapsed.
    const kept = await frame.$$eval('details.tool details.diff:not([hidden])', (nodes) =>
      nodes.map((n) => ({ open: n.open, text: n.querySelector('pre')?.textContent ?? '' })));
    if (!kept.some((d) => !d.open && d.text.includes(`+${step.output}`))) {
      throw new Error(`the approved diff is not in the card: ${JSON.stringify(kept)}`);
    }
    // The command's card shows what it printed: the file as saved on disk.
    const output = await frame.$$eval('details.tool .output', (nodes) => nodes.map((n) => n.textContent ?? ''));
    if (!output.some((text) => text.includes(step.output))) {
      throw new Error(`no card shows ${JSON.stringify(step.output)}: ${JSON.stringify(output)}`);
    }
    const dirty = await page.$$eval('.tabs-container .tab.dirty', (tabs) => tabs.map((t) => t.getAttribute('aria-label')));
    if (dirty.length > 0) {
      throw new Error(`unsaved editors left behind: ${dirty}`);
    }
    const labels = await tabLabels(page);
    if (labels.some((label) => label.includes('proposed'))) {
      throw new Error(`a diff tab stayed open: ${labels}`);
    }
  },

  /** Stop while a command waits for approval: Tiller withdraws the request; its card goes. */
  async withdraw(page, frame, step) {
    await send(frame, step.prompt);
    const card = await approvalCard(frame, step.command);
    await screenshot(page, 'withdraw-waiting');
    await clickWhen(frame, '#stop');
    await gone(frame, card);
    await seen(frame, 'Stopped.');
    await idle(frame);
  },

  /** The notice of a stopped run offers Continue (agent/continue): the model is asked again. */
  async continue(page, frame, step) {
    await clickWhen(frame, '.notice button.continue');
    await seen(frame, step.reply);
    await idle(frame);
  },

  /** A changed setting restarts Tiller in the same conversation (its history stays). */
  async settings(page, frame, step) {
    fs.mkdirSync(path.dirname(step.file), { recursive: true });
    fs.writeFileSync(step.file, JSON.stringify(step.change, null, 2));
    await seen(frame, 'Settings changed');
    await send(frame, step.prompt);
    await seen(frame, step.reply);
    await idle(frame);
    for (const text of step.texts) {
      await seen(frame, text);
    }
  },

  /** An `@path` mention sends the file along; the message shows its name, not its content. */
  async mention(page, frame, step) {
    await send(frame, step.prompt);
    await seen(frame, step.reply);
    await seen(frame, `Attached: ${step.file}`);
    await idle(frame);
  },

  /** A run's changed files are listed at its end; Undo puts them back (session/revert). */
  async undo(page, frame, step) {
    await send(frame, step.prompt);
    const card = await approvalCard(frame, step.file);
    await clickWhen(frame, `#${card} button[data-option="allowOnce"]`);
    await seen(frame, step.reply);
    await idle(frame);
    await frame.waitForFunction(
      (file) => [...document.querySelectorAll('.changes')].at(-1)?.textContent?.includes(file),
      WAIT,
      step.file,
    );
    await screenshot(page, 'undo-changes');
    await clickWhen(frame, '.changes:last-of-type button.undo');
    await seen(frame, `Undone: ${step.file}`);
  },

  /**
   * A TypeScript file with an error is opened (quick open), so the built-in TypeScript server
   * reports on it; the agent then edits it into a second error. The server asks the extension
   * for the file's diagnostics before and after the edit (client/getDiagnostics); the pytest
   * side checks that the model was told the new error only.
   */
  async diagnostics(page, frame, step) {
    await page.click('.monaco-workbench .part.editor');
    await page.keyboard.down('Control');
    await page.keyboard.press('KeyP');
    await page.keyboard.up('Control');
    await page.waitForSelector('.quick-input-widget input', WAIT);
    await page.keyboard.type(step.file);
    await page.waitForFunction(
      (file) => [...document.querySelectorAll('.quick-input-widget .monaco-list-row')].some((row) =>
        (row.getAttribute('aria-label') ?? row.textContent ?? '').includes(file)),
      WAIT,
      step.file,
    );
    await page.keyboard.press('Enter');
    // The TypeScript server has reported the file's error: the editor underlines it.
    await page.waitForSelector('.monaco-editor .squiggly-error', WAIT);
    await screenshot(page, 'diagnostics-before');
    const again = await openChat(page);
    await send(again, step.prompt);
    const card = await approvalCard(again, step.file);
    await clickWhen(again, `#${card} button[data-option="allowOnce"]`);
    await seen(again, step.reply);
    await idle(again);
    return again;
  },

  /** An attached image shows as a thumbnail and goes with the prompt as an image block. */
  async image(page, frame, step) {
    const file = await frame.waitForSelector('#attach-file', WAIT);
    await file.uploadFile(step.png);
    await frame.waitForSelector('#attachments .attachment img', WAIT);
    await screenshot(page, 'image-attached');
    await send(frame, step.prompt);
    await seen(frame, step.reply);
    await idle(frame);
    if (await frame.$('#attachments .attachment')) {
      throw new Error('the attachment stayed after sending');
    }
  },

  /**
   * New Chat (the view's + action) empties the chat; the history action lists the workspace's
   * conversations (session/list) and picking one draws it again (session/load).
   */
  async history(page, frame, step) {
    await clickWhen(page, '.pane-header .action-label[aria-label^="New Chat"]');
    await frame.waitForFunction(() => document.getElementById('transcript')?.childElementCount === 0, WAIT);
    await clickWhen(page, '.pane-header .action-label[aria-label^="Open a Conversation"]');
    await page.waitForFunction(
      (title) => [...document.querySelectorAll('.quick-input-widget .monaco-list-row')].some((row) =>
        (row.getAttribute('aria-label') ?? row.textContent ?? '').includes(title)),
      WAIT,
      step.title,
    );
    await screenshot(page, 'history-pick');
    await page.waitForFunction(
      (title) => {
        const row = [...document.querySelectorAll('.quick-input-widget .monaco-list-row')].find((r) =>
          (r.getAttribute('aria-label') ?? r.textContent ?? '').includes(title));
        row?.click();
        return row !== undefined;
      },
      WAIT,
      step.title,
    );
    for (const text of step.texts) {
      await seen(frame, text);
    }
  },

  /** A window reload resumes the same session: the history is drawn again, tool cards and
   * changed files too. */
  async reload(page, frame, step) {
    await page.reload({ waitUntil: 'domcontentloaded' });
    await page.waitForSelector('.monaco-workbench', WAIT);
    const again = await openChat(page);
    for (const text of step.texts) {
      await seen(again, text);
    }
    await again.waitForFunction(
      (command) => [...document.querySelectorAll('details.tool.done .summary')].some((n) => n.textContent === command),
      WAIT,
      step.command,
    );
    // The run that wrote a file ends with its changed files and Undo again.
    await again.waitForFunction(
      (file) => [...document.querySelectorAll('.changes')].some((n) => n.textContent?.includes(file)),
      WAIT,
      step.changed,
    );
    return again;
  },
};

async function main() {
  const browser = await puppeteer.launch({
    executablePath: story.chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--window-size=1400,900'],
    defaultViewport: { width: 1400, height: 900 },
  });
  let page;
  try {
    page = await browser.newPage();
    current = 'load';
    await page.goto(story.url, { waitUntil: 'domcontentloaded', timeout: WAIT.timeout });
    await page.waitForSelector('.monaco-workbench', WAIT);
    current = 'open';
    let frame = await openChat(page);
    await screenshot(page, 'opened');
    report({ step: 'open' });
    for (const [index, step] of story.steps.entries()) {
      current = step.name;
      const run = steps[step.kind];
      if (!run) {
        throw new Error(`unknown step kind ${step.kind}`);
      }
      const next = await run(page, frame, step);
      frame = next ?? frame;
      await screenshot(page, step.name);
      report({ step: step.name, index });
    }
  } catch (error) {
    if (page) {
      await screenshot(page, `failed-${current}`).catch(() => undefined);
    }
    report({ error: String(error?.stack ?? error), step: current });
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

void main();
