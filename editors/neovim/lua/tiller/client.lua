-- tiller.client: the connection to one `tiller` server process.
--
-- The server is spawned with vim.lsp.rpc.start (LSP framing, integer ids), which exists from
-- Neovim 0.7 on. This module owns the process: it sends `initialize` first and holds other
-- requests until that is answered, hands every `agent/event` notification to the registered
-- listeners, answers the server's requests (client/*) through tiller.handlers, and fails the
-- pending requests when the process exits (vim.lsp.rpc drops their callbacks silently).

local handlers = require('tiller.handlers')

local M = {}

M.CLIENT_INFO = { name = 'tiller.nvim', version = '0.1.0' }

--- The code of the error given to pending requests when the server goes away.
M.EXITED = -32099

local uv = vim.uv or vim.loop

local state = {
  rpc = nil, -- the vim.lsp.rpc client object
  pid = nil,
  ready = false, -- `initialize` has been answered
  queue = {}, -- requests waiting for `initialize`: {method, params, callback}
  pending = {}, -- request id -> callback, until answered
  running = false, -- between agent_start and agent_settled
  stopping = false, -- M.stop() was called
  server_info = nil, -- the `initialize` result
}

local listeners = {}
local next_listener = 0

--- Register fn(event) for every `agent/event` notification (its params). Returns an id for
--- remove_listener. Listeners run on the main loop; an error in one is reported, not raised.
function M.add_listener(fn)
  next_listener = next_listener + 1
  listeners[next_listener] = fn
  return next_listener
end

function M.remove_listener(id)
  listeners[id] = nil
end

local exit_listeners = {}

--- Register fn(code, signal, stopped) for when the server process exits; `stopped` is true
--- when M.stop() asked for it.
function M.on_exit(fn)
  table.insert(exit_listeners, fn)
end

local function report(what, err)
  vim.notify(string.format('tiller: %s: %s', what, tostring(err)), vim.log.levels.ERROR)
end

local function emit(event)
  if type(event) ~= 'table' then
    return
  end
  if event.type == 'agent_start' then
    state.running = true
  elseif event.type == 'agent_settled' then
    state.running = false
  end
  for _, fn in pairs(listeners) do
    local ok, err = pcall(fn, event)
    if not ok then
      report('event listener failed', err)
    end
  end
end

local function on_notification(method, params)
  if method == 'agent/event' then
    emit(params)
  elseif method == '$/cancelRequest' then
    -- The server stopped waiting for one of its requests; only a question still open in an
    -- asynchronous picker can be pending (the other handlers answer at once).
    handlers.cancel_pending()
  end
end

local function method_not_found(method)
  local protocol = require('vim.lsp.protocol')
  return vim.lsp.rpc.rpc_response_error(
    protocol.ErrorCodes.MethodNotFound,
    'tiller.nvim does not handle ' .. tostring(method)
  )
end

-- Runs synchronously on the main loop (vim.lsp.rpc schedules it); the return values are the
-- response. Newer Neovim versions run it inside a coroutine, which handlers may yield.
local function on_server_request(method, params)
  local handler = handlers.methods[method]
  if not handler then
    return nil, method_not_found(method)
  end
  local ok, result, err = pcall(handler, params or {})
  if not ok then
    local protocol = require('vim.lsp.protocol')
    return nil, vim.lsp.rpc.rpc_response_error(protocol.ErrorCodes.InternalError, tostring(result))
  end
  if result == nil and err == nil then
    result = vim.NIL
  end
  return result, err
end

--- Answer one server request as the dispatcher does: result, or nil and an error object.
M.handle_server_request = on_server_request

local function reset()
  local pending = state.pending
  local stopped = state.stopping
  state.rpc, state.pid, state.ready = nil, nil, false
  state.queue, state.pending = {}, {}
  state.running, state.stopping, state.server_info = false, false, nil
  return pending, stopped
end

-- Called by vim.lsp.rpc from the libuv exit callback (not on the main loop in 0.7).
local function on_exit(rpc, code, signal)
  vim.schedule(function()
    if state.rpc ~= rpc then
      return -- an older process, already forgotten
    end
    local queue = state.queue
    local pending, stopped = reset()
    local message = string.format('tiller exited (code %s, signal %s)', code, signal)
    for _, callback in pairs(pending) do
      pcall(callback, { code = M.EXITED, message = message, exited = true }, nil)
    end
    for _, queued in ipairs(queue) do
      pcall(queued[3], { code = M.EXITED, message = message, exited = true }, nil)
    end
    for _, fn in ipairs(exit_listeners) do
      local ok, err = pcall(fn, code, signal, stopped)
      if not ok then
        report('exit listener failed', err)
      end
    end
  end)
end

-- vim.lsp.rpc.start(cmd, dispatchers, extra) takes the command as a list from Neovim 0.10 on;
-- before, start(cmd, cmd_args, dispatchers, extra).
local function list_style_start()
  local info = debug.getinfo(vim.lsp.rpc.start, 'u')
  if info and info.nparams then
    return info.nparams < 4
  end
  return vim.fn.has('nvim-0.10') == 1
end

local function spawn(config)
  local argv = {}
  local cmd = config.cmd
  if type(cmd) == 'string' then
    cmd = { cmd }
  end
  vim.list_extend(argv, cmd or { 'tiller' })
  vim.list_extend(argv, config.args or {})
  local extra = { cwd = config.cwd or vim.fn.getcwd(), env = config.env }
  local rpc
  local dispatchers = {
    notification = on_notification,
    server_request = on_server_request,
    on_exit = function(code, signal)
      on_exit(rpc, code, signal)
    end,
    on_error = function(code, err)
      local name = vim.lsp.rpc.client_errors[code] or tostring(code)
      vim.schedule(function()
        report('rpc error ' .. name, vim.inspect(err))
      end)
    end,
  }
  local ok, result
  if list_style_start() then
    ok, result = pcall(vim.lsp.rpc.start, argv, dispatchers, extra)
  else
    ok, result = pcall(vim.lsp.rpc.start, argv[1], vim.list_slice(argv, 2), dispatchers, extra)
  end
  if not ok then
    return nil, tostring(result)
  end
  if not result then
    return nil, string.format('could not start `%s` (is it installed and on PATH?)', argv[1])
  end
  rpc = result
  return rpc
end

-- Send now (the rpc object exists); callback(err, result) exactly once.
local function send_request(method, params, callback)
  local rpc = state.rpc
  local id
  local ok, sent, message_id = pcall(rpc.request, method, params, function(err, result)
    if id then
      state.pending[id] = nil
    end
    callback(err, result)
  end)
  if not ok or not sent then
    callback({ code = M.EXITED, message = 'tiller is not running', exited = true }, nil)
    return nil
  end
  id = message_id
  state.pending[id] = callback
  return id
end

--- True while a server process is alive.
function M.is_alive()
  return state.rpc ~= nil
end

--- True between agent_start and agent_settled.
function M.is_running()
  return state.running
end

--- The server's pid, or nil.
function M.pid()
  return state.pid
end

--- The `initialize` result, once the server answered it.
function M.server_info()
  return state.server_info
end

--- Start the server unless it runs. config: {cmd, args, cwd, env}. Returns true, or false and
--- a message. `initialize` is sent at once; requests made before its answer wait for it.
function M.start(config)
  if state.rpc then
    return true
  end
  local rpc, err = spawn(config or {})
  if not rpc then
    return false, err
  end
  state.rpc = rpc
  state.pid = rpc.pid
  handlers.set_cwd(config.cwd or vim.fn.getcwd())
  local params = {
    clientInfo = M.CLIENT_INFO,
    capabilities = {
      permissions = true,
      fs = { readTextFile = true, writeTextFile = true },
    },
  }
  send_request('initialize', params, function(init_err, result)
    if state.rpc ~= rpc then
      return
    end
    if init_err then
      report('initialize failed', init_err.message or vim.inspect(init_err))
    else
      state.server_info = result
    end
    state.ready = true
    local queue = state.queue
    state.queue = {}
    for _, queued in ipairs(queue) do
      send_request(queued[1], queued[2], queued[3])
    end
  end)
  return true
end

--- Send a request; callback(err, result) is called exactly once, on the main loop. err is the
--- JSON-RPC error object ({code, message}); when the server is not running or exits first it
--- has `exited = true`. params nil or empty is sent as {}.
function M.request(method, params, callback)
  callback = callback or function() end
  if params == nil or (type(params) == 'table' and next(params) == nil) then
    params = vim.empty_dict()
  end
  if not state.rpc then
    vim.schedule(function()
      callback({ code = M.EXITED, message = 'tiller is not running', exited = true }, nil)
    end)
    return
  end
  if state.ready then
    send_request(method, params, callback)
  else
    table.insert(state.queue, { method, params, callback })
  end
end

--- Send a notification (no answer).
function M.notify(method, params)
  if state.rpc then
    state.rpc.notify(method, params or vim.empty_dict())
  end
end

local function kill(rpc)
  if rpc.terminate then
    pcall(rpc.terminate)
  elseif rpc.handle and not rpc.handle:is_closing() then
    pcall(uv.process_kill, rpc.handle, 'sigterm')
  elseif rpc.pid then
    pcall(uv.kill, rpc.pid, 'sigterm')
  end
end

--- Stop the server. A run in progress is aborted first and the server gets SIGTERM once the
--- run has settled, so that the processes its tools started are killed (`agent/abort` kills
--- their process groups; a SIGTERM alone would leave them running). `timeout_ms` (default
--- 5000) bounds the wait. Returns false when no server runs.
function M.stop(timeout_ms)
  local rpc = state.rpc
  if not rpc then
    return false
  end
  state.stopping = true
  if not state.running then
    kill(rpc)
    return true
  end
  local killed, listener = false, nil
  local function finish()
    if listener then
      M.remove_listener(listener)
      listener = nil
    end
    if not killed then
      killed = true
      kill(rpc)
    end
  end
  listener = M.add_listener(function(event)
    if event.type == 'agent_settled' then
      vim.schedule(finish)
    end
  end)
  M.request('agent/abort', nil, function(err)
    if err then
      finish() -- nothing to abort (or no answer): stop now
    end
  end)
  vim.defer_fn(finish, timeout_ms or 5000)
  return true
end

return M
