-- tiller.changes: what the agent changed, from the server's checkpoints.
--
-- Each run's `checkpoint` events are followed: the first one's entryId marks the workspace as
-- it was before the run's first change. :TillerChanges lists the files the last run changed
-- (`session/changes` from that entry) in the quickfix list, each at its first changed line;
-- :TillerUndo puts them back (`session/revert` to that entry; text files go through the
-- editor's buffers, so `u` there undoes the undo). Both need the server's checkpoints (they
-- need `git`, and a saved session).

local messages = require('tiller.messages')
local client = require('tiller.client')
local chat = require('tiller.chat')

local M = {}

local S = { run = nil, last = nil } -- {first = entryId, files = {path = true}}

--- Follow one `agent/event` (tiller.init registers it).
function M.handle_event(event)
  if event.parentToolCallId ~= nil then -- a subagent's run is not the chat's
    return
  end
  if event.type == 'agent_start' then
    S.run = { files = {} }
  elseif event.type == 'checkpoint' and S.run then
    S.run.first = S.run.first or event.entryId
    for _, path in ipairs(type(event.files) == 'table' and event.files or {}) do
      S.run.files[path] = true
    end
  elseif event.type == 'agent_settled' and S.run then
    if S.run.first then
      S.last = S.run
    end
    S.run = nil
  end
end

--- The entry id the last run that changed files started from, or nil.
function M.last_run_entry()
  return S.last and S.last.first
end

local function checkpoints_off()
  local info = client.server_info()
  local checkpoints = info and info.capabilities and info.capabilities.checkpoints
  if type(checkpoints) == 'table' and checkpoints.enabled == false then
    return checkpoints.reason or 'checkpoints are off'
  end
  return nil
end

-- The first changed line of the new file in a unified diff (1 when unknown).
local function first_changed_line(diff)
  if type(diff) ~= 'string' then
    return 1
  end
  local line = nil
  for _, text in ipairs(vim.split(diff, '\n', { plain = true })) do
    if line == nil then
      line = tonumber(text:match('^@@ %-%d+,?%d* %+(%d+)'))
    elseif text:sub(1, 1) == ' ' then
      line = line + 1
    elseif text:sub(1, 1) == '+' or text:sub(1, 1) == '-' then
      break
    end
  end
  return math.max(line or 1, 1)
end

--- :TillerChanges - the files the last run changed (whole_session: the whole session's) in
--- the quickfix list, opened. `on_done(err, items)` is for scripts.
function M.quickfix(session_id, cwd, whole_session, on_done)
  on_done = on_done or function() end
  local off = checkpoints_off()
  if off then
    messages.show('no changes to show: ' .. off, vim.log.levels.WARN)
    return on_done({ message = off })
  end
  local from = not whole_session and M.last_run_entry() or nil
  if not whole_session and not from then
    messages.show('the last run changed no files', vim.log.levels.INFO)
    return on_done(nil, {})
  end
  client.request('session/changes', { sessionId = session_id, from = from }, function(err, result)
    if err then
      messages.show(':TillerChanges failed: ' .. messages.reason(err), vim.log.levels.ERROR)
      return on_done(err)
    end
    local items = {}
    for _, file in ipairs(result.files or {}) do
      local path = file.path
      if path:sub(1, 1) ~= '/' then
        path = cwd .. '/' .. path
      end
      table.insert(items, {
        filename = path,
        lnum = file.status == 'deleted' and 1 or first_changed_line(file.diff),
        text = string.format('%s +%s -%s', file.status, tostring(file.additions or 0),
          tostring(file.deletions or 0)),
      })
    end
    vim.fn.setqflist({}, ' ', { title = 'Tiller changes', items = items })
    if #items > 0 then
      vim.cmd('copen')
    end
    on_done(nil, items)
  end)
end

--- :TillerUndo - put back the files the last run changed. `on_done(err, result)` is for
--- scripts.
function M.undo(session_id, on_done)
  on_done = on_done or function() end
  local off = checkpoints_off()
  local entry = M.last_run_entry()
  if off or not entry then
    local why = off or 'the last run changed no files'
    messages.show('nothing to undo: ' .. why, vim.log.levels.WARN)
    return on_done({ message = why })
  end
  client.request('session/revert', { sessionId = session_id, entryId = entry }, function(err, result)
    if err then
      chat.notice('error', 'undo failed: ' .. messages.reason(err))
      return on_done(err)
    end
    local lines = { '↶ Undone: ' .. (#(result.restored or {}) > 0
      and table.concat(result.restored, ', ') or 'nothing to put back') }
    if #(result.conflicts or {}) > 0 then
      table.insert(lines, '  left alone (changed since by someone else): '
        .. table.concat(result.conflicts, ', '))
    end
    for _, skipped in ipairs(result.skipped or {}) do
      table.insert(lines, string.format('  skipped %s: %s', skipped.path, skipped.reason))
    end
    chat.notice('info', table.concat(lines, '\n'))
    S.last = nil
    on_done(nil, result)
  end)
end

return M
