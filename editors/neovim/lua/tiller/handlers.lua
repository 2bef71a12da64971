-- tiller.handlers: answers to the requests the server sends the editor.
--
--   client/readTextFile     {sessionId, path, line?, limit?}   -> {content}
--   client/writeTextFile    {sessionId, path, content}         -> {}
--   client/requestPermission: asked in the chat (tiller.review), answered when the user does
--   client/elicit, client/openUrl: an MCP server's questions and sign-in pages (tiller.mcp_ask)
--   client/getDiagnostics   {sessionId, paths, timeoutMs}      -> {files}  (tiller.diagnostics)
--
-- Each handler of M.methods returns `result` or `nil, err` (err a JSON-RPC error object); those
-- of M.async_methods get a `reply(result, err)` to call when the answer is known. Files are
-- read from and written to the loaded buffer when there is one, so the agent sees unsaved
-- edits and its writes can be undone.
-- Relative paths resolve against the server's working directory.

local messages = require('tiller.messages')

local M = {}

local uv = vim.uv or vim.loop

M.config = {
  save_edits = true, -- save a loaded buffer after the agent changed it
}

--- Called with (path) after the agent changed a loaded buffer that stays unsaved
--- (save_edits = false); tiller.init points it at the chat.
M.on_kept_unsaved = function() end

local cwd = nil

--- The directory relative paths resolve against (the server's cwd).
function M.set_cwd(dir)
  cwd = dir
  require('tiller.review').set_cwd(dir)
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
  -- The user allowed this change: no "W10: Warning: Changing a readonly file" on top of it
  -- (two messages at once raise the hit-enter prompt). Saving such a buffer still fails.
  local readonly = vim.bo[buf].readonly
  vim.bo[buf].readonly = false
  local ok, err = pcall(vim.api.nvim_buf_set_lines, buf, top, #old - bottom, false, replacement)
  vim.bo[buf].readonly = readonly
  if not ok then
    error(err, 0)
  end
end

-- Save `buf` as :write would; a failure is shown, not raised (the change itself was made).
local function save(buf, path)
  local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
    vim.cmd('silent write')
  end)
  if not ok then
    local why = tostring(err):match('E%d+: .*') or tostring(err) -- Vim's error, not the wrapper's
    local name = vim.fn.fnamemodify(path, ':~:.')
    messages.show(string.format('changed %s but could not save it: %s', name, why),
      vim.log.levels.ERROR)
  end
end

--- client/writeTextFile: replace the file's text. A loaded buffer is changed (one undoable
--- change) and, with save_edits (the default), saved, so that the agent's shell sees what its
--- edits did; otherwise the file is written, parent directories created.
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
    if M.config.save_edits then
      save(buf, path)
    else
      pcall(M.on_kept_unsaved, path)
    end
  else
    local ok, err = write_file(path, params.content)
    if not ok then
      return fail('InternalError', tostring(err))
    end
  end
  return vim.empty_dict()
end

--- The server stopped waiting for its request `id` (nil: for all of them).
function M.cancel(id)
  require('tiller.review').cancel(id)
end

M.methods = {
  ['client/readTextFile'] = M.read_text_file,
  ['client/writeTextFile'] = M.write_text_file,
}

M.async_methods = {
  ['client/requestPermission'] = function(params, reply, id)
    require('tiller.review').ask(params, reply, id)
  end,
  ['client/elicit'] = function(params, reply)
    require('tiller.mcp_ask').elicit(params, reply)
  end,
  ['client/openUrl'] = function(params, reply)
    require('tiller.mcp_ask').open_url(params, reply)
  end,
  ['client/getDiagnostics'] = function(params, reply)
    require('tiller.diagnostics').get(params, reply)
  end,
}

return M
