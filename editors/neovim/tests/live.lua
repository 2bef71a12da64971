-- Against the real server (config.cmd, config.args; the model is the fake OpenAI server of
-- tests/editors/test_neovim.py): the model runs a 300-character command and an edit in one batch; the
-- question waits in the chat while the user types in another buffer, then the questions are
-- answered with the chat's keys. Then (run 2) the agent's bash reads the file the accepted edit changed.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')
local wait_for = harness.wait_for

local keys = harness.keys

harness.run(function(config, obs)
  vim.cmd('runtime plugin/tiller.lua')
  local setup = { cmd = config.cmd, args = config.args, cwd = config.workdir }
  for key, value in pairs(config.setup or {}) do
    setup[key] = value
  end
  require('tiller').setup(setup)
  local client = require('tiller.client')
  local chat = require('tiller.chat')
  local review = require('tiller.review')
  local events = harness.record_events(client)
  local notes = harness.capture_notes()
  obs.notes = notes
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
    failed.events_at_failure = vim.tbl_map(function(event)
      return event.type
    end, events)
  end
  local function count(type)
    return harness.count(events, type)
  end

  vim.cmd('edit ' .. vim.fn.fnameescape(config.workdir .. '/notes.txt'))
  local notes_buf = vim.api.nvim_get_current_buf()
  vim.cmd('split ' .. vim.fn.fnameescape(config.workdir .. '/scratch.txt'))
  local scratch_buf = vim.api.nvim_get_current_buf()
  local scratch_win = vim.api.nvim_get_current_win()

  vim.cmd('Tiller change the notes')
  vim.api.nvim_set_current_win(scratch_win) -- back to work
  -- The server asks one question at a time: the command's first.
  wait_for('the first question', function()
    return #review.open_questions() == 1
  end)

  -- "Minutes later": the user keeps typing elsewhere; the run waits, the editor does not.
  keys('ifirst line 3<CR>second line<Esc>')
  keys('o<C-r>=1+1<CR> typed<Esc>')
  obs.typed = vim.api.nvim_buf_get_lines(scratch_buf, 0, -1, false)
  obs.still_open = #review.open_questions()
  obs.tools_ended_while_open = count('tool_execution_end')
  obs.running_while_open = client.is_running()
  obs.asked = chat.lines()

  local chat_win = chat.window()
  vim.api.nvim_set_current_win(chat_win)
  keys('a')
  wait_for('the second question', function()
    return #review.open_questions() == 1
  end)
  obs.asked_edit = chat.lines()
  keys('a')
  wait_for('run 1 to settle', function()
    return count('agent_settled') >= 1
  end)
  obs.run1 = chat.lines()
  obs.notes_lines = vim.api.nvim_buf_get_lines(notes_buf, 0, -1, false)
  obs.notes_modified = vim.bo[notes_buf].modified

  -- Run 2: the agent's bash reads the file (allowed when asked).
  table.insert(review.on_asked, function(q)
    vim.schedule(function()
      review.answer(q, 'allowOnce')
    end)
  end)
  vim.cmd('Tiller check it')
  wait_for('run 2 to settle', function()
    return count('agent_settled') >= 2
  end)
  obs.run2 = chat.lines()
  require('tiller').stop()
  wait_for('the server to exit', function()
    return not client.is_alive()
  end)
end)
