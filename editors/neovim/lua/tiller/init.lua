-- tiller: a chat with the Tiller coding agent in a Neovim buffer.
--
--   require('tiller').setup({ cmd = { 'tiller' }, args = {}, cwd = nil })
--
-- The commands (plugin/tiller.lua) call the functions below; setup() is optional.

local chat = require('tiller.chat')
local client = require('tiller.client')
local handlers = require('tiller.handlers')
local input = require('tiller.input')
local messages = require('tiller.messages')
local sessions = require('tiller.sessions')

local M = {}

local DEFAULTS = {
  cmd = { 'tiller' }, -- the server command (a list, or a string naming the executable)
  args = {}, -- extra arguments, e.g. { '--model', 'gpt-4o' }
  cwd = nil, -- the server's working directory (the workspace); nil: Neovim's cwd at start
  env = nil, -- extra environment variables for the server
  split = 'botright vsplit', -- how :Tiller opens the chat window
  tool_output_lines = 20, -- lines of a tool's result shown in its fold
  save_edits = true, -- save a buffer the agent changed (false: it stays unsaved)
}

local TYPES = {
  cmd = { table = true, string = true },
  args = { table = true },
  cwd = { string = true },
  env = { table = true },
  split = { string = true },
  tool_output_lines = { number = true },
  save_edits = { boolean = true },
}

local TYPE_NAMES = {
  cmd = 'list or string',
  args = 'list',
  cwd = 'string',
  env = 'table',
  split = 'string',
  tool_output_lines = 'number',
  save_edits = 'boolean',
}

M.config = vim.deepcopy(DEFAULTS)

local notify = messages.show
local reason = messages.reason

local function apply_config()
  chat.config.split = M.config.split
  chat.config.tool_output_lines = M.config.tool_output_lines
  handlers.config.save_edits = M.config.save_edits
end

--- Configure the plugin; every key is optional (see DEFAULTS). Takes effect for the next server
--- start (:TillerStop stops the running one).
function M.setup(opts)
  opts = opts or {}
  local config = vim.deepcopy(DEFAULTS)
  local problems = {}
  for key, value in pairs(opts) do
    local expected = TYPES[key]
    if not expected then
      table.insert(problems, string.format('unknown option %q ignored', tostring(key)))
    elseif not expected[type(value)] then
      table.insert(problems, string.format('%s must be a %s, the default is used', key,
        TYPE_NAMES[key]))
    else
      config[key] = value
    end
  end
  if #problems > 0 then
    table.sort(problems)
    notify('setup: ' .. table.concat(problems, '; '), vim.log.levels.WARN)
  end
  M.config = config
  if type(M.config.cmd) == 'string' then
    M.config.cmd = { M.config.cmd }
  end
  apply_config()
end

apply_config()
local status = require('tiller.status')
client.add_listener(status.handle_event)
client.add_listener(chat.handle_event)
local changes = require('tiller.changes')
client.add_listener(changes.handle_event)
local processes = require('tiller.processes')
client.add_listener(processes.handle_event)
client.on_exit(chat.server_exited)
client.on_exit(function()
  status.server_state(false)
end)
require('tiller.review').on_answered = chat.permission_answered
handlers.on_kept_unsaved = chat.kept_unsaved


-- The server's working directory: config.cwd, else Neovim's.
local function workspace()
  return M.config.cwd and vim.fn.expand(M.config.cwd) or vim.fn.getcwd()
end

--- Start the server unless it runs; on failure the reason is shown in the chat buffer.
function M.start()
  if client.is_alive() then
    return true
  end
  local cwd = workspace()
  sessions.set_cwd(cwd)
  local ok, err = client.start({
    cmd = M.config.cmd,
    args = M.config.args,
    cwd = cwd,
    env = M.config.env,
    keeps_unsaved = not M.config.save_edits,
  })
  if not ok then
    chat.notice('error', 'could not start the server: ' .. tostring(err))
  else
    status.server_state(true)
  end
  return ok
end

local prompt_answered, queue

-- Send `text` as a prompt; `on_busy()` is called instead of saying so if a run is active.
local function send_prompt(text, on_busy)
  if not M.start() then
    chat.unsent(text)
    return
  end
  local started = false
  local listener = client.add_listener(function(event)
    started = started or event.type == 'agent_start'
  end)
  sessions.ensure(function(session_err, id)
    if session_err then
      client.remove_listener(listener)
      chat.unsent(text)
      if not session_err.exited then
        chat.notice('error', 'no session: ' .. reason(session_err))
      end
      return
    end
    client.request('agent/prompt', { sessionId = id, message = text }, function(err)
      client.remove_listener(listener)
      prompt_answered(text, started, err, on_busy)
    end)
  end)
end

-- The answer to agent/prompt: only what the run's events did not show.
prompt_answered = function(text, started, err, on_busy)
  if err and err.exited and not started then
    chat.unsent(text) -- the reason follows (chat.server_exited)
    return
  end
  if not err or err.exited then
    return -- the run's events tell the rest; an exit is shown by chat.server_exited
  end
  if err.code == messages.AGENT_BUSY and on_busy then
    on_busy() -- a run started meanwhile
  elseif err.code == messages.AGENT_BUSY then
    notify('a run is active: :TillerSteer, :TillerFollowUp, :TillerAbort', vim.log.levels.WARN)
  else
    chat.notice('error', reason(err))
  end
end

-- Send `text` as the input area does: a prompt when the agent is idle; while a run is
-- active, steering (`kind` 'followUp': a follow-up). A prompt that meets a run started
-- meanwhile (its agent_start not seen yet) steers it too.
local function deliver(text, kind)
  local method, what = 'agent/steer', 'steering'
  if kind == 'followUp' then
    method, what = 'agent/followUp', 'follow-up'
  end
  local function add_to_run()
    queue(method, what, text)
  end
  if client.is_running() then
    add_to_run()
  else
    send_prompt(text, add_to_run)
  end
end

-- Show the chat (focused) and the input area under it; `lines` fill the input area, `focus`
-- moves there.
local function open(lines, focus)
  local win = chat.open()
  input.open(win, lines, focus)
  if focus and lines == nil then
    vim.cmd('startinsert')
  end
end

--- :[range]Tiller [prompt] - open (or focus) the chat and send `prompt` (its `@path` and
--- `#buffer` words add those files). With a range the selected lines are sent with it, quoted
--- with their file name and line numbers. Without a prompt the input area takes the focus
--- (holding the selection, if any).
function M.prompt(text, range)
  input.set_cwd(workspace())
  local selection = nil
  if range and range.count > 0 then
    selection = input.selection(vim.api.nvim_get_current_buf(), range.line1, range.line2)
  end
  if text ~= nil and text ~= '' then
    local message = input.expand(text)
    if selection then
      message = message .. '\n\n' .. table.concat(selection, '\n')
    end
    open(nil, false)
    vim.api.nvim_set_current_win(chat.window())
    deliver(message, 'send')
    return
  end
  if selection then
    table.insert(selection, 1, '')
    open(selection, true)
  else
    open(nil, true)
  end
end

-- agent/steer or agent/followUp with `text`.
queue = function(method, what, text, on_done)
  if not client.is_alive() then
    notify('not running: :Tiller starts a conversation', vim.log.levels.WARN)
    return
  end
  sessions.ensure(function(session_err, id)
    if session_err then
      return on_done and on_done(session_err)
    end
    client.request(method, { sessionId = id, message = text }, function(err, result)
      if err then
        notify(what .. ' failed: ' .. reason(err), vim.log.levels.ERROR)
      else
        notify(string.format('%s queued (%s waiting)', what, tostring(result and result.queued)))
      end
      if on_done then
        on_done(err, result)
      end
    end)
  end)
end

--- :TillerSteer {msg} - delivered after the current tool batch, before the next model call.
function M.steer(text, on_done)
  queue('agent/steer', 'steering', text, on_done)
end

--- :TillerFollowUp {msg} - delivered when the agent would otherwise stop.
function M.follow_up(text, on_done)
  queue('agent/followUp', 'follow-up', text, on_done)
end

--- :TillerAbort - end the active run (its tools are killed).
function M.abort()
  if not client.is_alive() then
    notify('not running', vim.log.levels.WARN)
    return
  end
  client.request('agent/abort', { sessionId = sessions.current() }, function(err)
    if err and err.code == messages.NO_ACTIVE_RUN then
      notify('no run to abort')
    elseif err then
      notify('abort failed: ' .. reason(err), vim.log.levels.ERROR)
    end
  end)
end

--- :TillerContinue - continue after an error, an abort or a turn limit.
function M.continue()
  chat.open()
  if not M.start() then
    return
  end
  sessions.ensure(function(session_err, id)
    if session_err then
      return
    end
    client.request('agent/continue', { sessionId = id }, function(err)
      if err and not err.exited then
        if err.code == messages.AGENT_BUSY then
          notify('a run is active (:TillerSteer, :TillerFollowUp add to it)', vim.log.levels.WARN)
        elseif err.code == messages.CANNOT_CONTINUE then
          notify(reason(err), vim.log.levels.WARN)
        else
          chat.notice('error', reason(err))
        end
      end
    end)
  end)
end

--- :TillerSessions - pick a saved session of the workspace and show its history; the next
--- prompt goes on with it. `on_done(err, id)` is for scripts.
function M.sessions(on_done)
  chat.open()
  if M.start() then
    sessions.pick(on_done)
  end
end

--- :TillerNew - start a new session; the chat is cleared.
function M.new_session(on_done)
  chat.open()
  if M.start() then
    sessions.new(on_done)
  end
end

--- :TillerStop - stop the server (an active run is aborted first).
function M.stop()
  if not client.stop(nil, { sessionId = sessions.current() }) then
    notify('not running')
  end
end

-- The session's state (agent/getState) for a picker's mark; then fn(state) ({} when it failed:
-- the picker is still worth showing).
local function with_state(id, fn)
  client.request('agent/getState', { sessionId = id }, function(err, state)
    fn(not err and type(state) == 'table' and state or {})
  end)
end

-- A picker's label: '● ' before the current item, two spaces before the others.
local function marked(label, current)
  return (current and '● ' or '  ') .. label
end

-- Start the server and make sure of the session; then fn(id).
local function with_session(fn)
  if not M.start() then
    return
  end
  sessions.ensure(function(err, id)
    if err then
      notify('no session: ' .. reason(err), vim.log.levels.ERROR)
    else
      fn(id)
    end
  end)
end

--- :TillerModel - pick a model of a usable provider (models/list) for the session's next run
--- (agent/setModel); the current one is marked ●. `on_done(err, result)` is for scripts.
function M.model(on_done)
  on_done = on_done or function() end
  local function picked(id, model)
    if not model then
      return on_done(nil, nil)
    end
    local params = { sessionId = id, provider = model.provider, model = model.id }
    client.request('agent/setModel', params, function(err, set)
      if err and err.code == messages.AGENT_BUSY then
        notify('the model changes between runs (:TillerAbort stops this one)', vim.log.levels.WARN)
      elseif err then
        notify(':TillerModel failed: ' .. reason(err), vim.log.levels.ERROR)
      else
        notify(string.format('model: %s/%s', set.provider, set.model))
        if set.notice then -- a deprecated model: when it retires
          notify(set.notice, vim.log.levels.WARN)
        end
      end
      on_done(err, set)
    end)
  end
  with_session(function(id)
    with_state(id, function(state)
      client.request('models/list', nil, function(err, result)
        if err then
          notify(':TillerModel could not list the models: ' .. reason(err), vim.log.levels.ERROR)
          return on_done(err)
        end
        local usable = {}
        for _, provider in ipairs(result.providers or {}) do
          usable[provider.name] = provider.configured
        end
        local models = vim.tbl_filter(function(model)
          return usable[model.provider] and model.lifecycle ~= 'retired'
        end, result.models or {})
        vim.ui.select(models, {
          prompt = 'Tiller model',
          kind = 'tiller.model',
          format_item = function(model)
            local current = model.provider == state.provider and model.id == state.model
            local label = model.provider .. '/' .. model.id
            if model.lifecycle == 'deprecated' then
              label = label .. ' (deprecated, retires ' .. tostring(model.retiresAt or 'soon') .. ')'
            end
            return marked(label, current)
          end,
        }, function(model)
          picked(id, model)
        end)
      end)
    end)
  end)
end

--- A picker for one session setting: `spec.choices` (from the server's capabilities, else
--- `spec.fallback`) shown with the current one (`state[spec.state_key]`) marked ●; the pick is
--- sent as `spec.method` { sessionId, [spec.param] = choice }, and `spec.announce(result,
--- choice)` tells the user what it became.
local function pick_setting(spec, on_done)
  on_done = on_done or function() end
  local function picked(id, choice)
    if not choice then
      return on_done(nil, nil)
    end
    client.request(spec.method, { sessionId = id, [spec.param] = choice }, function(err, result)
      if err then
        notify(spec.command .. ' failed: ' .. reason(err), vim.log.levels.ERROR)
      else
        spec.announce(result, choice)
      end
      on_done(err, result)
    end)
  end
  with_session(function(id)
    with_state(id, function(state)
      local info = client.server_info() or {}
      local choices = (info.capabilities or {})[spec.capability] or spec.fallback
      vim.ui.select(choices, {
        prompt = spec.prompt,
        kind = spec.kind,
        format_item = function(choice)
          return marked(choice, choice == state[spec.state_key])
        end,
      }, function(choice)
        picked(id, choice)
      end)
    end)
  end)
end

--- :TillerThinking - pick the session's thinking level (agent/setThinkingLevel); the current
--- one is marked ●. A level the model lacks runs at the nearest one it takes: the server's
--- note says so.
function M.thinking(on_done)
  pick_setting({
    command = ':TillerThinking', method = 'agent/setThinkingLevel', param = 'level',
    capability = 'thinkingLevels', fallback = { 'off', 'low', 'medium', 'high', 'xhigh', 'max' },
    prompt = 'Tiller thinking level', kind = 'tiller.thinking', state_key = 'thinkingLevel',
    announce = function(result)
      notify('thinking: ' .. tostring(result.level))
      if result.note then
        notify(result.note)
      end
    end,
  }, on_done)
end

--- :TillerMode - pick the session's permission mode (agent/setPermissionMode); the current
--- one is marked ●.
function M.mode(on_done)
  pick_setting({
    command = ':TillerMode', method = 'agent/setPermissionMode', param = 'mode',
    capability = 'permissionModes', fallback = { 'ask', 'acceptEdits', 'auto', 'readonly' },
    prompt = 'Tiller permission mode', kind = 'tiller.mode', state_key = 'permissionMode',
    announce = function(result, mode)
      notify('permission mode: ' .. tostring(result and result.mode or mode))
    end,
  }, on_done)
end

--- :TillerChanges[!] - the files the last run (with !, the session) changed, in the quickfix
--- list.
function M.changes(whole_session, on_done)
  with_session(function(id)
    changes.quickfix(id, workspace(), whole_session, on_done)
  end)
end

--- :TillerUndo - put back the files the last run changed (from the server's checkpoints).
function M.undo(on_done)
  with_session(function(id)
    changes.undo(id, on_done)
  end)
end

--- :TillerProcesses - the session's background processes: pick one, then its output or Kill.
function M.processes(on_done)
  with_session(function(id)
    processes.pick(id, on_done)
  end)
end

--- :TillerKill N - kill background process N (SIGTERM, then SIGKILL); the agent is told.
function M.kill(process_id, on_done)
  local number = tonumber(process_id)
  if not number then
    notify(':TillerKill N: N is a process number (see :TillerProcesses)', vim.log.levels.ERROR)
    return
  end
  with_session(function(id)
    processes.kill(id, number, on_done)
  end)
end

--- The agent's state as a short text for a statusline or winbar (see tiller.status).
function M.status()
  return status.text()
end

-- The input area: a prompt when idle; while a run is active, steering or a follow-up.
input.on_submit = deliver

return M
