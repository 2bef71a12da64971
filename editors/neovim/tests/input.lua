-- The input area and :[range]Tiller against the real server (permission mode auto): a range
-- sent with its file and line numbers; a multi-line message typed in the input area with
-- `@path` and `#buffer`; steering (<CR>) and a follow-up (<M-CR>) typed there while a command
-- runs; a range without a prompt lands in the input area.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')
local wait_for = harness.wait_for

local keys = harness.keys

harness.run(function(config, obs)
  vim.cmd('runtime plugin/tiller.lua')
  require('tiller').setup({ cmd = config.cmd, args = config.args, cwd = config.workdir })
  local client = require('tiller.client')
  local chat = require('tiller.chat')
  local input = require('tiller.input')
  local events = harness.record_events(client)
  local notes = harness.capture_notes()
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
    failed.notes_at_failure = notes
  end
  local function settled(n)
    return harness.settled(events, n)
  end

  vim.cmd('edit ' .. vim.fn.fnameescape(config.workdir .. '/code.py'))
  vim.bo.filetype = 'python'
  local code_buf = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_lines(code_buf, 0, -1, false, { 'one = 1', 'two = 2', 'three = 3  # unsaved' })

  -- 1. A range and a prompt.
  keys(':2,3Tiller explain this<CR>')
  wait_for('run 1 to settle', settled(1))
  local chat_win, input_win = chat.window(), input.window()
  obs.layout = {
    input_below_chat = vim.api.nvim_win_get_position(input_win)[1]
      > vim.api.nvim_win_get_position(chat_win)[1],
    same_column = vim.api.nvim_win_get_position(input_win)[2]
      == vim.api.nvim_win_get_position(chat_win)[2],
  }

  -- 2. Typed in the input area (two lines, a file and the last buffer), sent with <CR>.
  vim.api.nvim_set_current_win(vim.fn.bufwinid(code_buf))
  vim.api.nvim_set_current_win(input_win)
  keys('ifirst line<CR>see @notes.txt and #buffer<Esc><CR>')
  obs.input_after_send = vim.api.nvim_buf_get_lines(input.buffer(), 0, -1, false)
  wait_for('the command to start', function()
    for _, event in ipairs(events) do
      if event.type == 'tool_execution_start' and event.toolCallId == 'call_wait' then
        return true
      end
    end
    return false
  end)
  -- <C-s> and <M-CR> from insert mode: it stays insert mode, so the text typed after each is
  -- the next message (were it normal mode, `later please` would be commands).
  local mode_after = 'lua table.insert(_G.tiller_test_modes, vim.api.nvim_get_mode().mode)'
  _G.tiller_test_modes = {}
  keys('isteer now<C-s><Cmd>' .. mode_after .. '<CR>later please<M-CR><Cmd>' .. mode_after
    .. '<CR><Esc>')
  obs.modes_after_send = _G.tiller_test_modes
  wait_for('steering and follow-up queued', function()
    local steer, follow = false, false
    for _, note in ipairs(notes) do
      steer = steer or note.message:find('steering queued', 1, true) ~= nil
      follow = follow or note.message:find('follow-up queued', 1, true) ~= nil
    end
    return steer and follow
  end)
  vim.fn.writefile({ 'released' }, config.workdir .. '/release')
  wait_for('run 2 to settle', settled(2))
  obs.chat = chat.lines()

  -- 3. A range without a prompt: the input area holds it, focused, for the question.
  vim.api.nvim_set_current_win(vim.fn.bufwinid(code_buf))
  keys(':1,1Tiller<CR>')
  obs.range_input = vim.api.nvim_buf_get_lines(input.buffer(), 0, -1, false)
  obs.range_focus = vim.api.nvim_get_current_buf() == input.buffer()
  obs.range_cursor = vim.api.nvim_win_get_cursor(0)
  vim.cmd('stopinsert')
  require('tiller').stop()
  wait_for('the server to exit', function()
    return not client.is_alive()
  end)
end)
