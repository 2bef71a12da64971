-- A tiny harness for the headless test scripts that tests/editors/test_neovim.py runs:
--
--   nvim --headless --clean -u NONE --cmd 'set rtp+=editors/neovim' \
--     --cmd "let g:tiller_test_config = '/tmp/.../config.json'" -c 'luafile <script>'
--
-- The config file is JSON written by the pytest side; its `output` names the JSON file the
-- observations go to. harness.run(main) calls main(config, obs), records `ok` and `error`
-- (with a traceback, plus what harness.on_failure adds), writes the observations and quits
-- Neovim, whatever happened.

local M = {}

local function read_json(path)
  return vim.json.decode(table.concat(vim.fn.readfile(path), '\n'))
end

--- Wait (processing events) until cond() is true; raise naming `what` after timeout_ms. The
--- timeout is a safety bound only: tests never depend on timing.
function M.wait_for(what, cond, timeout_ms)
  if not vim.wait(timeout_ms or 60000, cond, 10) then
    error('timed out waiting for ' .. what, 2)
  end
end

--- Feed `text` as typed keys (termcodes such as <CR> replaced), processed before returning.
function M.keys(text)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(text, true, false, true), 'xt', false)
end

--- Replace vim.notify with a recorder; returns the list of {message, level} it fills.
function M.capture_notes()
  local notes = {}
  vim.notify = function(message, level)
    table.insert(notes, { message = message, level = level })
  end
  return notes
end

--- Every event `client` publishes from now on, in order: a list filled as they come.
function M.record_events(client)
  local events = {}
  client.add_listener(function(event)
    table.insert(events, event)
  end)
  return events
end

--- How many of `events` are of `type`.
function M.count(events, type)
  local n = 0
  for _, event in ipairs(events) do
    n = n + (event.type == type and 1 or 0)
  end
  return n
end

--- A condition for wait_for: `n` runs have settled among `events`.
function M.settled(events, n)
  return function()
    return M.count(events, 'agent_settled') >= n
  end
end

--- Set by a script: called with the observations when main fails, to add what helps to see
--- why (e.g. the chat buffer's lines).
M.on_failure = nil

function M.run(main)
  local config = read_json(vim.g.tiller_test_config)
  local obs = {}
  local ok, err = xpcall(function()
    main(config, obs)
  end, debug.traceback)
  obs.ok = ok
  if not ok then
    obs.error = tostring(err)
    if M.on_failure then
      pcall(M.on_failure, obs)
    end
  end
  local encoded_ok, encoded = pcall(vim.json.encode, obs)
  if not encoded_ok then
    encoded = vim.json.encode({ ok = false, error = 'could not encode observations: ' .. encoded })
  end
  vim.fn.writefile({ encoded }, config.output)
  vim.cmd('qall!')
end

return M
