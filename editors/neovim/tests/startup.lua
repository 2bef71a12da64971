-- A server that cannot start: :Tiller with a bad argument shows the prompt that was not sent and
-- the server's own reason (its stderr), not only an exit code; a command that does not exist
-- says so.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')

harness.run(function(config, obs)
  vim.cmd('runtime plugin/tiller.lua')
  local notes = harness.capture_notes()
  local tiller = require('tiller')
  local client = require('tiller.client')
  local chat = require('tiller.chat')
  local exited = false
  client.on_exit(function()
    exited = true
  end)
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end
  tiller.setup({ cmd = config.cmd, args = { '--bogus-flag' }, cwd = config.workdir })
  vim.cmd('Tiller hello there')
  harness.wait_for('the server to exit', function()
    return exited
  end)
  obs.bad_argument = chat.lines()

  tiller.setup({ cmd = { config.workdir .. '/no-such-tiller' }, cwd = config.workdir })
  vim.cmd('Tiller second try')
  obs.missing = chat.lines()
  obs.notes = notes
end)
