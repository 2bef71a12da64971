-- tiller.chat: the chat buffer, rendered from `agent/event` notifications.
--
-- Layout (the buffer is a scratch buffer, filetype `tiller`, not modifiable by hand):
--
--   ## You
--   run the tests
--
--   ## Tiller
--   > thinking, quoted
--
--   The reply, streamed from text deltas.
--
--   ✓ bash: pytest -q                 <- a tool call: a fold whose first line names the tool
--     3 passed                           and its arguments; the result (at most
--                                         `tool_output_lines` lines) is folded inside
--   ✗ Error: openai: 401 Unauthorized   <- a run that ended with stopReason "error"
--
-- Tool blocks are tracked with extmarks, so a result arriving for an earlier call of a parallel
-- batch is inserted under its own header. Folds come from 'foldexpr' (chat.foldexpr), which
-- reads the block table: they work in every window that shows the buffer.

local M = {}

local api = vim.api

M.config = {
  split = 'botright vsplit', -- the command that makes a window for the chat buffer
  tool_output_lines = 20, -- lines of a tool's result shown inside its fold
}

local BLOCKS = api.nvim_create_namespace('tiller.blocks')
local HIGHLIGHT = api.nvim_create_namespace('tiller.highlight')
local MARKS = api.nvim_create_namespace('tiller.marks')

local function define_highlights()
  for group, target in pairs({
    TillerHeader = 'Title',
    TillerThinking = 'Comment',
    TillerTool = 'Special',
    TillerToolError = 'ErrorMsg',
    TillerError = 'ErrorMsg',
    TillerNotice = 'WarningMsg',
    TillerQuestion = 'Question',
  }) do
    vim.cmd(string.format('highlight default link %s %s', group, target))
  end
end
define_highlights()
api.nvim_create_autocmd('ColorScheme', {
  group = api.nvim_create_augroup('tiller.highlights', { clear = true }),
  callback = define_highlights,
})

local S = {} -- the chat's state; see reset()

local function reset()
  S = {
    buf = nil,
    empty = true, -- nothing written yet: the buffer's single empty line is a placeholder
    section = nil, -- 'user' or 'assistant': whose heading was written last
    last = nil, -- what the last lines are: 'header', 'stream', 'tool', 'notice', 'user'
    stream = nil, -- nil, 'text' or 'thinking': the kind of delta the last line receives
    stream_row = nil, -- first row of the current stream
    message_row = nil, -- first row of the assistant message in progress
    blocks = {}, -- every tool block: {mark, nlines, name, summary, status}
    calls = {}, -- toolCallId -> its latest block (ids may repeat across runs)
    folds = nil, -- lnum -> fold level string, rebuilt when nil
  }
end
reset()

local function valid()
  return S.buf ~= nil and api.nvim_buf_is_valid(S.buf)
end

local function line_count()
  if S.empty then
    return 0
  end
  return api.nvim_buf_line_count(S.buf)
end

local function last_line()
  if S.empty then
    return nil
  end
  return api.nvim_buf_get_lines(S.buf, -2, -1, false)[1]
end

-- Apply fn(buf) with the buffer modifiable; windows whose cursor was on the last line follow
-- the new end.
local function edit(fn)
  local buf = S.buf
  local old_last = api.nvim_buf_line_count(buf)
  local followers = {}
  for _, win in ipairs(api.nvim_list_wins()) do
    if api.nvim_win_get_buf(win) == buf and api.nvim_win_get_cursor(win)[1] >= old_last then
      table.insert(followers, win)
    end
  end
  vim.bo[buf].modifiable = true
  local ok, err = pcall(fn, buf)
  vim.bo[buf].modifiable = false
  if not ok then
    error(err, 0)
  end
  local new_last = api.nvim_buf_line_count(buf)
  for _, win in ipairs(followers) do
    pcall(api.nvim_win_set_cursor, win, { new_last, 0 })
  end
end

local function highlight(group, first_row, last_row)
  for row = first_row, last_row or first_row do
    api.nvim_buf_add_highlight(S.buf, HIGHLIGHT, group, row, 0, -1)
  end
end

-- Append lines at the end; returns the row of the first one.
local function append(lines)
  local row = line_count()
  edit(function(buf)
    if S.empty then
      api.nvim_buf_set_lines(buf, 0, -1, false, lines)
      S.empty = false
    else
      api.nvim_buf_set_lines(buf, -1, -1, false, lines)
    end
  end)
  return row
end

-- One blank line between the last content and what comes next (none under a heading).
local function gap()
  local last = last_line()
  if last ~= nil and last ~= '' and S.last ~= 'header' then
    append({ '' })
  end
end

-- Chat window options. The user's own settings (foldlevel, wrap...) are set once per window
-- and then left as the user changes them.
local function setup_window(win)
  local function set(name, value)
    pcall(api.nvim_win_set_option, win, name, value)
  end
  set('foldmethod', 'expr')
  set('foldexpr', "v:lua.require'tiller.chat'.foldexpr(v:lnum)")
  if pcall(api.nvim_win_get_var, win, 'tiller_chat') then
    return
  end
  api.nvim_win_set_var(win, 'tiller_chat', true)
  set('foldenable', true)
  set('foldlevel', 0)
  set('wrap', true)
  set('linebreak', true)
  set('statusline', "%!v:lua.require'tiller.status'.statusline()")
end

-- The windows where the fold starting at `lnum` is open: a block being rewritten stays open.
local function open_folds_at(lnum)
  local open = {}
  for _, win in ipairs(api.nvim_list_wins()) do
    if api.nvim_win_get_buf(win) == S.buf then
      api.nvim_win_call(win, function()
        if vim.fn.foldlevel(lnum) > 0 and vim.fn.foldclosed(lnum) == -1 then
          table.insert(open, win)
        end
      end)
    end
  end
  return open
end

local function reopen_folds(windows, lnum)
  for _, win in ipairs(windows) do
    if api.nvim_win_is_valid(win) then
      api.nvim_win_call(win, function()
        vim.cmd('silent! ' .. lnum .. 'foldopen')
      end)
    end
  end
end

local function create_buffer()
  reset()
  local buf = api.nvim_create_buf(false, true)
  S.buf = buf
  pcall(api.nvim_buf_set_name, buf, 'tiller://chat')
  vim.bo[buf].swapfile = false
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].undolevels = -1
  vim.bo[buf].filetype = 'tiller'
  vim.bo[buf].modifiable = false
  api.nvim_create_autocmd('BufWinEnter', {
    buffer = buf,
    callback = function()
      setup_window(api.nvim_get_current_win())
    end,
  })
  api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    callback = function()
      if S.buf == buf then
        reset()
      end
    end,
  })
  return buf
end

--- Empty the chat buffer (another session is shown next); its windows stay.
function M.clear()
  if not valid() then
    return
  end
  local buf = S.buf
  edit(function(b)
    api.nvim_buf_clear_namespace(b, -1, 0, -1)
    api.nvim_buf_set_lines(b, 0, -1, false, {})
  end)
  reset()
  S.buf = buf
end

--- The chat buffer, created if needed (not shown).
function M.buffer()
  if not valid() then
    create_buffer()
  end
  return S.buf
end

--- The window showing the chat buffer in the current tab page, or nil.
function M.window()
  if not valid() then
    return nil
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == S.buf then
      return win
    end
  end
  return nil
end

--- Show the chat buffer and focus its window: an existing one in this tab page, else a new
--- split (config.split). The cursor goes to the end, so the reply is followed as it streams.
function M.open()
  local buf = M.buffer()
  local win = M.window()
  if win then
    api.nvim_set_current_win(win)
  else
    vim.cmd(M.config.split)
    win = api.nvim_get_current_win()
    api.nvim_win_set_buf(win, buf)
  end
  setup_window(win)
  api.nvim_win_set_cursor(win, { api.nvim_buf_line_count(buf), 0 })
  return win
end

-- Folds ----------------------------------------------------------------------------------------

local function build_folds()
  local folds = {}
  for _, block in ipairs(S.blocks) do
    local pos = api.nvim_buf_get_extmark_by_id(S.buf, BLOCKS, block.mark, {})
    if pos and pos[1] then
      local lnum = pos[1] + 1
      folds[lnum] = '>1'
      for i = 1, block.nlines do
        folds[lnum + i] = '1'
      end
    end
  end
  return folds
end

--- 'foldexpr' of chat windows: a fold per tool call, its header line plus its result.
function M.foldexpr(lnum)
  if not valid() or api.nvim_get_current_buf() ~= S.buf then
    return '0'
  end
  if not S.folds then
    S.folds = build_folds()
  end
  return S.folds[tonumber(lnum) or vim.v.lnum] or '0'
end

-- Streams --------------------------------------------------------------------------------------

local PREFIX = { text = '', thinking = '> ' }

-- The current stream is over: drop its trailing blank lines.
local function end_stream()
  if not S.stream then
    return
  end
  local bare = { [''] = true, ['>'] = true, ['> '] = true }
  edit(function(buf)
    local count = api.nvim_buf_line_count(buf)
    local first = count
    while first - 1 > S.stream_row do
      local line = api.nvim_buf_get_lines(buf, first - 1, first, false)[1]
      if not bare[line] then
        break
      end
      first = first - 1
    end
    if first < count then
      api.nvim_buf_clear_namespace(buf, HIGHLIGHT, first, -1)
      api.nvim_buf_set_lines(buf, first, count, false, {})
    end
  end)
  S.stream, S.stream_row = nil, nil
end

local function stream(kind, delta)
  if type(delta) ~= 'string' or delta == '' then
    return
  end
  local prefix = PREFIX[kind]
  if S.stream ~= kind then
    end_stream()
    if S.last ~= 'header' then
      gap()
    end
    S.stream_row = append({ prefix })
    S.stream, S.last = kind, 'stream'
    if kind == 'thinking' then
      highlight('TillerThinking', S.stream_row)
    end
  end
  local pieces = vim.split(delta, '\n', { plain = true })
  for i = 2, #pieces do
    pieces[i] = prefix .. pieces[i]
  end
  local row
  edit(function(buf)
    row = api.nvim_buf_line_count(buf) - 1
    local last = api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
    api.nvim_buf_set_text(buf, row, #last, row, #last, pieces)
  end)
  if kind == 'thinking' and #pieces > 1 then
    highlight('TillerThinking', row + 1, row + #pieces - 1)
  end
end

-- Sections -------------------------------------------------------------------------------------

local function content_lines(content)
  if type(content) == 'string' then
    return vim.split(content, '\n', { plain = true })
  end
  local lines = {}
  if type(content) == 'table' then
    for _, block in ipairs(content) do
      if block.type == 'text' and type(block.text) == 'string' then
        vim.list_extend(lines, vim.split(block.text, '\n', { plain = true }))
      elseif block.type == 'image' then
        table.insert(lines, '[image]')
      end
    end
  end
  return lines
end

local function trim_trailing_blanks(lines)
  while #lines > 0 and lines[#lines]:match('^%s*$') do
    table.remove(lines)
  end
  return lines
end

local function user_message(message)
  end_stream()
  gap()
  local lines = { '## You' }
  vim.list_extend(lines, trim_trailing_blanks(content_lines(message.content)))
  local row = append(lines)
  highlight('TillerHeader', row)
  S.section, S.last = 'user', 'user'
end

local function assistant_start()
  end_stream()
  if S.section ~= 'assistant' then
    gap()
    highlight('TillerHeader', append({ '## Tiller' }))
    S.section, S.last = 'assistant', 'header'
  end
  S.message_row = line_count()
end

--- Append a notice: kind 'error' (shown as "✗ Error: ..."), 'warning' or 'info'.
function M.notice(kind, text)
  M.buffer()
  end_stream()
  gap()
  local lines = vim.split(tostring(text), '\n', { plain = true })
  local group = 'TillerNotice'
  if kind == 'error' then
    lines[1] = '✗ Error: ' .. lines[1]
    group = 'TillerError'
  end
  local row = append(lines)
  highlight(group, row, row + #lines - 1)
  S.last = 'notice'
end

--- Append `lines` (after a blank line) highlighted with `group`; returns a mark for
--- M.mark_row and M.set_block_line.
function M.append_block(lines, group)
  M.buffer()
  end_stream()
  gap()
  local row = append(lines)
  highlight(group, row, row + #lines - 1)
  S.last = 'notice'
  return api.nvim_buf_set_extmark(S.buf, MARKS, row, 0, {})
end

--- The 0-based row of a mark from M.append_block, or nil.
function M.mark_row(mark)
  if not valid() then
    return nil
  end
  local pos = api.nvim_buf_get_extmark_by_id(S.buf, MARKS, mark, {})
  return pos and pos[1]
end

--- Replace line `offset` of the block at `mark` with `text`, highlighted with `group`.
function M.set_block_line(mark, offset, text, group)
  local row = M.mark_row(mark)
  if not row then
    return
  end
  row = row + offset
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, HIGHLIGHT, row, row + 1)
    api.nvim_buf_set_lines(buf, row, row + 1, false, { text })
  end)
  highlight(group, row)
end

local function retry_scheduled(event)
  end_stream()
  -- The partial message is discarded by the server: discard what was shown of it.
  local count = line_count()
  if S.message_row and S.message_row < count then
    edit(function(buf)
      api.nvim_buf_clear_namespace(buf, HIGHLIGHT, S.message_row, -1)
      api.nvim_buf_set_lines(buf, S.message_row, -1, false, {})
    end)
  end
  local delay = (tonumber(event.delayMs) or 0) / 1000
  M.notice(
    'warning',
    string.format(
      '⟳ %s (retry %s/%s in %.1fs)',
      tostring(event.errorMessage or 'provider error'),
      tostring(event.attempt or '?'),
      tostring(event.maxAttempts or '?'),
      delay
    )
  )
end

local STOP_NOTICES = {
  aborted = '⊘ Aborted',
  maxTurns = '⚠ Stopped: turn limit reached (:TillerContinue goes on)',
  maxTokens = '⚠ Stopped: token limit of the run reached (:TillerContinue goes on)',
  length = '⚠ Stopped: the model hit its output limit',
}

local function agent_end(event)
  end_stream()
  local reason = event.stopReason
  if reason == 'error' then
    M.notice('error', event.errorMessage or 'the run failed')
  elseif STOP_NOTICES[reason] then
    M.notice('warning', STOP_NOTICES[reason])
  elseif reason ~= 'stop' and reason ~= 'toolUse' and reason ~= nil then
    M.notice('warning', '⚠ Stopped: ' .. tostring(reason))
  end
end

-- Tool blocks ----------------------------------------------------------------------------------

local function one_line(text, max)
  text = tostring(text):gsub('\r?\n', ' ⏎ ')
  if #text > max then
    text = text:sub(1, max) .. '…'
  end
  return text
end

--- One line naming a tool call's arguments: the command for bash, the path for file tools,
--- else the arguments as JSON.
function M.summarize_args(name, args)
  if type(args) ~= 'table' then
    return args ~= nil and one_line(args, 300) or ''
  end
  if name == 'bash' and type(args.command) == 'string' then
    return one_line(args.command, 300)
  end
  if type(args.path) == 'string' and (name == 'read' or name == 'write' or name == 'edit') then
    local extra = ''
    if args.offset or args.limit then
      extra = string.format(' (lines %s+%s)', tostring(args.offset or 1), tostring(args.limit or ''))
    end
    return one_line(args.path .. extra, 300)
  end
  local ok, json = pcall(vim.json.encode, args)
  return one_line(ok and json or vim.inspect(args), 300)
end

local ICONS = { running = '⚙', ok = '✓', error = '✗' }

local function header_text(block)
  local text = string.format('%s %s', ICONS[block.status], block.name)
  if block.summary ~= '' then
    text = text .. ': ' .. block.summary
  end
  return text
end

-- Indented body lines: the first `max` of `lines` (or the last, with from_end), with a line
-- saying how many were left out.
local function body_lines(lines, from_end)
  local max = M.config.tool_output_lines
  lines = trim_trailing_blanks(lines)
  local out = {}
  if #lines == 0 then
    return { '  (no output)' }
  end
  local first, last = 1, #lines
  if #lines > max then
    if from_end then
      first = #lines - max + 1
      table.insert(out, string.format('  … (%d earlier lines)', first - 1))
    else
      last = max
    end
  end
  for i = first, last do
    table.insert(out, '  ' .. lines[i])
  end
  if last < #lines then
    table.insert(out, string.format('  … (%d more lines)', #lines - last))
  end
  return out
end

local function block_row(block)
  local pos = api.nvim_buf_get_extmark_by_id(S.buf, BLOCKS, block.mark, {})
  return pos and pos[1]
end

-- Replace a block's body (and refresh its header line).
local function set_block(block, body)
  local row = block_row(block)
  if not row then
    return
  end
  local old = block.nlines
  local open = open_folds_at(row + 1)
  block.nlines = #body
  S.folds = nil
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, HIGHLIGHT, row, row + 1 + old)
    api.nvim_buf_set_lines(buf, row + 1, row + 1 + old, false, body)
    api.nvim_buf_set_lines(buf, row, row + 1, false, { header_text(block) })
    api.nvim_buf_set_extmark(buf, BLOCKS, row, 0, { id = block.mark })
  end)
  S.folds = nil
  highlight(block.status == 'error' and 'TillerToolError' or 'TillerTool', row)
  reopen_folds(open, row + 1)
end

local function tool_start(event)
  end_stream()
  local id = tostring(event.toolCallId)
  local name = tostring(event.toolName or 'tool')
  local block = { nlines = 0, name = name, summary = M.summarize_args(name, event.args) }
  block.status = 'running'
  if S.last ~= 'tool' then
    gap()
  end
  local row = append({ header_text(block) })
  block.mark = api.nvim_buf_set_extmark(S.buf, BLOCKS, row, 0, {})
  highlight('TillerTool', row)
  table.insert(S.blocks, block)
  S.calls[id] = block
  S.folds = nil
  S.last = 'tool'
end

local function tool_update(event)
  local block = S.calls[tostring(event.toolCallId)]
  local partial = event.partialResult
  if not block or type(partial) ~= 'table' then
    return
  end
  if partial.status == 'awaitingPermission' then
    set_block(block, { '  (waiting for your permission)' })
  elseif type(partial.output) == 'string' then
    set_block(block, body_lines(vim.split(partial.output, '\n', { plain = true }), true))
  end
end

--- The user answered the permission question of tool call `id` (called by tiller.handlers).
function M.permission_answered(id, outcome)
  local block = valid() and S.calls[tostring(id)]
  if block and block.status == 'running' then
    local allowed = outcome == 'allowOnce' or outcome == 'allowAlways'
    set_block(block, { allowed and '  (allowed, running)' or '  (rejected)' })
  end
end

local function tool_end(event)
  local block = S.calls[tostring(event.toolCallId)]
  if not block or block.status ~= 'running' then
    tool_start(event)
    block = S.calls[tostring(event.toolCallId)]
  end
  local result = type(event.result) == 'table' and event.result or {}
  block.status = event.isError and 'error' or 'ok'
  local body = body_lines(content_lines(result.content))
  -- A file change shows its diff, in full, inside the fold.
  local diff = type(result.details) == 'table' and result.details.diff
  if type(diff) == 'string' and diff ~= '' then
    for _, line in ipairs(trim_trailing_blanks(vim.split(diff, '\n', { plain = true }))) do
      table.insert(body, '  ' .. line)
    end
  end
  set_block(block, body)
end

-- Events ---------------------------------------------------------------------------------------

local function message_role(event)
  return type(event.message) == 'table' and event.message.role or nil
end

local dispatch = {
  message_start = function(event)
    local role = message_role(event)
    if role == 'user' then
      user_message(event.message)
    elseif role == 'assistant' then
      assistant_start()
    end
  end,
  message_update = function(event)
    if event.kind == 'text' or event.kind == 'thinking' then
      stream(event.kind, event.delta)
    end
  end,
  message_end = function(event)
    if message_role(event) == 'assistant' then
      end_stream()
    end
  end,
  tool_execution_start = tool_start,
  tool_execution_update = tool_update,
  tool_execution_end = tool_end,
  retry_scheduled = retry_scheduled,
  agent_end = agent_end,
}

--- Render one `agent/event` (its params) into the chat buffer.
function M.handle_event(event)
  local handler = dispatch[event.type]
  if handler then
    M.buffer()
    handler(event)
  end
end

M.STDERR_SHOWN = 12 -- lines of the server's stderr shown when it exits unasked

--- The server process exited; `stopped` when :TillerStop asked for it. Otherwise the last
--- lines it wrote to stderr (`stderr`) say why.
function M.server_exited(code, signal, stopped, stderr)
  if not valid() then
    return
  end
  end_stream()
  if stopped then
    M.notice('info', '■ Tiller stopped')
    return
  end
  local lines = {
    string.format('tiller exited (code %s, signal %s); :Tiller starts it again', code, signal),
  }
  local tail = trim_trailing_blanks(vim.deepcopy(stderr or {}))
  if #tail > 0 then
    table.insert(lines, 'its last words (stderr):')
    for i = math.max(1, #tail - M.STDERR_SHOWN + 1), #tail do
      table.insert(lines, '  ' .. tail[i])
    end
  end
  M.notice('error', table.concat(lines, '\n'))
end

local warned_unsaved = false

--- The agent changed the buffer of `path`, which stays unsaved (save_edits = false): say once
--- what that means.
function M.kept_unsaved(path)
  if warned_unsaved then
    return
  end
  warned_unsaved = true
  M.notice(
    'warning',
    string.format(
      '⚠ %s changed but not saved (save_edits = false): the agent\'s shell commands and '
        .. 'searches see the files on disk until you save them',
      vim.fn.fnamemodify(path, ':~:.')
    )
  )
end

--- Show a prompt the server never received (it was not running, or exited first).
function M.unsent(text)
  M.buffer()
  end_stream()
  gap()
  local lines = { '## You (not sent)' }
  vim.list_extend(lines, vim.split(text, '\n', { plain = true }))
  local row = append(lines)
  highlight('TillerNotice', row)
  S.section, S.last = 'user', 'user'
end

--- The chat buffer's lines (for tests and scripts).
function M.lines()
  if not valid() then
    return {}
  end
  return api.nvim_buf_get_lines(S.buf, 0, -1, false)
end

--- The 1-based line of the header of tool call `id`, or nil.
function M.block_line(id)
  local block = valid() and S.calls[tostring(id)]
  local row = block and block_row(block)
  return row and row + 1 or nil
end

return M
