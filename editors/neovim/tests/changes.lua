-- Changes against the real server (checkpoints on, permission mode auto): a run writes a new
-- file and edits one open in a buffer; the transcript shows the edit's diff, :TillerChanges
-- lists both files in the quickfix list at their first changed line, :TillerUndo puts them
-- back (the buffer too).

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')
local wait_for = harness.wait_for

harness.run(function(config, obs)
  vim.cmd('runtime plugin/tiller.lua')
  local tiller = require('tiller')
  tiller.setup({ cmd = config.cmd, args = config.args, cwd = config.workdir })
  local client = require('tiller.client')
  local chat = require('tiller.chat')
  local events = harness.record_events(client)
  local notes = harness.capture_notes()
  obs.notes = notes
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end

  vim.cmd('edit ' .. vim.fn.fnameescape(config.workdir .. '/code.txt'))
  local code_buf = vim.api.nvim_get_current_buf()
  vim.cmd('Tiller change things')
  wait_for('the run to settle', harness.settled(events, 1))
  obs.chat = chat.lines()
  obs.code_after_run = vim.api.nvim_buf_get_lines(code_buf, 0, -1, false)

  local listed
  tiller.changes(false, function(err, items)
    listed = { err = err or vim.NIL, items = items or vim.NIL }
  end)
  wait_for('the changes', function()
    return listed ~= nil
  end)
  obs.qflist = vim.tbl_map(function(item)
    return { file = vim.api.nvim_buf_get_name(item.bufnr), lnum = item.lnum, text = item.text }
  end, vim.fn.getqflist())
  obs.qf_title = vim.fn.getqflist({ title = true }).title
  obs.qf_open = vim.fn.getqflist({ winid = true }).winid ~= 0

  local undone
  tiller.undo(function(err, result)
    undone = { err = err or vim.NIL, result = result or vim.NIL }
  end)
  wait_for('the undo', function()
    return undone ~= nil
  end)
  obs.undone = undone
  obs.code_after_undo = vim.api.nvim_buf_get_lines(code_buf, 0, -1, false)
  obs.chat_after_undo = chat.lines()
  tiller.stop()
  wait_for('the server to exit', function()
    return not client.is_alive()
  end)
end)
