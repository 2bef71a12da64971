-- Background processes against the real server: a run starts one; :TillerProcesses lists it
-- with its state, shows its output in a scratch buffer, and kills it; the chat says it ended;
-- afterwards it is listed as killed and offers no Kill.

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
  obs.notes = harness.capture_notes()
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end

  -- The picker: each call answers with the item labelled as `answers` says next.
  local answers = {}
  obs.pickers = {}
  vim.ui.select = function(items, opts, on_choice)
    local labels = vim.tbl_map(opts.format_item or tostring, items)
    table.insert(obs.pickers, { prompt = opts.prompt, labels = labels })
    local want = table.remove(answers, 1)
    for index, label in ipairs(labels) do
      if label:find(want, 1, true) then
        return on_choice(items[index], index)
      end
    end
    on_choice(nil, nil)
  end

  vim.cmd('Tiller start the server')
  wait_for('the run to settle', harness.settled(events, 1))

  local function pick(...)
    answers = { ... }
    local done
    tiller.processes(function(err, what)
      done = { err = err or vim.NIL, what = what or vim.NIL }
    end)
    wait_for('the pick', function()
      return done ~= nil
    end)
    return done
  end

  local shown = pick('running', 'Show the output')
  obs.shown_action = shown.what.action
  local buf = vim.fn.bufnr('tiller://process/1')
  obs.output_lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  obs.output_modifiable = vim.bo[buf].modifiable

  local killed = pick('running', 'Kill')
  obs.killed = killed.what.result
  wait_for('the exit event', function()
    return harness.count(events, 'process_exit') >= 1
  end)
  wait_for('the chat to say it', function()
    return vim.tbl_contains(chat.lines(), '● background process 1 killed (SIGTERM): '
      .. 'echo serving; exec sleep 1000')
  end)

  pick('killed', 'nothing')
  local killed_again
  tiller.kill('1', function(err, process)
    killed_again = { err = err or vim.NIL, process = process or vim.NIL }
  end)
  wait_for('the second kill', function()
    return killed_again ~= nil
  end)
  obs.killed_again = killed_again
  local unknown
  tiller.kill('7', function(err)
    unknown = err
  end)
  wait_for('the unknown kill', function()
    return unknown ~= nil
  end)
  obs.unknown = unknown
  tiller.stop()
  wait_for('the server to exit', function()
    return not client.is_alive()
  end)
end)
