-- A tiny harness for the headless test scripts that tests/test_neovim.py runs:
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
