-- tiller.sessions: which saved conversation the chat is.
--
-- The plugin works in one explicit session (`session/new`), remembered per workspace in
-- stdpath('data')/tiller/sessions.json, so that a new server (after :TillerStop, or in a new
-- Neovim) goes on with it (`session/load`) instead of starting from nothing. :TillerSessions
-- picks a saved one, :TillerNew starts a new one; either way the chat shows that session's
-- history, rendered through the same path as live events.

local messages = require('tiller.messages')
local client = require('tiller.client')
local chat = require('tiller.chat')

local M = {}

local S = {
  id = nil, -- the current session
  live_in = nil, -- the server pid in which `id` is live (created or loaded)
  cwd = nil,
  shown = nil, -- the session whose history the chat buffer shows
}

local function state_file()
  return vim.fn.stdpath('data') .. '/tiller/sessions.json'
end

local function read_state()
  local path = state_file()
  if vim.fn.filereadable(path) == 0 then
    return {}
  end
  local ok, decoded = pcall(vim.json.decode, table.concat(vim.fn.readfile(path), '\n'))
  return ok and type(decoded) == 'table' and decoded or {}
end

local function persistent()
  local info = client.server_info()
  local sessions = info and info.capabilities and info.capabilities.sessions
  return not (type(sessions) == 'table' and sessions.persistent == false)
end

local function remember(id)
  S.id, S.live_in = id, client.pid()
  if not persistent() or not S.cwd then
    return
  end
  local state = read_state()
  state[S.cwd] = id
  vim.fn.mkdir(vim.fn.fnamemodify(state_file(), ':h'), 'p')
  vim.fn.writefile({ vim.json.encode(state) }, state_file())
end

--- The workspace whose sessions are meant (the server's cwd).
function M.set_cwd(dir)
  if dir ~= S.cwd then
    S.cwd = dir
    S.id, S.live_in = nil, nil
  end
end

--- The current session id, or nil.
function M.current()
  return S.id
end

-- Render a `session/load` result's messages as the events that produced them; each tool call
-- is shown as it was live (`toolCalls`: one per call, in order).
local function render_history(history)
  chat.clear()
  local shown = type(history.toolCalls) == 'table' and history.toolCalls or {}
  local calls = 0
  for _, message in ipairs(type(history.messages) == 'table' and history.messages or {}) do
    if message.role == 'user' then
      chat.handle_event({ type = 'message_start', message = message })
    elseif message.role == 'assistant' then
      chat.handle_event({ type = 'message_start', message = { role = 'assistant' } })
      for _, block in ipairs(type(message.content) == 'table' and message.content or {}) do
        if block.type == 'text' or block.type == 'thinking' then
          local delta = block.type == 'text' and block.text or block.thinking
          chat.handle_event({ type = 'message_update', kind = block.type, delta = delta })
        elseif block.type == 'toolCall' then
          calls = calls + 1
          local call = type(shown[calls]) == 'table' and shown[calls] or {}
          chat.handle_event({
            type = 'tool_execution_start',
            toolCallId = block.id,
            toolName = block.name,
            args = block.arguments,
            title = call.title,
            kind = call.kind,
            path = call.path,
          })
        end
      end
      chat.handle_event({ type = 'message_end', message = { role = 'assistant' } })
    elseif message.role == 'toolResult' then
      chat.handle_event({
        type = 'tool_execution_end',
        toolCallId = message.toolCallId,
        toolName = message.toolName,
        result = { content = message.content },
        isError = message.isError,
      })
    end
  end
  S.shown = history.sessionId
end

local function short(id)
  return tostring(id):sub(1, 8)
end

local function start_new(callback)
  client.request('session/new', { cwd = S.cwd }, function(err, result)
    if err then
      callback(err)
      return
    end
    remember(result.sessionId)
    S.shown = result.sessionId
    chat.notice('info', string.format('── new session %s ──', short(result.sessionId)))
    callback(nil, result.sessionId)
  end)
end

local function load(id, callback)
  client.request('session/load', { sessionId = id }, function(err, result)
    if err then
      callback(err)
      return
    end
    remember(id)
    if S.shown ~= id then
      render_history(result)
      chat.notice('info', string.format('── session %s ──', short(id)))
    end
    callback(nil, id)
  end)
end

--- Call callback(err, id) with the session to use, live in the running server: the current
--- one, else the one remembered for this workspace (loaded), else a new one. A remembered
--- session that cannot be loaded is forgotten for a new one.
function M.ensure(callback)
  if S.id and S.live_in == client.pid() then
    callback(nil, S.id)
    return
  end
  local id = S.id or read_state()[S.cwd or '']
  if not id then
    start_new(callback)
    return
  end
  load(id, function(err, loaded)
    if err and not err.exited then
      chat.notice('warning', string.format('session %s could not be loaded: %s', short(id),
        tostring(err.message)))
      start_new(callback)
    else
      callback(err, loaded)
    end
  end)
end

--- :TillerNew - start a new session (the chat is cleared).
function M.new(callback)
  chat.clear()
  start_new(callback or function() end)
end

local function describe(entry)
  local when = entry.updated and os.date('%Y-%m-%d %H:%M', math.floor(entry.updated / 1000)) or ''
  local title = entry.title and entry.title ~= '' and entry.title or '(no messages)'
  local marker = entry.sessionId == S.id and '● ' or '  '
  return string.format('%s%s  (%s messages, %s)', marker, title, tostring(entry.messageCount or 0),
    when)
end

--- :TillerSessions - pick a saved session of this workspace with vim.ui.select and load it.
function M.pick(callback)
  callback = callback or function() end
  client.request('session/list', { cwd = S.cwd }, function(err, result)
    if err then
      messages.show(':TillerSessions failed: ' .. messages.reason(err), vim.log.levels.ERROR)
      return callback(err)
    end
    local entries = type(result.sessions) == 'table' and result.sessions or {}
    if #entries == 0 then
      messages.show('no saved session in ' .. tostring(S.cwd), vim.log.levels.INFO)
      return callback(nil, nil)
    end
    vim.ui.select(entries, {
      prompt = 'Tiller sessions',
      kind = 'tiller.session',
      format_item = describe,
    }, function(entry)
      if not entry then
        return callback(nil, nil)
      end
      S.shown = nil -- render it, even when it is the current one
      load(entry.sessionId, callback)
    end)
  end)
end

return M
