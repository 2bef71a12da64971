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

/** The chat webview's inner frame (VS Code nests it: webview host > active-frame). */
async function chatFrame(page) {
  const deadline = Date.now() + WAIT.timeout;
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
  throw new Error('the Tiller chat view never appeared');
}

async function openChat(page) {
  const item = await page.waitForSelector('.activitybar [aria-label^="Tiller"]', WAIT);
  await item.click();
  return chatFrame(page);
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

const steps = {
  /** A prompt streams a Markdown reply into the view. */
  async stream(page, frame, step) {
    await send(frame, step.prompt);
    await seen(frame, step.prompt);
    await seen(frame, step.reply);
    await idle(frame);
    const bold = await frame.$eval('#transcript', (node) => node.querySelector('strong')?.textContent ?? '');
    if (bold !== step.bold) {
      throw new Error(`expected **${step.bold}** rendered bold, got ${JSON.stringify(bold)}`);
    }
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
