-- End to end: the commands of tiller.nvim driving the real `tiller` (config.cmd, config.args)
-- whose model is the fake OpenAI server of tests/editors/test_neovim.py. The pytest side scripted the
-- replies; this script plays the user and records what the chat buffer showed.
--
-- Runs: 1. a prompt whose tools are an echo and a wait (released by writing `release` after a
-- steer and a follow-up were queued); 2. :Tiller with no argument, typed in the input area,
-- whose model call fails; 3. a stalled reply, aborted; 4. :TillerContinue;
-- 5. `read` and `edit` of a file with unsaved changes, and a rejected command; 6. :TillerStop
-- while a command runs.
-- The server asks before every bash call and edit (the plugin declares `permissions`): the
-- script answers the questions the chat shows.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')
local wait_for = harness.wait_for

local function find(list, pred)
  for _, item in ipairs(list) do
    if pred(item) then
      return item
    end
  end
  return nil
end

local function contains(lines, text)
  return find(lines, function(line)
    return line:find(text, 1, true) ~= nil
  end) ~= nil
end

harness.run(function(config, obs)
  vim.cmd('runtime plugin/tiller.lua')
  obs.commands = {}
  for _, name in ipairs({ 'Tiller', 'TillerSteer', 'TillerFollowUp', 'TillerAbort', 'TillerStop' }) do
    obs.commands[name] = vim.fn.exists(':' .. name) == 2
  end

  local notes = harness.capture_notes()
  obs.notes = notes

  -- Permission questions (asked in the chat): answered from `answers` (nil = reject), as the
  -- user would once they see them.
  local answers = {}
  obs.questions = {}
  local review = require('tiller.review')
  table.insert(review.on_asked, function(q)
    local answer = table.remove(answers, 1)
    table.insert(obs.questions, { lines = q.lines, options = q.options, answer = answer or vim.NIL })
    vim.schedule(function()
      review.answer(q, answer or 'rejectOnce')
    end)
  end)

  require('tiller').setup({ cmd = config.cmd, args = config.args, cwd = config.workdir })
  local client = require('tiller.client')
  local chat = require('tiller.chat')
  local events = harness.record_events(client)
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
    failed.events_at_failure = vim.tbl_map(function(event)
      return event.type
    end, events)
  end
  local function settled(n)
    return harness.settled(events, n)
  end
  local function noted(text)
    return find(notes, function(note)
      return note.message:find(text, 1, true) ~= nil
    end) ~= nil
  end

  -- 1. Tools, steering and a follow-up.
  answers = { 'allowOnce', 'allowOnce' }
  vim.cmd('Tiller run the commands')
  obs.chat_filetype = vim.bo.filetype
  obs.chat_buftype = vim.bo.buftype
  wait_for('the echo to finish', function()
    return find(events, function(e)
      return e.type == 'tool_execution_end' and e.toolCallId == 'call_echo'
    end) ~= nil
  end)
  obs.running_during_tools = client.is_running()
  obs.lines_during_tools = chat.lines()
  vim.cmd('TillerSteer use tabs, not spaces')
  vim.cmd('TillerFollowUp and add a test')
  wait_for('the steer to be queued', function()
    return noted('steering queued') and noted('follow-up queued')
  end)
  vim.fn.writefile({ 'released' }, config.workdir .. '/release')
  wait_for('run 1 to settle', settled(1))
  obs.server_info = client.server_info()
  obs.run1 = chat.lines()
  local win = chat.window()
  obs.chat_window = win ~= nil
  vim.api.nvim_win_call(win, function()
    obs.folds = {}
    for _, id in ipairs({ 'call_echo', 'call_wait' }) do
      local lnum = chat.block_line(id)
      obs.folds[id] = {
        line = lnum,
        closed = vim.fn.foldclosed(lnum),
        closed_end = vim.fn.foldclosedend(lnum),
        text = vim.fn.foldtextresult(lnum),
      }
    end
  end)

  -- 2. No argument: the input area takes the focus, in insert mode; <C-s> sends. The model
  -- call fails.
  harness.keys(':Tiller<CR>break please<C-s>')
  obs.input_focused = vim.api.nvim_get_current_buf() == require('tiller.input').buffer()
  obs.input_mode = vim.api.nvim_get_mode().mode
  wait_for('run 2 to settle', settled(2))
  obs.run2 = chat.lines()

  -- 3. A reply that stalls, aborted once its text is shown.
  vim.cmd('Tiller stall please')
  wait_for('the partial answer', function()
    return contains(chat.lines(), 'Partial answer')
  end)
  vim.cmd('TillerAbort')
  wait_for('run 3 to settle', settled(3))
  obs.run3 = chat.lines()

  -- 4. Continue after the abort.
  vim.cmd('TillerContinue')
  wait_for('run 4 to settle', settled(4))
  obs.run4 = chat.lines()

  -- 5. Files through the editor: `read` sees the unsaved buffer, `edit` (allowed after a diff
  -- preview) changes the buffer, undoably; a rejected command.
  local notes_path = config.workdir .. '/notes.txt'
  vim.cmd('tabnew ' .. vim.fn.fnameescape(notes_path))
  local notes_buf = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_lines(notes_buf, 0, -1, false, { 'buffer line' })
  answers = { 'allowOnce', nil }
  vim.cmd('Tiller fix the notes')
  wait_for('run 5 to settle', settled(5))
  obs.run5 = chat.lines()
  obs.notes_edited = vim.api.nvim_buf_get_lines(notes_buf, 0, -1, false)
  obs.notes_modified = vim.bo[notes_buf].modified
  vim.api.nvim_buf_call(notes_buf, function()
    vim.cmd('undo')
  end)
  obs.notes_undone = vim.api.nvim_buf_get_lines(notes_buf, 0, -1, false)

  -- 6. Stop the server while a command runs: the run is aborted, the command killed.
  answers = { 'allowOnce' }
  vim.cmd('Tiller sleep')
  local command_pid
  wait_for('the command to print its pid', function()
    for _, event in ipairs(events) do
      local partial = event.type == 'tool_execution_update' and event.partialResult or {}
      if type(partial.output) == 'string' then
        command_pid = command_pid or partial.output:match('pid=(%d+)')
      end
    end
    return command_pid ~= nil
  end)
  local pid = client.pid()
  vim.cmd('TillerStop')
  wait_for('the server to exit', function()
    return not client.is_alive()
  end)
  obs.pid = pid
  obs.command_pid = tonumber(command_pid)
  obs.stopped = chat.lines()
  obs.events = {}
  for _, event in ipairs(events) do
    table.insert(obs.events, event.type)
  end
end)
