-- tiller.chatbuf: the chat buffer and the one owner of the chat's state (what was written
-- last, the streams, the tool call blocks and their folds). tiller.chat and tiller.chat_tools
-- render into it through the API below and keep no state of their own; the rest of the
-- plugin goes through tiller.chat.
--
-- The API:
--   buffer() valid() clear() open() window() window_of(buf) lines()    the buffer, its windows
--   write(lines, what, group)      append lines: a user message, the assistant's heading, a
--                                  notice or a tool block (see there)
--   section()                      whose heading was written last: 'user', 'assistant' or nil
--   stream(kind, delta) end_stream()       the text or thinking being streamed
--   start_message() discard_message()      the assistant message in progress (a retry drops it)
--   add_call(id, data, header, group)      a tool call's block: a fold, its header and body
--   call(id) set_call(id, header, body, group) call_line(id)
--   append_block(lines, group) mark_row(mark) set_block_line(mark, offset, text, group)
--                                  a marked block (a permission question), edited in place
--   foldexpr(lnum)                 'foldexpr' of chat windows
--   content_lines(content) trim_trailing_blanks(lines)    text helpers (no state)

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

local S -- the chat's state: private to this module, made afresh by reset()

local function reset()
  S = {
    buf = nil,
    empty = true, -- nothing written yet: the buffer's single empty line is a placeholder
    section = nil, -- 'user' or 'assistant': whose heading was written last
    last = nil, -- what the last lines are: 'header', 'stream', 'tool', 'notice', 'user'
    stream = nil, -- nil, 'text' or 'thinking': the kind of delta the last line receives
    stream_row = nil, -- first row of the current stream
    message_row = nil, -- first row of the assistant message in progress
    blocks = {}, -- every tool call's block: {mark, nlines, data}
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
    pcall(function()
      vim.wo[win][name] = value
    end)
  end
  set('foldmethod', 'expr')
  set('foldexpr', "v:lua.require'tiller.chatbuf'.foldexpr(v:lnum)")
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

--- The window showing buffer `buf` in the current tab page, or nil.
function M.window_of(buf)
  if not (buf and api.nvim_buf_is_valid(buf)) then
    return nil
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == buf then
      return win
    end
  end
  return nil
end

--- The window showing the chat buffer in the current tab page, or nil.
function M.window()
  return M.window_of(S.buf)
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

-- The fold table (lnum -> level string) from the blocks' marks and sizes; with `after_row` and
-- `shift`, blocks whose header row is past `after_row` are counted `shift` lines lower: the
-- table as it will be once an edit about to be made has moved them.
local function build_folds(after_row, shift)
  local folds = {}
  for _, block in ipairs(S.blocks) do
    local pos = api.nvim_buf_get_extmark_by_id(S.buf, BLOCKS, block.mark, {})
    if pos and pos[1] then
      local row = pos[1]
      if after_row and row > after_row then
        row = row + shift
      end
      local lnum = row + 1
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

--- Append `text` or `thinking` delta text to the stream of that kind (a new stream, after a
--- blank line, when the last lines are something else).
M.stream = stream

--- The current stream is over (its trailing blank lines dropped).
M.end_stream = end_stream

-- Writing --------------------------------------------------------------------------------------

--- Append `lines`, after the stream (ended) and a blank line (none right under the assistant's
--- heading, nor between two tool blocks); returns the row of the first. `what` says what they
--- are: 'user' (a user message under its heading), 'assistant' (the assistant's heading),
--- 'notice' or 'tool' (a tool call's header). `group` highlights the first line (a notice's
--- every line).
function M.write(lines, what, group)
  M.buffer()
  end_stream()
  if not (what == 'tool' and S.last == 'tool') then
    gap()
  end
  local row = append(lines)
  if group then
    highlight(group, row, what == 'notice' and row + #lines - 1 or row)
  end
  S.last = what == 'assistant' and 'header' or what
  if what == 'user' or what == 'assistant' then
    S.section = what
  end
  return row
end

--- Whose heading was written last: 'user', 'assistant', or nil (none since the buffer was
--- created or cleared).
function M.section()
  return S.section
end

--- The assistant message in progress starts here, at the end (see M.discard_message).
function M.start_message()
  S.message_row = line_count()
end

--- Remove what was shown of the assistant message in progress (the server discards it: a
--- retry).
function M.discard_message()
  end_stream()
  local count = line_count()
  if S.message_row and S.message_row < count then
    edit(function(buf)
      api.nvim_buf_clear_namespace(buf, HIGHLIGHT, S.message_row, -1)
      api.nvim_buf_set_lines(buf, S.message_row, -1, false, {})
    end)
  end
end

-- Tool call blocks -----------------------------------------------------------------------------

local function block_row(block)
  local pos = api.nvim_buf_get_extmark_by_id(S.buf, BLOCKS, block.mark, {})
  return pos and pos[1]
end

--- Append the block of tool call `id`: its `header` line (highlighted with `group`), a fold
--- that grows with its body (M.set_call). `data` is the caller's own record of the call, kept
--- with the block (M.call); a later block with the same id (a provider may reuse ids across
--- runs) takes the id over.
function M.add_call(id, data, header, group)
  local row = M.write({ header }, 'tool', group)
  local block = { nlines = 0, data = data }
  block.mark = api.nvim_buf_set_extmark(S.buf, BLOCKS, row, 0, {})
  table.insert(S.blocks, block)
  S.calls[tostring(id)] = block
  S.folds = nil
end

--- The `data` of the latest block of tool call `id`, or nil.
function M.call(id)
  local block = valid() and S.calls[tostring(id)]
  return block and block.data or nil
end

--- Replace the header and body of the latest block of tool call `id`, the header highlighted
--- with `group`. A fold the user opened stays open.
---
--- The header and the body are replaced by one change: Neovim 0.11 updates an expr fold
--- incrementally, and a change to its header line right after lines were inserted under it
--- left the fold one line short (0.7.2 got it right). Neovim evaluates 'foldexpr' during the
--- change, while the block's mark is displaced, so the fold table is set beforehand to what it
--- will be after the change.
function M.set_call(id, header, body, group)
  local block = valid() and S.calls[tostring(id)]
  local row = block and block_row(block)
  if not row then
    return
  end
  local old = block.nlines
  -- A header alone is a one-line fold, which never shows closed: not one the user opened.
  local open = old > 0 and open_folds_at(row + 1) or {}
  block.nlines = #body
  S.folds = build_folds(row, #body - old)
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, HIGHLIGHT, row, row + 1 + old)
    local lines = { header }
    vim.list_extend(lines, body)
    api.nvim_buf_set_lines(buf, row, row + 1 + old, false, lines)
    api.nvim_buf_set_extmark(buf, BLOCKS, row, 0, { id = block.mark })
  end)
  highlight(group, row)
  reopen_folds(open, row + 1)
end

--- The 1-based line of the header of tool call `id`, or nil.
function M.call_line(id)
  local block = valid() and S.calls[tostring(id)]
  local row = block and block_row(block)
  return row and row + 1 or nil
end

-- Marked blocks --------------------------------------------------------------------------------

--- Append `lines` (a notice) highlighted with `group`; returns a mark for M.mark_row and
--- M.set_block_line.
function M.append_block(lines, group)
  local row = M.write(lines, 'notice', group)
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

--- The chat buffer's lines (for tests and scripts).
function M.lines()
  if not valid() then
    return {}
  end
  return api.nvim_buf_get_lines(S.buf, 0, -1, false)
end

--- Whether the chat buffer exists.
M.valid = valid

-- Text helpers (no state) ----------------------------------------------------------------------

--- The lines of message content: a string, or text blocks (an image as "[image]").
function M.content_lines(content)
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

--- `lines` without their trailing blank lines (changed in place, and returned).
function M.trim_trailing_blanks(lines)
  while #lines > 0 and lines[#lines]:match('^%s*$') do
    table.remove(lines)
  end
  return lines
end

return M
