-- tiller.diagnostics: answers client/getDiagnostics, the server asking what the language servers
-- say of the files the agent is about to change and has just changed.
--
--   client/getDiagnostics {sessionId, toolCallId?, paths, timeoutMs}
--     -> {files = {{path, diagnostics = {{line, column, endLine, endColumn, severity, message,
--                                         source?, code?}}}}}   (lines and columns 1-based)
--
-- Each file's buffer is loaded if it is not (hidden, unlisted: its FileType autocommands attach
-- its language servers as for :edit). The answer waits, for each buffer, until its diagnostics
-- are newer than its text (a `DiagnosticChanged` after the last change of its lines), then for a
-- quiet moment (QUIET_MS without another one: servers publish in several passes), and answers
-- with `vim.diagnostic.get`. A buffer whose lines did not change since they were first followed
-- (the first request about it) has current diagnostics; one no language server is attached to
-- is answered at once (one just loaded gets ATTACH_MS for its servers to attach). Whatever
-- happens, the answer goes out before `timeoutMs`, with what there is by then. Requiring this
-- module starts following `DiagnosticChanged` (tiller.client does, at start). Written against
-- Neovim 0.7's API.

local handlers = require('tiller.handlers')

local M = {}

local uv = vim.uv or vim.loop

M.QUIET_MS = 300
M.ATTACH_MS = 1000
M.POLL_MS = 50
M.MARGIN_MS = 150 -- answered this long before timeoutMs, so the reply arrives in time

local SEVERITIES = { 'error', 'warning', 'information', 'hint' }

local seq = 0 -- orders text changes and diagnostics of all buffers
local text_seq = {} -- buf -> seq of its last line change seen
local diag_seq = {} -- buf -> seq of its last DiagnosticChanged
local diag_time = {} -- buf -> uv.now() of its last DiagnosticChanged
local watched = {} -- buf -> true once its line changes are followed

local function tick()
  seq = seq + 1
  return seq
end

local group = vim.api.nvim_create_augroup('TillerDiagnostics', { clear = true })
vim.api.nvim_create_autocmd('DiagnosticChanged', {
  group = group,
  callback = function(args)
    local buf = args.buf
    if buf then
      diag_seq[buf] = tick()
      diag_time[buf] = uv.now()
    end
  end,
})

local function watch(buf)
  if watched[buf] then
    return
  end
  watched[buf] = vim.api.nvim_buf_attach(buf, false, {
    on_lines = function(_, changed)
      text_seq[changed] = tick()
    end,
    on_detach = function(_, gone)
      watched[gone], text_seq[gone], diag_seq[gone], diag_time[gone] = nil, nil, nil, nil
    end,
  }) or nil
end

local function has_servers(buf)
  if vim.lsp.get_clients then -- 0.10+
    return #vim.lsp.get_clients({ bufnr = buf }) > 0
  end
  return next(vim.lsp.buf_get_clients(buf)) ~= nil
end

-- The buffer of `path`, loaded (and whether it was loaded now).
local function load(path)
  local buf = handlers.find_buffer(path)
  if buf then
    return buf, false
  end
  buf = vim.fn.bufadd(path)
  vim.fn.bufload(buf)
  return buf, true
end

-- Whether `file`'s diagnostics can be answered now.
local function settled(file, now)
  local buf = file.buf
  if not vim.api.nvim_buf_is_loaded(buf) then
    return true
  end
  local changed, published = text_seq[buf], diag_seq[buf]
  if published and published > (changed or 0) then
    return now - diag_time[buf] >= M.QUIET_MS
  end
  if not changed and not file.loaded_now then
    return true -- nothing changed since it is followed: what it has is current
  end
  if has_servers(buf) then
    return false
  end
  return not file.loaded_now or now - file.since >= M.ATTACH_MS
end

local function as_item(d)
  local item = {
    line = (d.lnum or 0) + 1,
    column = (d.col or 0) + 1,
    endLine = (d.end_lnum or d.lnum or 0) + 1,
    endColumn = (d.end_col or d.col or 0) + 1,
    severity = SEVERITIES[d.severity] or 'error',
    message = tostring(d.message or ''),
  }
  if type(d.source) == 'string' and d.source ~= '' then
    item.source = d.source
  end
  if type(d.code) == 'string' or type(d.code) == 'number' then
    item.code = d.code
  end
  return item
end

local function answer(files)
  local out = {}
  for _, file in ipairs(files) do
    local items = {}
    if vim.api.nvim_buf_is_valid(file.buf) then
      for _, d in ipairs(vim.diagnostic.get(file.buf)) do
        table.insert(items, as_item(d))
      end
    end
    table.insert(out, { path = file.path, diagnostics = items })
  end
  return { files = out }
end

--- client/getDiagnostics: see the top of this file. `reply(result, err)` is called once.
function M.get(params, reply)
  local paths = params.paths
  if type(paths) ~= 'table' or vim.tbl_isempty(paths) then
    reply(nil, { code = -32602, message = 'Invalid params: paths: Field required' })
    return
  end
  local budget = tonumber(params.timeoutMs) or 3000
  local start = uv.now()
  local files = {}
  for _, path in ipairs(paths) do
    if type(path) == 'string' and path ~= '' then
      local ok, buf, loaded_now = pcall(load, path)
      if ok then
        watch(buf)
        table.insert(files, { path = path, buf = buf, loaded_now = loaded_now, since = start })
      else
        table.insert(files, { path = path, buf = -1 })
      end
    end
  end
  local timer = uv.new_timer()
  local done = false
  local function check()
    if done then
      return
    end
    local now = uv.now()
    local all = true
    for _, file in ipairs(files) do
      if file.buf ~= -1 and not settled(file, now) then
        all = false
        break
      end
    end
    if all or now - start >= budget - M.MARGIN_MS then
      done = true
      timer:stop()
      timer:close()
      local ok, result = pcall(answer, files)
      if ok then
        reply(result)
      else
        reply(nil, { code = -32603, message = tostring(result) })
      end
    end
  end
  timer:start(0, M.POLL_MS, vim.schedule_wrap(check))
end

return M
