-- The user commands of tiller.nvim; the modules load on first use.
if vim.g.loaded_tiller then
  return
end
vim.g.loaded_tiller = true

if vim.fn.has('nvim-0.7') == 0 then
  vim.api.nvim_err_writeln('tiller.nvim needs Neovim 0.7 or newer')
  return
end

local function tiller()
  return require('tiller')
end

local command = vim.api.nvim_create_user_command

command('Tiller', function(opts)
  tiller().prompt(opts.args, { count = opts.range, line1 = opts.line1, line2 = opts.line2 })
end, { nargs = '*', range = true, desc = 'Tiller: open the chat and send a prompt' })

command('TillerSteer', function(opts)
  tiller().steer(opts.args)
end, { nargs = '+', desc = 'Tiller: change the direction of the running agent' })

command('TillerFollowUp', function(opts)
  tiller().follow_up(opts.args)
end, { nargs = '+', desc = 'Tiller: queue a message for when the agent is done' })

command('TillerAbort', function()
  tiller().abort()
end, { nargs = 0, desc = 'Tiller: abort the running agent' })

command('TillerContinue', function()
  tiller().continue()
end, { nargs = 0, desc = 'Tiller: continue after an error, an abort or a limit' })

command('TillerSessions', function()
  tiller().sessions()
end, { nargs = 0, desc = 'Tiller: pick a saved session and go on with it' })

command('TillerNew', function()
  tiller().new_session()
end, { nargs = 0, desc = 'Tiller: start a new session' })

command('TillerModel', function()
  tiller().model()
end, { nargs = 0, desc = "Tiller: pick the session's model" })

command('TillerThinking', function()
  tiller().thinking()
end, { nargs = 0, desc = "Tiller: pick the session's thinking level" })

command('TillerMode', function()
  tiller().mode()
end, { nargs = 0, desc = "Tiller: pick the session's permission mode" })

command('TillerChanges', function(opts)
  tiller().changes(opts.bang)
end, { nargs = 0, bang = true, desc = 'Tiller: the files the last run changed, in quickfix' })

command('TillerUndo', function()
  tiller().undo()
end, { nargs = 0, desc = 'Tiller: put back the files the last run changed' })

command('TillerProcesses', function()
  tiller().processes()
end, { nargs = 0, desc = "Tiller: the session's background processes: output, kill" })

command('TillerKill', function(opts)
  tiller().kill(opts.args)
end, { nargs = 1, desc = 'Tiller: kill background process N' })

command('TillerStop', function()
  tiller().stop()
end, { nargs = 0, desc = 'Tiller: stop the server' })
