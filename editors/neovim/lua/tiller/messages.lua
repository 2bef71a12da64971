-- tiller.messages: every message the plugin shows goes through M.show.
--
-- A message that does not fit on the command line raises the hit-enter prompt ("Press ENTER"),
-- which holds the screen (the streaming chat with it) until a key is pressed, and the key then
-- lands wherever the cursor is. So a message is one line, and with Neovim's own vim.notify
-- (which echoes it) it is cut to the room the command line has (v:echospace). A vim.notify
-- that a plugin replaced (nvim-notify, noice, fidget...) gets the whole line.
--
-- M.reason words the server's errors in the plugin's own commands, not in wire methods.

local M = {}

M.AGENT_BUSY = -32010
M.NO_ACTIVE_RUN = -32011
M.CANNOT_CONTINUE = -32012

local REASONS = {
  [M.AGENT_BUSY] = 'the agent is running (:TillerAbort stops it)',
  [M.NO_ACTIVE_RUN] = 'no run is active',
  [M.CANNOT_CONTINUE] = 'nothing to continue (:Tiller sends a new prompt)',
}

--- The reason an error `err` (a JSON-RPC error, or what a request callback got) gives, in
--- the plugin's words for the codes it knows, else the server's message.
function M.reason(err)
  if type(err) ~= 'table' then
    return tostring(err)
  end
  if err.exited then
    return 'the server exited'
  end
  return REASONS[err.code] or tostring(err.message or vim.inspect(err))
end

-- Is vim.notify Neovim's own (it echoes the message)?
local function builtin_notify()
  local info = debug.getinfo(vim.notify, 'S')
  return info ~= nil and info.source:match('vim/_editor%.lua$') ~= nil
end

--- `text` cut to `room` screen cells, with "…" where it was cut.
function M.fit(text, room)
  if vim.fn.strdisplaywidth(text) <= room then
    return text
  end
  local n = math.min(vim.fn.strchars(text), math.max(room - 1, 0))
  while n > 0 and vim.fn.strdisplaywidth(vim.fn.strcharpart(text, 0, n)) > room - 1 do
    n = n - 1
  end
  return vim.fn.strcharpart(text, 0, n) .. '…'
end

--- Show "tiller: <text>" at `level` (default INFO) through vim.notify, on one line that fits.
function M.show(text, level)
  local line = ('tiller: ' .. tostring(text)):gsub('%s*[\r\n]+%s*', ' ')
  if builtin_notify() then
    line = M.fit(line, math.max(vim.v.echospace, 1))
  end
  vim.notify(line, level or vim.log.levels.INFO)
end

return M
