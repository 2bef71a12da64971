-- tiller.handlers: answers to the requests the server sends the editor.
--
--   client/readTextFile     {sessionId, path, line?, limit?}   -> {content}
--   client/writeTextFile    {sessionId, path, content}         -> {}
--   client/requestPermission {sessionId, toolCallId, toolName, args, preview, options}
--                                                              -> {outcome}
--
-- Each handler of M.methods returns `result` or `nil, err` (err a JSON-RPC error object); those
-- of M.async_methods get a `reply(result, err)` to call when the answer is known. Files are read from and written to the
-- loaded buffer when there is one, so the agent sees unsaved edits and its writes can be undone.
-- Relative paths resolve against the server's working directory.

local M = {}

local uv = vim.uv or vim.loop

M.PERMISSION_OPTIONS = { 'allowOnce', 'allowAlways', 'rejectOnce', 'rejectAlways' }

M.PERMISSION_LABELS = {
  allowOnce = 'Allow once',
  allowAlways = 'Always allow',
  rejectOnce = 'Reject',
  rejectAlways = 'Always reject',
}

M.config = {
  permission_ui = 'select', -- 'select' (vim.ui.select) or 'inputlist' (always synchronous)
  preview_height = 15,
}

--- Called with (toolCallId, outcome) after each permission answer; tiller.init points it at
--- the chat buffer.
M.on_answered = function() end

local cwd = nil

--- The directory relative paths resolve against (the server's cwd).
function M.set_cwd(dir)
  cwd = dir
end

local ERROR_CODES = { InvalidParams = -32602, InternalError = -32603 }

local function fail(code_name, message)
  return nil, { code = ERROR_CODES[code_name], message = message }
end

local function invalid(message)
  return fail('InvalidParams', 'Invalid params: ' .. message)
end

local function absolute(path)
  if path:sub(1, 1) ~= '/' and not path:match('^%a:[/\\]') then
    path = (cwd or vim.fn.getcwd()) .. '/' .. path
  end
  return vim.fn.fnamemodify(path, ':p')
end

-- A canonical form for comparing paths: symlinks resolved when the file exists.
local function canonical(path)
  local full = vim.fn.fnamemodify(path, ':p')
  local real = uv.fs_realpath(full)
  full = real or full
  if #full > 1 then
    full = full:gsub('/+$', '')
  end
  return full
end

--- The loaded buffer editing `path`, or nil.
function M.find_buffer(path)
  local wanted = canonical(absolute(path))
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) then
      local name = vim.api.nvim_buf_get_name(buf)
      if name ~= '' and vim.bo[buf].buftype == '' and canonical(name) == wanted then
        return buf
      end
    end
  end
  return nil
end

local function split_lines(content)
  local lines = vim.split(content, '\n', { plain = true })
  local final_newline = false
  if #lines > 1 and lines[#lines] == '' then
    table.remove(lines)
    final_newline = true
  end
  return lines, final_newline
end

-- Lines [line, line + limit) of `lines` as text; every line keeps its newline except the file's
-- last when the file has none.
local function slice(lines, final_newline, line, limit)
  local first = line or 1
  local last = #lines
  if limit then
    last = math.min(last, first + limit - 1)
  end
  if first > last then
    return ''
  end
  local text = table.concat(lines, '\n', first, last)
  if last < #lines or final_newline then
    text = text .. '\n'
  end
  return text
end

local function read_file(path)
  local fd, open_err = uv.fs_open(path, 'r', 438)
  if not fd then
    return nil, open_err
  end
  local stat, stat_err = uv.fs_fstat(fd)
  if not stat then
    uv.fs_close(fd)
    return nil, stat_err
  end
  if stat.type == 'directory' then
    uv.fs_close(fd)
    return nil, 'EISDIR: is a directory: ' .. path
  end
  local data, read_err = uv.fs_read(fd, stat.size, 0)
  uv.fs_close(fd)
  if not data then
    return nil, read_err
  end
  return data
end

local function write_file(path, content)
  local dir = vim.fn.fnamemodify(path, ':h')
  if vim.fn.isdirectory(dir) == 0 then
    vim.fn.mkdir(dir, 'p')
  end
  local fd, open_err = uv.fs_open(path, 'w', 420)
  if not fd then
    return nil, open_err
  end
  local ok, write_err = uv.fs_write(fd, content, 0)
  uv.fs_close(fd)
  if not ok then
    return nil, write_err
  end
  return true
end

local function check_range(params)
  for _, name in ipairs({ 'line', 'limit' }) do
    local value = params[name]
    if value ~= nil and value ~= vim.NIL then
      if type(value) ~= 'number' or value < 1 or value % 1 ~= 0 then
        return name .. ': must be a positive integer'
      end
    else
      params[name] = nil
    end
  end
end

--- client/readTextFile: the file's text, from its loaded buffer (unsaved changes included) if
--- there is one, else from disk. `line` (1-based) and `limit` (a line count) select lines.
function M.read_text_file(params)
  if type(params.path) ~= 'string' or params.path == '' then
    return invalid('path: Field required')
  end
  local range_error = check_range(params)
  if range_error then
    return invalid(range_error)
  end
  local path = absolute(params.path)
  local buf = M.find_buffer(path)
  local lines, final_newline
  if buf then
    lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    if #lines == 1 and lines[1] == '' then
      lines = {}
    end
    local bo = vim.bo[buf]
    final_newline = bo.eol or (bo.fixeol and not bo.binary)
  else
    local data, err = read_file(path)
    if not data then
      return fail('InternalError', tostring(err))
    end
    if data == '' then
      return { content = '' }
    end
    lines, final_newline = split_lines(data)
  end
  return { content = slice(lines, final_newline, params.line, params.limit) }
end

-- Replace the buffer's text with `lines`, touching only the lines that differ, as one undo step.
local function set_buffer_lines(buf, lines)
  local old = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local top = 0
  while top < #old and top < #lines and old[top + 1] == lines[top + 1] do
    top = top + 1
  end
  local bottom = 0
  while
    bottom < #old - top
    and bottom < #lines - top
    and old[#old - bottom] == lines[#lines - bottom]
  do
    bottom = bottom + 1
  end
  if top == #old and top == #lines then
    return
  end
  local replacement = vim.list_slice(lines, top + 1, #lines - bottom)
  vim.api.nvim_buf_call(buf, function()
    -- Close the undo block in progress so that `u` undoes exactly this write.
    vim.cmd('let &undolevels = &undolevels')
  end)
  vim.api.nvim_buf_set_lines(buf, top, #old - bottom, false, replacement)
end

--- client/writeTextFile: replace the file's text. A loaded buffer is changed (one undoable
--- change, not saved); otherwise the file is written, parent directories created.
function M.write_text_file(params)
  if type(params.path) ~= 'string' or params.path == '' then
    return invalid('path: Field required')
  end
  if type(params.content) ~= 'string' then
    return invalid('content: Field required')
  end
  local path = absolute(params.path)
  local buf = M.find_buffer(path)
  if buf then
    if not vim.bo[buf].modifiable then
      return fail('InternalError', 'the buffer for ' .. path .. " is not 'modifiable'")
    end
    local lines, final_newline = split_lines(params.content)
    if params.content == '' then
      lines, final_newline = { '' }, true
    end
    set_buffer_lines(buf, lines)
    if vim.bo[buf].eol ~= final_newline then
      vim.bo[buf].eol = final_newline
    end
  else
    local ok, err = write_file(path, params.content)
    if not ok then
      return fail('InternalError', tostring(err))
    end
  end
  return vim.empty_dict()
end

-- A scratch split showing what the tool is about to do; returns its window (or nil).
local function open_preview(params)
  local preview = type(params.preview) == 'table' and params.preview or {}
  local lines, filetype
  if preview.kind == 'diff' and type(preview.diff) == 'string' then
    lines, filetype = vim.split(preview.diff, '\n', { plain = true }), 'diff'
  elseif preview.kind == 'command' and type(preview.command) == 'string' then
    lines = vim.split(preview.command, '\n', { plain = true })
    if #lines < 2 then
      return nil -- fits in the prompt
    end
    filetype = 'sh'
  else
    return nil
  end
  if lines[#lines] == '' then
    table.remove(lines)
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = filetype
  pcall(vim.api.nvim_buf_set_name, buf, 'tiller://preview/' .. tostring(params.toolCallId or buf))
  local height = math.min(#lines, M.config.preview_height)
  vim.cmd(string.format('botright %dsplit', math.max(height, 1)))
  local win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(win, buf)
  vim.cmd('redraw')
  return win
end

local function one_line(text, max)
  text = tostring(text):gsub('\n', ' ⏎ ')
  if #text > max then
    text = text:sub(1, max) .. '…'
  end
  return text
end

--- The question asked for a permission request.
function M.permission_prompt(params)
  local preview = type(params.preview) == 'table' and params.preview or {}
  local tool = tostring(params.toolName or 'a tool')
  if preview.kind == 'diff' then
    return string.format('Tiller: allow %s to change %s?', tool, tostring(preview.path))
  elseif preview.kind == 'command' then
    local where = preview.cwd and (' in ' .. tostring(preview.cwd)) or ''
    return string.format('Tiller: run `%s`%s?', one_line(preview.command, 120), where)
  end
  local because = ''
  if type(params.reason) == 'string' and params.reason ~= '' then
    because = ' (' .. one_line(params.reason, 160) .. ')'
  end
  if preview.kind == 'path' then
    return string.format('Tiller: allow %s on %s?%s', tool, tostring(preview.path), because)
  end
  return string.format('Tiller: allow %s?%s', tool, because)
end

local function inputlist_choice(prompt, options)
  local choices = { prompt }
  for i, option in ipairs(options) do
    table.insert(choices, string.format('%d: %s', i, M.PERMISSION_LABELS[option] or option))
  end
  local index = vim.fn.inputlist(choices)
  return options[index]
end

local warned_async = false

-- Questions waiting for an asynchronous picker: token -> function that gives up on it.
local waiting_questions = {}
local next_token = 0

--- Give up on every question still waiting for an asynchronous picker (they answer
--- rejectOnce). Called when the server sends $/cancelRequest: it stopped waiting (the run was
--- aborted or the permission timeout passed) and ignores a late answer.
function M.cancel_pending()
  local cancels = waiting_questions
  waiting_questions = {}
  for _, cancel in pairs(cancels) do
    cancel()
  end
end

-- Ask with vim.ui.select. A synchronous picker (the built-in one) answers before it returns. An
-- asynchronous one (telescope, dressing, fzf-lua...) is waited for by yielding when the handler
-- runs in a coroutine (newer Neovim); where it cannot yield (Neovim 0.7-0.9) the answer must be
-- sent before returning, so the question is asked again with inputlist().
local function select_choice(prompt, options)
  local answered, choice, waiting = false, nil, nil
  local windows_before = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    windows_before[win] = true
  end
  vim.ui.select(options, {
    prompt = prompt,
    kind = 'tiller.permission',
    format_item = function(option)
      return M.PERMISSION_LABELS[option] or option
    end,
  }, function(item)
    if answered then
      return
    end
    answered, choice = true, item
    if waiting then
      vim.schedule(function()
        coroutine.resume(waiting)
      end)
    end
  end)
  if answered then
    return choice
  end
  local co = coroutine.running()
  -- LuaJIT can yield across the dispatcher's pcall; plain Lua 5.1 (no isyieldable) cannot.
  local yieldable = co ~= nil and coroutine.isyieldable ~= nil and coroutine.isyieldable()
  if yieldable then
    waiting = co
    next_token = next_token + 1
    local token = next_token
    waiting_questions[token] = function()
      if not answered then
        answered = true
        vim.schedule(function()
          coroutine.resume(co)
        end)
      end
    end
    coroutine.yield()
    waiting_questions[token] = nil
    return choice
  end
  answered = true -- a late answer from the picker is ignored
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if not windows_before[win] and vim.api.nvim_win_get_config(win).relative ~= '' then
      pcall(vim.api.nvim_win_close, win, true) -- the picker's floating window
    end
  end
  if not warned_async then
    warned_async = true
    vim.notify(
      'tiller: this Neovim cannot wait for an asynchronous vim.ui.select; asking with '
        .. "inputlist() (set permission_ui = 'inputlist' to skip the picker)",
      vim.log.levels.WARN
    )
  end
  return inputlist_choice(prompt, options)
end

--- client/requestPermission: show what the tool will do (a diff in a scratch split), ask which
--- option applies, answer {outcome}. A cancelled question answers rejectOnce.
function M.request_permission(params)
  local options = {}
  if type(params.options) == 'table' then
    for _, option in ipairs(params.options) do
      if type(option) == 'string' then
        table.insert(options, option)
      end
    end
  end
  if #options == 0 then
    options = vim.deepcopy(M.PERMISSION_OPTIONS)
  end
  local prompt = M.permission_prompt(params)
  local previous_win = vim.api.nvim_get_current_win()
  local ok_preview, preview_win = pcall(open_preview, params)
  if not ok_preview then
    preview_win = nil
  end
  local ok, choice
  if M.config.permission_ui == 'inputlist' then
    ok, choice = pcall(inputlist_choice, prompt, options)
  else
    ok, choice = pcall(select_choice, prompt, options)
  end
  if preview_win and vim.api.nvim_win_is_valid(preview_win) then
    pcall(vim.api.nvim_win_close, preview_win, true)
  end
  if vim.api.nvim_win_is_valid(previous_win) then
    pcall(vim.api.nvim_set_current_win, previous_win)
  end
  if not ok then
    error(choice, 0)
  end
  if not vim.tbl_contains(options, choice) then
    choice = 'rejectOnce' -- cancelled
  end
  pcall(M.on_answered, params.toolCallId, choice)
  return { outcome = choice }
end

--- The server stopped waiting for its request `id` (nil: for all of them).
function M.cancel(_id)
  M.cancel_pending()
end

M.methods = {
  ['client/readTextFile'] = M.read_text_file,
  ['client/writeTextFile'] = M.write_text_file,
}

M.async_methods = {
  ['client/requestPermission'] = function(params, reply)
    reply(M.request_permission(params))
  end,
}

return M
