// @ts-check
// The chat webview's script: applies the ChatOps the extension posts (see src/chatModel.ts) to
// the DOM and posts the user's input back. Every `html` field arrives escaped by the extension's
// Markdown renderer; everything else is set with textContent.
(function () {
  /** @type {{postMessage(message: unknown): void}} */
  // @ts-ignore acquireVsCodeApi is injected by VS Code
  const vscode = acquireVsCodeApi();

  const transcript = /** @type {HTMLElement} */ (document.getElementById('transcript'));
  const pending = /** @type {HTMLElement} */ (document.getElementById('pending'));
  const form = /** @type {HTMLFormElement} */ (document.getElementById('composer'));
  const input = /** @type {HTMLTextAreaElement} */ (document.getElementById('input'));
  const send = /** @type {HTMLButtonElement} */ (document.getElementById('send'));
  const steer = /** @type {HTMLButtonElement} */ (document.getElementById('steer'));
  const followUp = /** @type {HTMLButtonElement} */ (document.getElementById('followUp'));
  const stop = /** @type {HTMLButtonElement} */ (document.getElementById('stop'));
  const approvals = /** @type {HTMLElement} */ (document.getElementById('approvals'));
  const attachments = /** @type {HTMLElement} */ (document.getElementById('attachments'));
  const attach = /** @type {HTMLButtonElement} */ (document.getElementById('attach'));
  const attachFile = /** @type {HTMLInputElement} */ (document.getElementById('attach-file'));

  /** Images pasted or attached for the next message. @type {Array<{mimeType: string, data: string}>} */
  let images = [];

  function renderAttachments() {
    attachments.textContent = '';
    images.forEach((image, index) => {
      const chip = document.createElement('span');
      chip.className = 'attachment';
      const img = document.createElement('img');
      img.src = `data:${image.mimeType};base64,${image.data}`;
      img.alt = 'attached image';
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.className = 'secondary';
      remove.textContent = '×';
      remove.title = 'Remove this image';
      remove.addEventListener('click', () => {
        images.splice(index, 1);
        renderAttachments();
      });
      chip.append(img, remove);
      attachments.appendChild(chip);
    });
  }

  /** @param {Blob} file */
  function addImage(file) {
    if (!file.type.startsWith('image/')) {
      return;
    }
    const reader = new FileReader();
    reader.addEventListener('load', () => {
      const url = String(reader.result);
      images.push({ mimeType: file.type, data: url.slice(url.indexOf(',') + 1) });
      renderAttachments();
    });
    reader.readAsDataURL(file);
  }

  attach.addEventListener('click', () => attachFile.click());
  attachFile.addEventListener('change', () => {
    for (const file of attachFile.files ?? []) {
      addImage(file);
    }
    attachFile.value = '';
  });
  input.addEventListener('paste', (event) => {
    for (const item of event.clipboardData?.items ?? []) {
      const file = item.kind === 'file' ? item.getAsFile() : null;
      if (file && file.type.startsWith('image/')) {
        event.preventDefault();
        addImage(file);
      }
    }
  });

  let running = false;

  /** @param {boolean} value */
  function setRunning(value) {
    running = value;
    document.body.classList.toggle('running', value);
    send.disabled = value;
    steer.disabled = !value;
    followUp.disabled = !value;
    stop.disabled = !value;
  }

  /** @param {'prompt' | 'steer' | 'followUp'} kind */
  function submit(kind) {
    const text = input.value.trim();
    if (!text) {
      return;
    }
    vscode.postMessage(images.length > 0 ? { type: 'submit', kind, text, images } : { type: 'submit', kind, text });
    input.value = '';
    images = [];
    renderAttachments();
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit(running ? 'steer' : 'prompt');
  });
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit(running ? 'steer' : 'prompt');
    }
  });
  steer.addEventListener('click', () => submit('steer'));
  followUp.addEventListener('click', () => submit('followUp'));
  stop.addEventListener('click', () => vscode.postMessage({ type: 'abort' }));

  /** Keep the view pinned to the bottom unless the user scrolled up. */
  function atBottom() {
    const root = document.scrollingElement || document.documentElement;
    return root.scrollHeight - root.scrollTop - root.clientHeight < 40;
  }
  // Decided by the user's scrolling only: expanding a card grows the page without a scroll, and
  // must not unpin the view (it used to stop following a running card's output).
  let pinned = true;
  window.addEventListener('scroll', () => {
    pinned = atBottom();
  });

  /**
   * @param {string} id
   * @param {string} tag
   * @param {string} className
   * @returns {HTMLElement}
   */
  function element(id, tag, className) {
    let node = document.getElementById(`op-${id}`);
    if (!node) {
      node = document.createElement(tag);
      node.id = `op-${id}`;
      node.className = className;
      transcript.appendChild(node);
    }
    return node;
  }

  /** @param {any} op */
  function toolCard(op) {
    const card = /** @type {HTMLDetailsElement} */ (element(op.id, 'details', 'tool'));
    if (!card.firstChild) {
      card.innerHTML =
        '<summary><span class="name"></span> <span class="summary"></span>' +
        '<span class="status"></span></summary><pre class="args"></pre>' +
        '<details class="diff" hidden><summary>Approved change</summary><pre></pre></details>' +
        '<pre class="output"></pre>';
    }
    card.className = `tool ${op.status}`;
    if (op.kind) {
      card.dataset.kind = String(op.kind);
    }
    /** @param {string} selector @param {string} text */
    const set = (selector, text) => {
      const node = card.querySelector(selector);
      if (node) {
        node.textContent = text;
      }
    };
    set('.name', op.title);
    const name = card.querySelector('.name');
    if (name instanceof HTMLElement) {
      name.title = String(op.name); // the tool's name, on hover
    }
    set('.summary', op.summary);
    /** @type {Record<string, string>} */
    const labels = {
      streaming: '…',
      waiting: 'waiting for approval',
      running: 'running',
      done: 'done',
      error: 'error',
    };
    set('.status', labels[String(op.status)] || String(op.status));
    set('.args', op.args);
    set('.output', op.output);
    const diff = /** @type {HTMLDetailsElement | null} */ (card.querySelector('details.diff'));
    if (diff && typeof op.diff === 'string') {
      diff.hidden = false;
      set('details.diff pre', op.diff);
    }
    if (op.status === 'error') {
      card.open = true;
    }
    if (op.child) {
      childCard(card, op.child);
    }
  }

  /**
   * A `task` call's subagent: a collapsible card inside the call's card, its tool calls (each
   * with a mark) and what it said last. Open while the subagent works.
   * @param {HTMLDetailsElement} card @param {any} child
   */
  function childCard(card, child) {
    let node = /** @type {HTMLDetailsElement | null} */ (card.querySelector('details.child'));
    if (!node) {
      node = document.createElement('details');
      node.className = 'child';
      node.open = true;
      node.innerHTML = '<summary></summary><ul class="child-calls"></ul><div class="child-text"></div>';
      card.insertBefore(node, card.querySelector('pre.output'));
      card.open = true;
    }
    /** @type {Record<string, string>} */
    const marks = { running: '…', waiting: '?', done: '✓', error: '✗', streaming: '…' };
    const calls = Array.isArray(child.calls) ? child.calls : [];
    const count = `${calls.length} tool call${calls.length === 1 ? '' : 's'}`;
    const ended = child.ended ? ` · ${String(child.ended)}` : ' · working';
    const summary = node.querySelector('summary');
    if (summary) {
      summary.textContent = `${String(child.agent)} · ${count}${ended}`;
    }
    const list = node.querySelector('ul.child-calls');
    if (list) {
      list.textContent = '';
      for (const call of calls) {
        const item = document.createElement('li');
        item.className = `child-call ${String(call.status)}`;
        item.textContent = `${marks[String(call.status)] || ''} ${String(call.title)}`;
        list.appendChild(item);
      }
    }
    const text = node.querySelector('div.child-text');
    if (text) {
      text.textContent = String(child.text || '');
    }
    if (child.ended && child.ended !== 'stop' && child.ended !== 'toolUse') {
      node.classList.add('failed');
    }
  }

  /**
   * The permission requests waiting for an answer: one card each, first one first. A button
   * answers once; the card goes when the extension posts the next list.
   * @param {any[]} items
   */
  function renderApprovals(items) {
    approvals.textContent = '';
    for (const item of items) {
      const card = document.createElement('div');
      card.className = 'approval';
      card.id = item.key;
      card.dataset.toolCallId = String(item.toolCallId);
      const title = document.createElement('div');
      title.className = 'title';
      title.textContent = String(item.title);
      card.appendChild(title);
      if (item.detail) {
        const detail = document.createElement('pre');
        detail.className = 'detail';
        detail.textContent = String(item.detail);
        card.appendChild(detail);
      }
      const row = document.createElement('div');
      row.className = 'buttons';
      for (const button of item.buttons) {
        const node = document.createElement('button');
        node.type = 'button';
        node.dataset.option = String(button.option);
        node.textContent = String(button.label);
        if (button.option === 'allowAlways') {
          node.title = String(item.always);
        }
        if (button.option === 'rejectOnce') {
          node.className = 'secondary';
        }
        node.addEventListener('click', () => {
          for (const other of row.querySelectorAll('button')) {
            other.disabled = true;
          }
          vscode.postMessage({ type: 'approve', key: item.key, option: button.option });
        });
        row.appendChild(node);
      }
      card.appendChild(row);
      if (item.buttons.some((/** @type {any} */ b) => b.option === 'allowAlways')) {
        const note = document.createElement('div');
        note.className = 'always';
        note.textContent = String(item.always);
        card.appendChild(note);
      }
      approvals.appendChild(card);
    }
  }

  /**
   * Copy and Insert buttons on each code block of an assistant message (Insert puts the code at
   * the cursor of the active editor).
   * @param {HTMLElement} node
   */
  function codeTools(node) {
    for (const pre of node.querySelectorAll('pre')) {
      const bar = document.createElement('div');
      bar.className = 'code-tools';
      for (const [label, type] of [['Copy', 'copy'], ['Insert', 'insert']]) {
        const button = document.createElement('button');
        button.type = 'button';
        button.className = `secondary ${type}`;
        button.textContent = label;
        button.addEventListener('click', () => vscode.postMessage({ type, text: pre.textContent ?? '' }));
        bar.appendChild(button);
      }
      pre.before(bar);
    }
  }

  /** @param {any} op */
  function apply(op) {
    switch (op.op) {
      case 'clear':
        transcript.textContent = '';
        pending.textContent = '';
        approvals.textContent = '';
        break;
      case 'user':
        element(op.id, 'div', 'message user').innerHTML = op.html;
        break;
      case 'block':
        if (op.kind === 'thinking') {
          const box = /** @type {HTMLDetailsElement} */ (element(op.id, 'details', 'thinking'));
          box.innerHTML = `<summary>Thinking</summary>${op.html}`;
        } else {
          const node = element(op.id, 'div', 'message assistant');
          node.innerHTML = op.html;
          codeTools(node);
        }
        break;
      case 'tool':
        toolCard(op);
        break;
      case 'discard':
        for (const id of op.ids) {
          document.getElementById(`op-${id}`)?.remove();
        }
        break;
      case 'notice': {
        const node = document.createElement('div');
        node.className = `notice ${op.level}`;
        node.textContent = op.text;
        if (op.action === 'continue') {
          const button = document.createElement('button');
          button.type = 'button';
          button.className = 'continue secondary';
          button.textContent = op.level === 'error' ? 'Retry' : 'Continue';
          button.title = 'Resume from where the run ended (agent/continue)';
          button.addEventListener('click', () => vscode.postMessage({ type: 'continue' }));
          node.append(' ', button);
        }
        transcript.appendChild(node);
        break;
      }
      case 'state':
        setRunning(op.running);
        if (op.running) {
          // Retry/Continue belong to the run that ended; a new run makes them stale.
          for (const button of transcript.querySelectorAll('.notice button.continue')) {
            button.remove();
          }
        }
        break;
      case 'changes': {
        // The files the run changed: each opens on click; Undo puts them back (session/revert).
        const box = element(op.id, 'div', 'changes');
        box.textContent = '';
        const title = document.createElement('span');
        title.textContent = 'Changed: ';
        box.appendChild(title);
        for (const file of op.files) {
          const link = document.createElement('a');
          link.href = '#';
          link.className = 'file';
          link.textContent = String(file);
          link.addEventListener('click', (event) => {
            event.preventDefault();
            vscode.postMessage({ type: 'open', path: String(file) });
          });
          box.append(link, ' ');
        }
        const undo = document.createElement('button');
        undo.type = 'button';
        undo.className = 'secondary undo';
        undo.textContent = 'Undo these changes';
        undo.addEventListener('click', () => {
          undo.disabled = true;
          vscode.postMessage({ type: 'revert', entryId: String(op.entryId) });
        });
        box.appendChild(undo);
        break;
      }
      case 'input':
        // "Add selection to Tiller": appended to what is being typed.
        input.value = input.value ? `${input.value.replace(/\s*$/, '')}\n\n${op.text}` : op.text;
        input.focus();
        break;
      case 'draft':
        // A send failed: give the text back unless something new was typed meanwhile.
        if (!input.value.trim()) {
          input.value = op.text;
        }
        break;
      case 'approvals':
        renderApprovals(op.items);
        break;
      case 'pending':
        pending.textContent = '';
        for (const item of op.items) {
          const li = document.createElement('li');
          li.textContent = `${item.kind === 'steer' ? 'Steer' : 'Follow-up'}: ${item.text}`;
          pending.appendChild(li);
        }
        break;
    }
  }

  window.addEventListener('message', (event) => {
    const message = event.data;
    if (!message || message.type !== 'ops' || !Array.isArray(message.ops)) {
      return;
    }
    for (const op of message.ops) {
      apply(op);
    }
    if (pinned) {
      window.scrollTo(0, document.body.scrollHeight);
    }
  });

  setRunning(false);
  vscode.postMessage({ type: 'ready' });
})();
