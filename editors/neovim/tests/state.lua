-- Visible state against the real server: the status text (thinking before the first token,
-- waiting for you, running a tool, idle with tokens), the chat window's statusline, a tool's
-- fold the user opened staying open while its output updates, 'foldlevel' left as the user
-- set it, and the :TillerModel, :TillerThinking and :TillerMode pickers.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')
local wait_for = harness.wait_for

harness.run(function(config, obs)
  vim.cmd('runtime plugin/tiller.lua')
  local tiller = require('tiller')
  tiller.setup({ cmd = config.cmd, args = config.args, cwd = config.workdir })
  local client = require('tiller.client')
  local chat = require('tiller.chat')
  local review = require('tiller.review')
  vim.notify = function() end
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end
  local events, status_at = {}, {}
  client.add_listener(function(event)
    table.insert(events, event)
    if event.type == 'agent_start' and not status_at.start then
      status_at.start = tiller.status()
    end
  end)
  table.insert(review.on_asked, function(q)
    status_at.question = tiller.status()
    vim.schedule(function()
      review.answer(q, 'allowOnce')
    end)
  end)
  local function seen(pred)
    for _, event in ipairs(events) do
      if pred(event) then
        return true
      end
    end
    return false
  end
  local function settled(n)
    return harness.settled(events, n)
  end

  obs.before = tiller.status()
  vim.cmd('Tiller run it')
  local chat_win = chat.window()
  obs.statusline_option = vim.wo[chat_win].statusline
  wait_for('the first output', function()
    return seen(function(e)
      local partial = e.type == 'tool_execution_update' and e.partialResult or {}
      return type(partial.output) == 'string' and partial.output:find('one', 1, true) ~= nil
    end)
  end)
  status_at.tool = tiller.status()
  obs.statusline_text = vim.api.nvim_eval_statusline(
    vim.wo[chat_win].statusline, { winid = chat_win }).str
  -- The user opens the running tool's fold; its output keeps coming.
  local lnum = chat.block_line('call_slow')
  vim.api.nvim_win_call(chat_win, function()
    vim.cmd(lnum .. 'foldopen')
  end)
  vim.fn.writefile({}, config.workdir .. '/go')
  wait_for('run 1 to settle', settled(1))
  vim.api.nvim_win_call(chat_win, function()
    obs.fold_after_updates = { closed = vim.fn.foldclosed(lnum), level = vim.fn.foldlevel(lnum) }
  end)
  obs.block_lines = vim.api.nvim_buf_get_lines(chat.buffer(), lnum - 1, lnum + 2, false)
  status_at.idle = tiller.status()
  obs.status = status_at
  obs.state = require('tiller.status').get()

  -- Pickers: another model, then the mode `auto` (no question for the next command); then
  -- each picker again (cancelled), to see the new choice marked.
  local offered = {}
  local pick = true
  vim.ui.select = function(items, opts, on_choice)
    local labels = vim.tbl_map(opts.format_item or tostring, items)
    table.insert(offered, { prompt = opts.prompt, labels = labels })
    for i, label in ipairs(labels) do
      local name = label:gsub('^● ', ''):gsub('^  ', '')
      if pick and (name == config.pick_model or name == 'auto' or name == 'max') then
        return on_choice(items[i])
      end
    end
    on_choice(nil)
  end
  local function picked(fn)
    local answer
    fn(function(err, result)
      answer = { err = err or vim.NIL, result = result or vim.NIL }
    end)
    wait_for('the picker', function()
      return answer ~= nil
    end)
    return answer
  end
  obs.model_set = picked(tiller.model)
  obs.mode_set = picked(tiller.mode)
  obs.thinking_set = picked(tiller.thinking)
  pick = false
  obs.model_again, obs.mode_again = picked(tiller.model), picked(tiller.mode)
  obs.thinking_again = picked(tiller.thinking)
  obs.offered = offered

  -- The user's foldlevel survives :Tiller.
  vim.wo[chat_win].foldlevel = 2
  local asked_before = status_at.question
  status_at.question = nil
  vim.cmd('Tiller again')
  obs.foldlevel_after = vim.wo[chat_win].foldlevel
  wait_for('run 2 to settle', settled(2))
  obs.asked_in_auto = status_at.question ~= nil
  status_at.question = asked_before
  tiller.stop()
  wait_for('the server to exit', function()
    return not client.is_alive()
  end)
  obs.stopped = tiller.status()
end)
