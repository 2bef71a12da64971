-- tiller.client: the connection to one `tiller` server process.
--
-- The server is spawned with tiller.rpc (JSON-RPC over libuv pipes). This module owns the
-- process: it sends `initialize` first and holds other requests until that is answered, hands
-- every `agent/event` notification to the registered listeners, answers the server's requests
-- (client/*) through tiller.handlers (a permission question whenever the user answers it), and
-- fails the pending requests when the process exits.

local messages = require('tiller.messages')
local handlers = require('tiller.handlers')
local rpc_mod = require('tiller.rpc')

local M = {}

M.CLIENT_INFO = { name = 'tiller.nvim', version = '0.1.0' }

--- The code of the error given to pending requests when the server goes away.
M.EXITED = -32099

local state = {
  rpc = nil, -- the tiller.rpc connection
  pid = nil,
  ready = false, -- `initialize` has been answered
  queue = {}, -- requests waiting for `initialize`: {method, params, callback}
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

--- Register fn(code, signal, stopped, stderr) for when the server process exits; `stopped` is
--- true when M.stop() asked for it, `stderr` the last lines the server wrote there.
function M.on_exit(fn)
  table.insert(exit_listeners, fn)
end

local function report(what, err)
  messages.show(string.format('%s: %s', what, tostring(err)), vim.log.levels.ERROR)
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
    -- The server stopped waiting for one of its requests (the run was aborted or the
    -- permission timeout passed): a question still shown must go.
    handlers.cancel(type(params) == 'table' and params.id or nil)
  end
end

-- A server request: answered through `reply(result, err)`, now or (a permission question)
-- whenever the user answers.
local function on_server_request(method, params, reply, id)
  local later = handlers.async_methods[method]
  if later then
    local ok, err = pcall(later, params or {}, reply, id)
    if not ok then
      reply(nil, { code = -32603, message = tostring(err) })
    end
    return
  end
  local handler = handlers.methods[method]
  if not handler then
    reply(nil, { code = -32601, message = 'tiller.nvim does not handle ' .. tostring(method) })
    return
  end
  local ok, result, err = pcall(handler, params or {})
  if not ok then
    reply(nil, { code = -32603, message = tostring(result) })
  elseif err then
    reply(nil, err)
  else
    reply(result == nil and vim.NIL or result)
  end
end

--- Answer one server request as the dispatcher does: reply(result, err) is called once.
M.handle_server_request = on_server_request

local function reset()
  local stopped = state.stopping
  state.rpc, state.pid, state.ready = nil, nil, false
  state.queue = {}
  state.running, state.stopping, state.server_info = false, false, nil
  return stopped
end

-- The process exited and its last message was handled (tiller.rpc calls this on the main loop).
local function on_exit(rpc, code, signal)
  if state.rpc ~= rpc then
    return -- an older process, already forgotten
  end
  local queue = state.queue
  local stopped = reset()
  handlers.cancel(nil)
  local message = string.format('tiller exited (code %s, signal %s)', code, signal)
  for _, queued in ipairs(queue) do
    pcall(queued[3], { code = M.EXITED, message = message, exited = true }, nil)
  end
  local stderr = rpc.stderr_tail()
  for _, fn in ipairs(exit_listeners) do
    local ok, err = pcall(fn, code, signal, stopped, stderr)
    if not ok then
      report('exit listener failed', err)
    end
  end
end

local function spawn(config)
  local argv = {}
  local cmd = config.cmd
  if type(cmd) == 'string' then
    cmd = { cmd }
  end
  vim.list_extend(argv, cmd or { 'tiller' })
  vim.list_extend(argv, config.args or {})
  local conn
  local result, err = rpc_mod.spawn(argv, {
    cwd = config.cwd or vim.fn.getcwd(),
    env = config.env,
    on_notification = on_notification,
    on_request = on_server_request,
    on_exit = function(code, signal)
      on_exit(conn, code, signal)
    end,
  })
  if not result then
    return nil, err .. ' (is it installed and on PATH?)'
  end
  conn = result
  return conn
end

-- Send now (the connection exists); callback(err, result) exactly once (tiller.rpc fails it
-- when the process exits first).
local function send_request(method, params, callback)
  return state.rpc.request(method, params, callback)
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

--- Start the server unless it runs. config: {cmd, args, cwd, env, keeps_unsaved}. Returns true, or false and
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
      fs = {
        readTextFile = true,
        writeTextFile = true,
        keepsUnsaved = config.keeps_unsaved == true,
      },
      elicitation = { form = true, url = true },
      openUrl = true,
      diagnostics = true,
    },
  }
  require('tiller.diagnostics') -- follows DiagnosticChanged from now on
  send_request('initialize', params, function(init_err, result)
    if state.rpc ~= rpc or (init_err and init_err.exited) then
      return -- on_exit fails the queued requests
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
  rpc.kill('sigterm')
end

--- Stop the server. A run in progress is aborted first and the server gets SIGTERM once the
--- run has settled, so that the processes its tools started are killed (`agent/abort` kills
--- their process groups; a SIGTERM alone would leave them running). `timeout_ms` (default
--- 5000) bounds the wait; `abort_params` are agent/abort's (the session). Returns false when
--- no server runs.
function M.stop(timeout_ms, abort_params)
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
  M.request('agent/abort', abort_params, function(err)
    if err then
      finish() -- nothing to abort (or no answer): stop now
    end
  end)
  vim.defer_fn(finish, timeout_ms or 5000)
  return true
end

return M
