-- tiller.health: `:checkhealth tiller`, the first thing to run when the server does not start.
--
-- With the options of setup() it checks: the executable and its version; the server starting
-- as the plugin starts it (which reads the config file and the arguments, and fails on a bad
-- one with a reason on stderr); the provider and model a new session would use, and whether
-- it can be used (a key, a base URL, or the local model); and bubblewrap (`bwrap`). The server
-- it starts for this (with --no-session: nothing is saved) is stopped at the end.
--
-- Neovim 0.9+ reports through vim.health.start/ok/..., 0.8 through vim.health.report_*, 0.7
-- through the health#report_* functions; Neovim 0.7 and later find this module as
-- lua/tiller/health.lua.

local rpc = require('tiller.rpc')

local M = {}

M.TIMEOUT_MS = 30000 -- the longest wait for a command or an answer

local function reporter()
  local h = vim.health
  if h and h.start then
    return h
  end
  if h and h.report_start then
    return {
      start = h.report_start,
      ok = h.report_ok,
      info = h.report_info,
      warn = h.report_warn,
      error = h.report_error,
    }
  end
  local function report(kind)
    return function(message, advice)
      if advice then
        vim.fn['health#report_' .. kind](message, advice)
      else
        vim.fn['health#report_' .. kind](message)
      end
    end
  end
  return {
    start = report('start'),
    ok = report('ok'),
    info = report('info'),
    warn = report('warn'),
    error = report('error'),
  }
end

-- Run `argv` to its end; returns its exit code (nil when it ran past timeout_ms and was
-- stopped) and the lines it printed (stdout, then stderr).
local function run(argv, timeout_ms)
  local out, err = {}, {}
  local function into(lines)
    return function(_, data)
      for _, line in ipairs(data or {}) do
        if line ~= '' then
          table.insert(lines, line)
        end
      end
    end
  end
  local ok, job = pcall(vim.fn.jobstart, argv, {
    stdin = 'null',
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = into(out),
    on_stderr = into(err),
  })
  if not ok or job <= 0 then
    return -1, { tostring(job) }
  end
  local code = vim.fn.jobwait({ job }, timeout_ms)[1]
  if code == -1 then
    vim.fn.jobstop(job)
    return nil, out
  end
  vim.list_extend(out, err)
  return code, out
end

-- The config file the server reads: --config in `args`, else the default.
local function config_file(args)
  for i, arg in ipairs(args) do
    if arg == '--config' and args[i + 1] then
      return vim.fn.fnamemodify(args[i + 1], ':p'), true
    end
    local value = arg:match('^%-%-config=(.+)$')
    if value then
      return vim.fn.fnamemodify(value, ':p'), true
    end
  end
  local base = vim.env.XDG_CONFIG_HOME
  if not base or base == '' then
    base = vim.fn.expand('~/.config')
  end
  return base .. '/tiller/config.toml', false
end

-- Start the server as the plugin does and ask it what a new session would use. Returns
-- {info, providers, session_err, state} or {start_err} / {exited = {code, signal, stderr}}.
local function ask_server(argv, cwd, env)
  local exited = nil
  local conn, spawn_err = rpc.spawn(argv, {
    cwd = cwd,
    env = env,
    on_notification = function() end,
    on_request = function(_, _, reply)
      reply(nil, { code = -32601, message = 'not answered during :checkhealth' })
    end,
    on_exit = function(code, signal)
      exited = { code = code, signal = signal }
    end,
  })
  if not conn then
    return { start_err = spawn_err }
  end
  local function call(method, params)
    local answer = nil
    conn.request(method, params or vim.empty_dict(), function(err, result)
      answer = { err = err, result = result }
    end)
    vim.wait(M.TIMEOUT_MS, function()
      return answer ~= nil
    end, 20)
    return answer or { err = { message = string.format('no answer to %s in %d s', method,
      M.TIMEOUT_MS / 1000) } }
  end
  local found = {}
  local init = call('initialize', {
    clientInfo = { name = 'tiller.nvim (:checkhealth)', version = '0.1.0' },
    capabilities = vim.empty_dict(),
  })
  if not init.err then
    found.info = init.result
    local models = call('models/list')
    found.providers = not models.err and models.result.providers or {}
    local session = call('session/new', { cwd = cwd })
    if session.err then
      found.session_err = session.err
    else
      local state = call('agent/getState', { sessionId = session.result.sessionId })
      found.state = not state.err and state.result or nil
    end
  end
  conn.kill('sigterm')
  vim.wait(M.TIMEOUT_MS, function()
    return exited ~= nil
  end, 20)
  if init.err then
    local tail = conn.stderr_tail()
    return { exited = { code = exited and exited.code, signal = exited and exited.signal,
      stderr = tail, message = init.err.message } }
  end
  return found
end

local function join(lines, max)
  local shown = {}
  for i = math.max(1, #lines - max + 1), #lines do
    table.insert(shown, lines[i])
  end
  return table.concat(shown, '\n')
end

function M.check()
  local h = reporter()
  local tiller = require('tiller')
  local config = tiller.config
  local cmd = type(config.cmd) == 'string' and { config.cmd } or vim.deepcopy(config.cmd)
  local args = config.args or {}
  local cwd = config.cwd and vim.fn.expand(config.cwd) or vim.fn.getcwd()

  h.start('tiller.nvim')
  local version = vim.version and vim.version() or nil
  if version then
    h.ok(string.format('Neovim %d.%d.%d (0.7 or newer is needed)', version.major,
      version.minor, version.patch))
  end

  -- The executable and its version.
  local exe = vim.fn.exepath(cmd[1] or '')
  if exe == '' then
    h.error(string.format('`%s` (setup cmd) is not an executable on PATH', tostring(cmd[1])), {
      'Install Tiller (`pip install .` in its repository, or pipx), or set the full path: '
        .. "require('tiller').setup({ cmd = { '/path/to/venv/bin/tiller' } })",
    })
    return
  end
  h.ok(string.format('executable: %s', exe))
  local argv = vim.deepcopy(cmd)
  table.insert(argv, '--version')
  local code, printed = run(argv, M.TIMEOUT_MS)
  if code == 0 and printed[1] then
    h.ok('version: ' .. printed[1])
  elseif code == nil then
    h.error(string.format('`%s` did not answer within %d s', table.concat(argv, ' '),
      M.TIMEOUT_MS / 1000))
    return
  else
    h.error(string.format('`%s` failed (exit %s): %s', table.concat(argv, ' '), tostring(code),
      join(printed, 5)))
    return
  end

  -- The server, started as the plugin starts it.
  local file, named = config_file(args)
  local server_argv = vim.deepcopy(cmd)
  vim.list_extend(server_argv, args)
  table.insert(server_argv, '--no-session')
  local found = ask_server(server_argv, cwd, config.env)
  if found.start_err then
    h.error('the server could not be started: ' .. tostring(found.start_err))
    return
  end
  if found.exited then
    local stderr = found.exited.stderr or {}
    h.error(string.format('the server exited at start (code %s): %s', tostring(found.exited.code),
      #stderr > 0 and join(stderr, 8) or tostring(found.exited.message)), {
      'A config file that does not parse, or a bad argument in setup args, stops it; the '
        .. 'lines above are its own reason.',
    })
    return
  end
  local server = found.info and found.info.serverInfo or {}
  h.ok(string.format('the server starts in %s: %s %s, protocol %s', cwd, tostring(server.name),
    tostring(server.version), tostring(found.info and found.info.protocolVersion)))
  if vim.fn.filereadable(file) == 1 then
    h.ok('config file: ' .. file .. ' (read without errors)')
  elseif named then
    h.error('config file: ' .. file .. ' (given with --config) cannot be read')
  else
    h.info('config file: none at ' .. file .. ' (the defaults apply)')
  end

  -- The model.
  local usable = {}
  for _, provider in ipairs(found.providers or {}) do
    if provider.configured then
      table.insert(usable, provider.name)
    end
  end
  if found.session_err then
    h.error('a new session cannot start: ' .. tostring(found.session_err.message), {
      'Set the provider\'s key in Neovim\'s environment (OPENAI_API_KEY, ANTHROPIC_API_KEY), '
        .. "or point at a local server: setup({ args = { '--base-url', "
        .. "'http://localhost:11434/v1' } })",
    })
  elseif found.state then
    h.ok(string.format('new sessions use %s/%s', tostring(found.state.provider),
      tostring(found.state.model)))
  end
  if #usable > 0 then
    h.info('providers that can be used now: ' .. table.concat(usable, ', '))
  end

  -- bubblewrap.
  local bwrap = vim.fn.exepath('bwrap')
  if bwrap ~= '' then
    h.ok('bubblewrap: ' .. bwrap)
  else
    h.info('bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)')
  end
end

return M
