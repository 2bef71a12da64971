-- tiller.review: the server's permission questions (`client/requestPermission`), asked inline in
-- the chat buffer without blocking the editor.
--
-- Each question is appended to the chat in full (a command is never shortened) with the keys
-- that answer it, buffer-local in the chat:
--
--   ? run in /home/me/project:
--       rm -rf build && make
--     a: allow once · A: always allow · r: reject · R: always reject · gd: view
--
-- A key answers the question under the cursor, else the oldest one still open; several open
-- questions queue. `gd` opens the change side by side with the real buffer (or file) in a new
-- tab page, in diff mode. The answer replaces the keys line; a question the server stops
-- waiting for ($/cancelRequest) says so.

local messages = require('tiller.messages')
local chat = require('tiller.chat')

local M = {}

local api = vim.api

M.OPTIONS = { 'allowOnce', 'allowAlways', 'rejectOnce', 'rejectAlways' }
M.KEYS = { allowOnce = 'a', allowAlways = 'A', rejectOnce = 'r', rejectAlways = 'R' }
M.LABELS = {
  allowOnce = 'allow once',
  allowAlways = 'always allow',
  rejectOnce = 'reject',
  rejectAlways = 'always reject',
}
M.ANSWERED = {
  allowOnce = '→ allowed once',
  allowAlways = '→ always allowed',
  rejectOnce = '→ rejected',
  rejectAlways = '→ always rejected',
}

M.config = {
  diff_lines = 40, -- lines of a diff shown inline (gd shows it all)
}

--- Called with (toolCallId, outcome) after each answer (tiller.init points it at the chat).
M.on_answered = function() end

--- Called with each new question (tests and scripts watch it).
M.on_asked = {}

local questions = {} -- every question of this Neovim, oldest first

local cwd = nil

--- The directory relative paths resolve against (the server's cwd).
function M.set_cwd(dir)
  cwd = dir
end

local function indent(lines, prefix)
  local out = {}
  for _, line in ipairs(lines) do
    table.insert(out, prefix .. line)
  end
  return out
end

local function split(text)
  local lines = vim.split(tostring(text), '\n', { plain = true })
  if #lines > 1 and lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- How a command would run, from the preview's `sandbox` (protocol.md, "Sandbox"), or nil.
function M.sandbox_words(sandbox)
  if type(sandbox) ~= 'table' then
    return nil
  end
  local reason = type(sandbox.reason) == 'string' and sandbox.reason or nil
  if sandbox.mode == 'off' then
    local asked = sandbox.escalated and 'asks to run outside the sandbox' or 'unsandboxed'
    return reason and (asked .. ': ' .. reason) or asked
  end
  local network = sandbox.network and 'network' or 'no network'
  local asked = sandbox.escalated and ('; asks for network: ' .. tostring(reason)) or ''
  return string.format('sandboxed (%s, %s%s)', tostring(sandbox.mode), network, asked)
end

--- The lines showing what question `params` asks (without the keys line).
function M.question_lines(params)
  local preview = type(params.preview) == 'table' and params.preview or {}
  local tool = tostring(params.toolName or 'a tool')
  local reason = type(params.reason) == 'string' and params.reason ~= '' and params.reason or nil
  if preview.kind == 'command' and type(preview.command) == 'string' then
    local where = preview.cwd and (' in ' .. tostring(preview.cwd)) or ''
    local lines = { string.format('? %s: run%s:', tool, where) }
    vim.list_extend(lines, indent(split(preview.command), '    '))
    local sandbox = M.sandbox_words(preview.sandbox)
    if sandbox then
      table.insert(lines, '    ' .. sandbox)
    end
    return lines
  elseif preview.kind == 'diff' and type(preview.diff) == 'string' then
    local lines = { string.format('? %s: change %s:', tool, tostring(preview.path)) }
    local diff = split(preview.diff)
    local shown = math.min(#diff, M.config.diff_lines)
    vim.list_extend(lines, indent(vim.list_slice(diff, 1, shown), '    '))
    if shown < #diff then
      table.insert(lines, string.format('    … (%d more lines: gd shows all)', #diff - shown))
    end
    return lines
  elseif preview.kind == 'hooks' and type(preview.commands) == 'table' then
    local lines = { string.format('? trust the hooks in %s:', tostring(preview.file)) }
    if reason then
      vim.list_extend(lines, indent(split(reason), '    '))
    end
    for _, command in ipairs(preview.commands) do
      vim.list_extend(lines, indent(split(tostring(command)), '    $ '))
    end
    return lines
  elseif preview.kind == 'path' then
    local because = reason and (' (' .. reason .. ')') or ''
    return { string.format('? %s: %s%s', tool, tostring(preview.path), because) }
  end
  local lines = { string.format('? allow %s%s', tool, reason and (' (' .. reason .. ')') or '') }
  local ok, json = pcall(vim.json.encode, params.args)
  if ok and json ~= '{}' and json ~= '[]' then
    vim.list_extend(lines, indent(split(json), '    '))
  end
  return lines
end

local function keys_line(q)
  local parts = {}
  for _, option in ipairs(q.options) do
    table.insert(parts, string.format('%s: %s', M.KEYS[option], M.LABELS[option]))
  end
  local preview = type(q.params.preview) == 'table' and q.params.preview.kind
  if preview == 'diff' then
    table.insert(parts, 'gd: diff')
  elseif preview == 'command' then
    table.insert(parts, 'gd: view')
  end
  return '  ' .. table.concat(parts, ' · ')
end

local function settle(q, outcome, line)
  if q.state ~= 'open' then
    return
  end
  q.state = outcome or 'withdrawn'
  chat.set_block_line(q.block, q.nlines - 1, '  ' .. line, outcome and 'TillerNotice' or 'Comment')
  if outcome then
    q.reply({ outcome = outcome })
    pcall(M.on_answered, q.params.toolCallId, outcome)
  end
end

--- Answer question `q` with `outcome` (one of its options).
function M.answer(q, outcome)
  if vim.tbl_contains(q.options, outcome) then
    settle(q, outcome, M.ANSWERED[outcome])
  end
end

--- The questions still open, oldest first.
function M.open_questions()
  return vim.tbl_filter(function(q)
    return q.state == 'open'
  end, questions)
end

--- The open question under the cursor of the current window (in the chat), else the oldest.
function M.current()
  local open = M.open_questions()
  if api.nvim_get_current_buf() == chat.buffer() then
    local row = api.nvim_win_get_cursor(0)[1] - 1
    for _, q in ipairs(open) do
      local first = chat.mark_row(q.block)
      if first and row >= first and row < first + q.nlines then
        return q
      end
    end
  end
  return open[1]
end

local function answer_key(outcome)
  return function()
    local q = M.current()
    if not q then
      messages.show('no question is waiting for you', vim.log.levels.INFO)
    elseif not vim.tbl_contains(q.options, outcome) then
      messages.show('this question does not offer ' .. M.LABELS[outcome], vim.log.levels.WARN)
    else
      M.answer(q, outcome)
    end
  end
end

local function absolute(path)
  if path:sub(1, 1) ~= '/' then
    path = (cwd or vim.fn.getcwd()) .. '/' .. path
  end
  return vim.fn.fnamemodify(path, ':p')
end

--- Apply the unified diff `diff` to `lines`; returns the new lines.
function M.apply_diff(lines, diff)
  local out, next_old = {}, 1
  local in_hunk = false
  for _, line in ipairs(split(diff)) do
    local old_start, old_count = line:match('^@@ %-(%d+),?(%d*) %+%d+,?%d* @@')
    if old_start then
      old_start = tonumber(old_start)
      if old_count == '0' then
        old_start = old_start + 1 -- an insertion after line old_start
      end
      for i = next_old, old_start - 1 do
        table.insert(out, lines[i])
      end
      next_old, in_hunk = old_start, true
    elseif in_hunk then
      local kind, text = line:sub(1, 1), line:sub(2)
      if kind == ' ' then
        table.insert(out, lines[next_old])
        next_old = next_old + 1
      elseif kind == '-' then
        next_old = next_old + 1
      elseif kind == '+' then
        table.insert(out, text)
      end
    end
  end
  for i = next_old, #lines do
    table.insert(out, lines[i])
  end
  return out
end

local function scratch(name, lines, filetype)
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].modifiable = false
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  pcall(api.nvim_buf_set_name, buf, name)
  return buf
end

-- The real side of a diff: the loaded buffer, else the file read into a scratch buffer (empty
-- for a new file).
local function real_side(path)
  local handlers = require('tiller.handlers')
  local buf = handlers.find_buffer(path)
  if buf then
    return buf, api.nvim_buf_get_lines(buf, 0, -1, false)
  end
  local lines = vim.fn.filereadable(path) == 1 and vim.fn.readfile(path) or {}
  return scratch('tiller://disk/' .. path, lines), lines
end

--- gd: show the question under the cursor (or the oldest) in a new tab page: a change as the
--- real buffer beside the proposal, in diff mode; a command in full.
function M.view(q)
  q = q or M.current()
  if not q then
    messages.show('no question is waiting for you', vim.log.levels.INFO)
    return
  end
  local preview = type(q.params.preview) == 'table' and q.params.preview or {}
  if preview.kind == 'diff' and type(preview.diff) == 'string' then
    local path = absolute(tostring(preview.path))
    vim.cmd('tabnew')
    local empty = api.nvim_get_current_buf()
    local real, lines = real_side(path)
    api.nvim_win_set_buf(0, real)
    vim.cmd('diffthis')
    local proposal = M.apply_diff(lines, preview.diff)
    local name = 'tiller://proposal/' .. path
    local filetype = vim.bo[real].filetype
    vim.cmd('rightbelow vsplit')
    api.nvim_win_set_buf(0, scratch(name, proposal, filetype ~= '' and filetype or nil))
    vim.cmd('diffthis')
    if api.nvim_buf_is_valid(empty) and empty ~= real then
      pcall(api.nvim_buf_delete, empty, { force = true })
    end
  elseif preview.kind == 'command' and type(preview.command) == 'string' then
    vim.cmd('tabnew')
    local empty = api.nvim_get_current_buf()
    api.nvim_win_set_buf(0, scratch('tiller://command/' .. tostring(q.id), split(preview.command), 'sh'))
    pcall(api.nvim_buf_delete, empty, { force = true })
  else
    messages.show('nothing more to show for this question', vim.log.levels.INFO)
  end
end

local function map_keys(buf)
  for outcome, key in pairs(M.KEYS) do
    vim.keymap.set('n', key, answer_key(outcome), { buffer = buf, nowait = true,
      desc = 'Tiller: ' .. M.LABELS[outcome] })
  end
  vim.keymap.set('n', 'gd', function()
    M.view()
  end, { buffer = buf, desc = 'Tiller: view the change or command asked about' })
end

-- Show the chat without taking the focus from where the user is.
local function show_chat()
  if chat.window() then
    return
  end
  local win = api.nvim_get_current_win()
  chat.open()
  if api.nvim_win_is_valid(win) then
    api.nvim_set_current_win(win)
  end
end

--- client/requestPermission: show the question in the chat; `reply({outcome})` is called when
--- the user answers (any time later). `id` is the request's, for M.cancel.
function M.ask(params, reply, id)
  local options = {}
  for _, option in ipairs(type(params.options) == 'table' and params.options or M.OPTIONS) do
    if M.KEYS[option] then
      table.insert(options, option)
    end
  end
  if #options == 0 then
    options = vim.deepcopy(M.OPTIONS)
  end
  local q = { id = id, params = params, reply = reply, options = options, state = 'open' }
  local lines = M.question_lines(params)
  table.insert(lines, keys_line(q))
  q.nlines = #lines
  q.lines = lines
  map_keys(chat.buffer())
  q.block = chat.append_block(lines, 'TillerQuestion')
  table.insert(questions, q)
  show_chat()
  for _, fn in ipairs(M.on_asked) do
    pcall(fn, q)
  end
end

--- The server stopped waiting for its request `id` (nil: every open question).
function M.cancel(id)
  for _, q in ipairs(M.open_questions()) do
    if id == nil or q.id == id then
      settle(q, nil, '→ withdrawn: Tiller stopped waiting for this answer')
    end
  end
end

return M
