-- Sessions against the real server, over two Neovim processes (config.phase). Phase 1: a
-- prompt, :TillerNew (a marker, a second conversation), :TillerStop and a prompt that goes on
-- with the same session in the new server. Phase 2 (a new Neovim): the first prompt goes on
-- with the remembered session, whose history the chat shows; :TillerSessions picks the first
-- conversation and the next prompt goes on with it.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')
local wait_for = harness.wait_for

harness.run(function(config, obs)
  vim.cmd('runtime plugin/tiller.lua')
  require('tiller').setup({ cmd = config.cmd, args = config.args, cwd = config.workdir })
  local client = require('tiller.client')
  local chat = require('tiller.chat')
  local sessions = require('tiller.sessions')
  local events = harness.record_events(client)
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end
  local function run(command)
    local before = harness.count(events, 'agent_settled')
    vim.cmd(command)
    wait_for(command, harness.settled(events, before + 1))
  end

  if config.phase == 1 then
    run('Tiller first question')
    obs.first_session = sessions.current()
    local done = false
    vim.cmd('TillerNew')
    wait_for('the new session', function()
      return sessions.current() ~= obs.first_session
    end)
    run('Tiller other topic')
    obs.second_session = sessions.current()
    vim.cmd('TillerStop')
    wait_for('the server to exit', function()
      return not client.is_alive()
    end)
    run('Tiller after stop')
    obs.after_stop_session = sessions.current()
    obs.chat = chat.lines()
    done = true
    obs.done = done
  else
    run('Tiller after restart')
    obs.restart_session = sessions.current()
    obs.restarted_chat = chat.lines()
    local offered
    vim.ui.select = function(items, opts, on_choice)
      offered = vim.tbl_map(opts.format_item, items)
      for _, item in ipairs(items) do
        if item.title == 'first question' then
          return on_choice(item)
        end
      end
      on_choice(nil)
    end
    local picked = nil
    require('tiller').sessions(function(err, id)
      picked = { err = err or vim.NIL, id = id }
    end)
    wait_for('the picked session', function()
      return picked ~= nil
    end)
    obs.offered = offered
    obs.picked = picked
    obs.picked_chat = chat.lines()
    run('Tiller back to first')
    obs.final_chat = chat.lines()
  end
  require('tiller').stop()
  wait_for('the server to exit', function()
    return not client.is_alive()
  end)
end)
