-- tiller.input: the input area, a small buffer under the chat where messages are written.
--
--   <CR>    (normal mode) send: a prompt when the agent is idle, else steering (delivered
--   <C-s>   (insert mode)  after the running tool calls, before the next model call)
--   <M-CR>  (both modes)  a follow-up (delivered when the agent would otherwise stop)
--
-- Sending from insert mode stays in insert mode, so the next message can be typed at once.
--
-- Before sending, `@path` (a file under the workspace) and `#buffer` (the buffer you were in
-- last, unsaved text included) add those files' text after the message.

local M = {}

local api = vim.api

M.config = {
  height = 6, -- lines of the input window
}

--- Called with (text, kind) when the user sends; kind is 'send' or 'followUp'. tiller.init
--- sets it.
M.on_submit = function() end

local S = { buf = nil, last_buffer = nil }

local cwd = nil

--- The directory `@path` is relative to (the server's cwd).
function M.set_cwd(dir)
  cwd = dir
end

local function is_code_buffer(buf)
  return api.nvim_buf_is_valid(buf)
    and vim.bo[buf].buftype == ''
    and api.nvim_buf_get_name(buf) ~= ''
end

api.nvim_create_autocmd('BufEnter', {
  group = api.nvim_create_augroup('tiller.input', { clear = true }),
  callback = function(args)
    if is_code_buffer(args.buf) then
      S.last_buffer = args.buf
    end
  end,
})

local function fence(name, lines, filetype)
  local out = { '', name .. ':', '```' .. (filetype or '') }
  vim.list_extend(out, lines)
  table.insert(out, '```')
  return out
end

local function display_name(path)
  return vim.fn.fnamemodify(path, ':~:.')
end

--- The message for `text`: the text, then the files its `@path` words name and, for
--- `#buffer`, the text of `buffer` (default: the last file buffer entered).
function M.expand(text, buffer)
  local extra, seen = {}, {}
  for path in text:gmatch('@([%w%._%-/~]+)') do
    path = path:gsub('[%.,;:]+$', '')
    local full = vim.fn.fnamemodify(path, ':p')
    if path:sub(1, 1) ~= '/' and path:sub(1, 1) ~= '~' then
      full = vim.fn.fnamemodify((cwd or vim.fn.getcwd()) .. '/' .. path, ':p')
    end
    if not seen[full] and vim.fn.filereadable(full) == 1 then
      seen[full] = true
      local ok, ft = pcall(vim.filetype.match, { filename = full }) -- 0.8+; nil on 0.7
      ft = ok and type(ft) == 'string' and ft or nil
      vim.list_extend(extra, fence('@' .. path, vim.fn.readfile(full), ft))
    end
  end
  if text:find('#buffer', 1, true) then
    buffer = buffer or S.last_buffer
    if buffer and is_code_buffer(buffer) then
      local name = display_name(api.nvim_buf_get_name(buffer))
      local lines = api.nvim_buf_get_lines(buffer, 0, -1, false)
      vim.list_extend(extra, fence('#buffer (' .. name .. ')', lines, vim.bo[buffer].filetype))
    end
  end
  if #extra == 0 then
    return text
  end
  return text .. '\n' .. table.concat(extra, '\n')
end

--- Lines `first`..`last` of `buffer` quoted with the file name and line numbers.
function M.selection(buffer, first, last)
  local name = api.nvim_buf_get_name(buffer)
  name = name ~= '' and display_name(name) or '[No Name]'
  local lines = api.nvim_buf_get_lines(buffer, first - 1, last, false)
  local where = first == last and ('line ' .. first) or string.format('lines %d-%d', first, last)
  local out = fence(string.format('%s, %s', name, where), lines, vim.bo[buffer].filetype)
  table.remove(out, 1)
  return out
end

local function submit(kind)
  local lines = api.nvim_buf_get_lines(S.buf, 0, -1, false)
  local text = vim.trim(table.concat(lines, '\n'))
  if text == '' then
    return
  end
  api.nvim_buf_set_lines(S.buf, 0, -1, false, { '' })
  M.on_submit(M.expand(text), kind)
end

local function create()
  local buf = api.nvim_create_buf(false, true)
  S.buf = buf
  pcall(api.nvim_buf_set_name, buf, 'tiller://input')
  vim.bo[buf].swapfile = false
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].filetype = 'tillerinput'
  local function map(modes, lhs, kind, desc)
    vim.keymap.set(modes, lhs, function()
      submit(kind)
    end, { buffer = buf, desc = desc })
  end
  map('n', '<CR>', 'send', 'Tiller: send (steers while the agent runs)')
  map('i', '<C-s>', 'send', 'Tiller: send (steers while the agent runs)')
  map({ 'n', 'i' }, '<M-CR>', 'followUp', 'Tiller: send as a follow-up')
  return buf
end

--- The input buffer, created if needed.
function M.buffer()
  if not (S.buf and api.nvim_buf_is_valid(S.buf)) then
    create()
  end
  return S.buf
end

--- The window showing the input buffer in this tab page, or nil.
function M.window()
  return require('tiller.chatbuf').window_of(S.buf)
end

--- Show the input area under `chat_win` (unless it is shown) and return its window. `lines`
--- replace its text when given; `focus` moves the cursor there (in insert mode when empty).
function M.open(chat_win, lines, focus)
  local buf = M.buffer()
  local win = M.window()
  local previous = api.nvim_get_current_win()
  if not win then
    api.nvim_set_current_win(chat_win)
    vim.cmd(string.format('belowright %dsplit', M.config.height))
    win = api.nvim_get_current_win()
    api.nvim_win_set_buf(win, buf)
    vim.wo[win].winfixheight = true
  end
  if lines then
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  end
  if focus then
    api.nvim_set_current_win(win)
    api.nvim_win_set_cursor(win, { 1, 0 })
  elseif api.nvim_win_is_valid(previous) then
    api.nvim_set_current_win(previous)
  end
  return win
end

return M
