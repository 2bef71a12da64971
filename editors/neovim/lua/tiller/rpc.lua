-- tiller.rpc: JSON-RPC 2.0 with a child process over its stdin/stdout, on vim.loop (libuv).
--
-- Messages are framed as in LSP (`Content-Length: N\r\n\r\n` then N bytes of JSON). Requests
-- sent get integer ids; requests received (server -> client) are handed to `on_request` with a
-- `reply` function that may be called at any later time, exactly once. The last lines the
-- process wrote to stderr are kept, so that a failed start can say why. Works from Neovim 0.7
-- on (no vim.system, no vim.lsp.rpc).
--
--   local conn, err = rpc.spawn({ 'tiller' }, {
--     cwd = dir, env = { KEY = 'value' },          -- env adds to Neovim's environment
--     on_notification = function(method, params) end,
--     on_request = function(method, params, reply, id) reply(result) end, -- or reply(nil, err)
--     on_exit = function(code, signal) end,         -- after the last message was delivered
--   })
--   conn.request('initialize', params, function(err, result) end)
--
-- Every callback runs on the main loop (scheduled), never in a libuv callback.

local messages = require('tiller.messages')

local M = {}

local uv = vim.uv or vim.loop

--- The code of the error given to pending requests when the process exits first.
M.EXITED = -32099

M.STDERR_LINES = 40 -- how many lines of stderr are kept

-- The environment for uv.spawn (a list of KEY=VALUE replacing the whole environment):
-- Neovim's own, with `extra` added.
local function environment(extra)
  if not extra then
    return nil
  end
  local env = vim.fn.environ()
  for key, value in pairs(extra) do
    env[key] = tostring(value)
  end
  local list = {}
  for key, value in pairs(env) do
    table.insert(list, key .. '=' .. value)
  end
  return list
end

-- A decoder of the Content-Length framed stream: feed(chunk) returns the complete bodies.
local function framer()
  local buffer = ''
  return function(chunk)
    buffer = buffer .. chunk
    local bodies = {}
    while true do
      local header_end = buffer:find('\r\n\r\n', 1, true)
      if not header_end then
        break
      end
      local header = buffer:sub(1, header_end - 1)
      local length = tonumber(header:lower():match('content%-length:%s*(%d+)'))
      if not length then
        -- Not a header we understand: drop it and resynchronise on the next one.
        buffer = buffer:sub(header_end + 4)
      elseif #buffer < header_end + 3 + length then
        break
      else
        table.insert(bodies, buffer:sub(header_end + 4, header_end + 3 + length))
        buffer = buffer:sub(header_end + 4 + length)
      end
    end
    return bodies
  end
end

M.framer = framer

local function encode(message)
  local body = vim.json.encode(message)
  return string.format('Content-Length: %d\r\n\r\n%s', #body, body)
end

--- Start `argv` (a list) and speak JSON-RPC with it. Returns the connection, or nil and a
--- message when the process cannot be started. The connection:
---   request(method, params, callback) -> id; callback(err, result) once (err is
---     {code, message, data?}; {code = EXITED, exited = true} when the process went away)
---   notify(method, params)
---   kill(signal)              -- default 'sigterm'; nothing once it exited
---   stderr_tail() -> lines    -- the last M.STDERR_LINES lines written to stderr
---   pid, alive()
function M.spawn(argv, opts)
  opts = opts or {}
  local on_notification = opts.on_notification or function() end
  local on_request = opts.on_request
  local on_exit = opts.on_exit or function() end
  local stdin, stdout, stderr = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
  local conn = { pending = {} }
  local next_id = 0
  local exit_code, exit_signal = nil, nil
  local exited, finished = false, false
  local stderr_lines, stderr_partial = {}, ''

  local function close_all()
    for _, pipe in ipairs({ stdin, stdout, stderr }) do
      if not pipe:is_closing() then
        pipe:close()
      end
    end
  end

  -- Called on the main loop once the process exited and its output was read to the end.
  local function finish()
    if finished then
      return
    end
    finished = true
    if stderr_partial ~= '' then
      table.insert(stderr_lines, stderr_partial)
      stderr_partial = ''
    end
    local pending = conn.pending
    conn.pending = {}
    local message = string.format('the process exited (code %s, signal %s)', exit_code, exit_signal)
    for _, callback in pairs(pending) do
      pcall(callback, { code = M.EXITED, message = message, exited = true }, nil)
    end
    on_exit(exit_code, exit_signal)
  end

  local function send(message)
    if finished or stdin:is_closing() then
      return false
    end
    stdin:write(encode(message))
    return true
  end

  local function handle(body)
    local ok, message = pcall(vim.json.decode, body, { luanil = { object = true, array = true } })
    if not ok or type(message) ~= 'table' then
      return -- not JSON: ignored, as the server ignores what it cannot parse
    end
    if message.method ~= nil and message.id ~= nil then
      local id, answered = message.id, false
      local function reply(result, err)
        if answered then
          return
        end
        answered = true
        if err then
          send({ jsonrpc = '2.0', id = id, error = err })
        else
          send({ jsonrpc = '2.0', id = id, result = result == nil and vim.NIL or result })
        end
      end
      if on_request then
        on_request(message.method, message.params, reply, id)
      else
        reply(nil, { code = -32601, message = 'no method ' .. tostring(message.method) })
      end
    elseif message.method ~= nil then
      on_notification(message.method, message.params)
    elseif message.id ~= nil then
      local callback = conn.pending[message.id]
      conn.pending[message.id] = nil
      if callback then
        if message.error ~= nil then
          callback(message.error, nil)
        else
          callback(nil, message.result)
        end
      end
    end
  end

  local feed = framer()
  local function deliver(chunk)
    for _, body in ipairs(feed(chunk)) do
      local ok, err = pcall(handle, body)
      if not ok then
        messages.show('error handling a message: ' .. tostring(err), vim.log.levels.ERROR)
      end
    end
  end

  -- The process is finished with once it exited and both its stdout and its stderr were read
  -- to the end. libuv may call back with neither data nor error when a read would block (luv
  -- passes nil, nil, as at end of file), so such a read ends a stream only once the process
  -- exited, or when it was the last read before the exit.
  local process
  local streams = { stdout = { done = false }, stderr = { done = false } }
  local function all_read()
    if finished or not exited or not (streams.stdout.done and streams.stderr.done) then
      return
    end
    close_all()
    if not process:is_closing() then
      process:close()
    end
    finish()
  end
  local function on_read(stream, consume)
    return function(err, chunk)
      vim.schedule(function()
        if stream.done then
          return
        elseif chunk then
          stream.last_empty = false
          consume(chunk)
        elseif err or exited then
          stream.done = true
          all_read()
        else
          stream.last_empty = true
        end
      end)
    end
  end

  local handle_or_err, pid = uv.spawn(argv[1], {
    args = vim.list_slice(argv, 2),
    cwd = opts.cwd,
    env = environment(opts.env),
    stdio = { stdin, stdout, stderr },
  }, function(code, signal)
    exit_code, exit_signal = code, signal
    vim.schedule(function()
      exited = true
      for _, stream in pairs(streams) do
        stream.done = stream.done or stream.last_empty
      end
      all_read()
      -- A child that inherited a pipe may keep it open: do not wait for its end for long.
      vim.defer_fn(function()
        streams.stdout.done, streams.stderr.done = true, true
        all_read()
      end, 2000)
    end)
  end)
  if not handle_or_err then
    close_all()
    return nil, string.format('could not start `%s`: %s', tostring(argv[1]), tostring(pid))
  end
  process = handle_or_err
  conn.pid = pid

  stdout:read_start(on_read(streams.stdout, deliver))
  stderr:read_start(on_read(streams.stderr, function(chunk)
    local parts = vim.split(stderr_partial .. chunk, '\n', { plain = true })
    stderr_partial = table.remove(parts)
    for _, line in ipairs(parts) do
      table.insert(stderr_lines, line)
      if #stderr_lines > M.STDERR_LINES then
        table.remove(stderr_lines, 1)
      end
    end
  end))

  function conn.request(method, params, callback)
    next_id = next_id + 1
    local id = next_id
    conn.pending[id] = callback or function() end
    if not send({ jsonrpc = '2.0', id = id, method = method, params = params }) then
      conn.pending[id] = nil
      vim.schedule(function()
        callback({ code = M.EXITED, message = 'the process is not running', exited = true }, nil)
      end)
    end
    return id
  end

  function conn.notify(method, params)
    send({ jsonrpc = '2.0', method = method, params = params })
  end

  function conn.kill(signal)
    if not process:is_closing() then
      pcall(uv.process_kill, process, signal or 'sigterm')
    end
  end

  function conn.alive()
    return not finished
  end

  function conn.stderr_tail()
    local lines = vim.deepcopy(stderr_lines)
    if stderr_partial ~= '' then
      table.insert(lines, stderr_partial)
    end
    return lines
  end

  return conn
end

return M
