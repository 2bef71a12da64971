-- tiller.processes: the session's background processes (commands the agent started with
-- `background: true`).
--
-- :TillerProcesses lists them (`process/list`) in a picker, each with its state; the one picked
-- offers its output (`process/output`, shown in a scratch buffer `tiller://process/N`, `r`
-- there reads it again) and, while it runs, Kill (`process/kill`: SIGTERM, then SIGKILL; the
-- agent is told). :TillerKill N kills process N. A process that exits on its own is announced
-- in the chat.

local messages = require('tiller.messages')
local client = require('tiller.client')
local chat = require('tiller.chat')

local M = {}

--- A process's state in a few words: "running", "exited with code 1", "killed (SIGTERM)".
function M.state_text(process)
  if process.state == 'running' then
    return 'running'
  elseif process.state == 'ended' then
    return 'ended with the server'
  end
  local how = process.state == 'killed' and 'killed' or 'exited'
  if process.signal then
    return string.format('%s (%s)', how, process.signal)
  end
  return string.format('%s with code %s', how, tostring(process.exitCode))
end

--- One line for a process: "1  running  npm run dev".
function M.label(process)
  return string.format('%d  %s  %s', process.id, M.state_text(process), process.command)
end

--- Follow one `agent/event` (tiller.init registers it): an exit is said in the chat.
function M.handle_event(event)
  if event.type == 'process_exit' and type(event.process) == 'table'
      and event.process.state ~= 'ended' then
    local process = event.process
    chat.notice('info', string.format('● background process %d %s: %s', process.id,
      M.state_text(process), process.command))
  end
end

--- The session's processes: on_done(err, processes).
function M.list(session_id, on_done)
  client.request('process/list', { sessionId = session_id }, function(err, result)
    if err then
      messages.show('process/list failed: ' .. messages.reason(err), vim.log.levels.ERROR)
      return on_done(err)
    end
    on_done(nil, result.processes or {})
  end)
end

local function fill(buf, session_id, id, on_done)
  client.request('process/output', { sessionId = session_id, processId = id },
    function(err, result)
      if err then
        messages.show('process/output failed: ' .. messages.reason(err), vim.log.levels.ERROR)
        return on_done(err)
      end
      local lines = vim.split(result.output or '', '\n', { plain = true })
      if lines[#lines] == '' then
        table.remove(lines)
      end
      table.insert(lines, 1, '# ' .. M.label(result.process))
      if vim.api.nvim_buf_is_valid(buf) then
        vim.bo[buf].modifiable = true
        vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
        vim.bo[buf].modifiable = false
      end
      on_done(nil, result)
    end)
end

--- Show process `id`'s output in a scratch buffer, in a split (`r` reads it again).
--- on_done(err, result) is for scripts.
function M.show_output(session_id, id, on_done)
  on_done = on_done or function() end
  local name = 'tiller://process/' .. id
  local buf = vim.fn.bufnr(name)
  if buf == -1 then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].bufhidden = 'hide'
    vim.bo[buf].filetype = 'tillerprocess'
    vim.keymap.set('n', 'r', function()
      fill(buf, session_id, id, function() end)
    end, { buffer = buf, desc = 'Tiller: read the output again' })
  end
  if vim.fn.bufwinid(buf) == -1 then
    vim.cmd('botright split')
    vim.api.nvim_win_set_buf(0, buf)
  end
  fill(buf, session_id, id, on_done)
end

--- Kill process `id` (SIGTERM, then SIGKILL): on_done(err, process).
function M.kill(session_id, id, on_done)
  on_done = on_done or function() end
  client.request('process/kill', { sessionId = session_id, processId = id }, function(err, result)
    if err then
      messages.show(':TillerKill failed: ' .. messages.reason(err), vim.log.levels.ERROR)
      return on_done(err)
    end
    messages.show(string.format('process %d %s', id, M.state_text(result.process)))
    on_done(nil, result.process)
  end)
end

--- :TillerProcesses - pick a process, then its output or Kill. on_done(err, what) is for
--- scripts: what = {process, action, result}.
function M.pick(session_id, on_done)
  on_done = on_done or function() end
  M.list(session_id, function(err, processes)
    if err then
      return on_done(err)
    end
    if #processes == 0 then
      messages.show('no background processes in this session')
      return on_done(nil, nil)
    end
    vim.ui.select(processes, {
      prompt = 'Tiller processes',
      kind = 'tiller.process',
      format_item = M.label,
    }, function(process)
      if not process then
        return on_done(nil, nil)
      end
      local actions = { 'Show the output' }
      if process.state == 'running' then
        table.insert(actions, 'Kill')
      end
      vim.ui.select(actions, { prompt = M.label(process), kind = 'tiller.process_action' },
        function(action)
          local function done(action_err, result)
            on_done(action_err, { process = process, action = action, result = result })
          end
          if action == 'Kill' then
            M.kill(session_id, process.id, done)
          elseif action then
            M.show_output(session_id, process.id, done)
          else
            on_done(nil, nil)
          end
        end)
    end)
  end)
end

return M
