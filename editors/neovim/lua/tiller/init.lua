-- tiller: a chat with the Tiller coding agent in a Neovim buffer.
--
--   require('tiller').setup({ cmd = { 'tiller' }, args = {}, cwd = nil })
--
-- The commands (plugin/tiller.lua) call the functions below; setup() is optional.

local chat = require('tiller.chat')
local client = require('tiller.client')
local handlers = require('tiller.handlers')

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

local function notify(message, level)
  vim.notify('tiller: ' .. message, level or vim.log.levels.INFO)
end

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
  for key, value in pairs(opts) do
    local expected = TYPES[key]
    if not expected then
      notify(string.format('setup: unknown option %q ignored', key), vim.log.levels.WARN)
    elseif not expected[type(value)] then
      notify(
        string.format('setup: %s must be a %s; using the default', key, TYPE_NAMES[key]),
        vim.log.levels.WARN
      )
    else
      config[key] = value
    end
  end
  M.config = config
  if type(M.config.cmd) == 'string' then
    M.config.cmd = { M.config.cmd }
  end
  apply_config()
end

apply_config()
client.add_listener(chat.handle_event)
client.on_exit(chat.server_exited)
require('tiller.review').on_answered = chat.permission_answered
handlers.on_kept_unsaved = chat.kept_unsaved

--- Start the server unless it runs; on failure the reason is shown in the chat buffer.
function M.start()
  if client.is_alive() then
    return true
  end
  local cwd = M.config.cwd and vim.fn.expand(M.config.cwd) or vim.fn.getcwd()
  local ok, err = client.start({
    cmd = M.config.cmd,
    args = M.config.args,
    cwd = cwd,
    env = M.config.env,
    keeps_unsaved = not M.config.save_edits,
  })
  if not ok then
    chat.notice('error', 'could not start the server: ' .. tostring(err))
  end
  return ok
end

local function send_prompt(text)
  if not M.start() then
    chat.unsent(text)
    return
  end
  local started = false
  local listener = client.add_listener(function(event)
    started = started or event.type == 'agent_start'
  end)
  client.request('agent/prompt', { message = text }, function(err)
    client.remove_listener(listener)
    if err and err.exited and not started then
      chat.unsent(text) -- the reason follows (chat.server_exited)
      return
    end
    if not err or err.exited then
      return -- the run's events tell the rest; an exit is shown by chat.server_exited
    end
    if err.code == -32010 then
      notify(err.message, vim.log.levels.WARN) -- busy: the chat is fine as it is
    else
      chat.notice('error', err.message or vim.inspect(err))
    end
  end)
end

--- :Tiller [prompt] - open (or focus) the chat and send `prompt`, asking for one with
--- vim.ui.input when it is empty.
function M.prompt(text)
  chat.open()
  if text ~= nil and text ~= '' then
    send_prompt(text)
    return
  end
  vim.ui.input({ prompt = 'Tiller> ' }, function(input)
    if input and input ~= '' then
      send_prompt(input)
    end
  end)
end

local function queue(method, what, text, on_done)
  if not client.is_alive() then
    notify('not running: :Tiller starts a conversation', vim.log.levels.WARN)
    return
  end
  client.request(method, { message = text }, function(err, result)
    if err then
      notify(what .. ' failed: ' .. tostring(err.message), vim.log.levels.ERROR)
    else
      notify(string.format('%s queued (%s waiting)', what, tostring(result and result.queued)))
    end
    if on_done then
      on_done(err, result)
    end
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
  client.request('agent/abort', nil, function(err)
    if err and err.code == -32011 then
      notify('no run to abort')
    elseif err then
      notify('abort failed: ' .. tostring(err.message), vim.log.levels.ERROR)
    end
  end)
end

--- :TillerContinue - continue after an error, an abort or a turn limit.
function M.continue()
  chat.open()
  if not M.start() then
    return
  end
  client.request('agent/continue', nil, function(err)
    if err and not err.exited then
      if err.code == -32012 or err.code == -32010 then
        notify(err.message, vim.log.levels.WARN)
      else
        chat.notice('error', err.message or vim.inspect(err))
      end
    end
  end)
end

--- :TillerStop - stop the server (an active run is aborted first).
function M.stop()
  if not client.stop() then
    notify('not running')
  end
end

return M
