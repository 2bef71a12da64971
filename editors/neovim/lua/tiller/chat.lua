-- tiller.chat: the chat buffer, rendered from `agent/event` notifications.
--
-- Layout (the buffer is a scratch buffer, filetype `tiller`, not modifiable by hand):
--
--   ## You
--   run the tests
--
--   ## Tiller
--   > thinking, quoted
--
--   The reply, streamed from text deltas.
--
--   ✓ bash: pytest -q                 <- a tool call: a fold whose first line shows the call
--     3 passed                           as the server describes it (a command after its
--   ✓ Edit src/app.py                    tool's name, else its title); the result (at most
--     Applied 1 edit                     `tool_output_lines` lines, then a file change's
--     @@ -1 +1 @@ …                      diff) is folded inside
--   ✗ Error: openai: 401 Unauthorized   <- a run that ended with stopReason "error"
--
-- Tool blocks (tiller.chat_tools) are tracked with extmarks, so a result arriving for an earlier
-- call of a parallel batch is inserted under its own header. Folds come from 'foldexpr'
-- (tiller.chatbuf.foldexpr), which reads the block table: they work in every window that shows
-- the buffer. This module renders events and notices; tiller.chatbuf holds the buffer and the
-- chat's state.

local B = require('tiller.chatbuf')
local T = require('tiller.chat_tools')

local M = {}

M.config = B.config
M.buffer, M.window, M.open, M.clear = B.buffer, B.window, B.open, B.clear
M.foldexpr, M.lines = B.foldexpr, B.lines
M.append_block, M.mark_row, M.set_block_line = B.append_block, B.mark_row, B.set_block_line
M.permission_answered, M.block_line = T.permission_answered, T.block_line

-- Sections -------------------------------------------------------------------------------------

local function user_message(message)
  local lines = { '## You' }
  vim.list_extend(lines, B.trim_trailing_blanks(B.content_lines(message.content)))
  B.write(lines, 'user', 'TillerHeader')
end

local function assistant_start()
  B.end_stream()
  if B.section() ~= 'assistant' then
    B.write({ '## Tiller' }, 'assistant', 'TillerHeader')
  end
  B.start_message()
end

--- Append a notice: kind 'error' (shown as "✗ Error: ..."), 'warning' or 'info'.
function M.notice(kind, text)
  local lines = vim.split(tostring(text), '\n', { plain = true })
  local group = 'TillerNotice'
  if kind == 'error' then
    lines[1] = '✗ Error: ' .. lines[1]
    group = 'TillerError'
  end
  B.write(lines, 'notice', group)
end

local function retry_scheduled(event)
  -- The partial message is discarded by the server: discard what was shown of it.
  B.discard_message()
  local delay = (tonumber(event.delayMs) or 0) / 1000
  M.notice(
    'warning',
    string.format(
      '⟳ %s (retry %s/%s in %.1fs)',
      tostring(event.errorMessage or 'provider error'),
      tostring(event.attempt or '?'),
      tostring(event.maxAttempts or '?'),
      delay
    )
  )
end

local STOP_NOTICES = {
  aborted = '⊘ Aborted',
  maxTurns = '⚠ Stopped: turn limit reached (:TillerContinue goes on)',
  maxTokens = '⚠ Stopped: token limit of the run reached (:TillerContinue goes on)',
  length = '⚠ Stopped: the model hit its output limit',
}

local function agent_end(event)
  B.end_stream()
  local reason = event.stopReason
  if reason == 'error' then
    M.notice('error', event.errorMessage or 'the run failed')
  elseif STOP_NOTICES[reason] then
    M.notice('warning', STOP_NOTICES[reason])
  elseif reason ~= 'stop' and reason ~= 'toolUse' and reason ~= nil then
    M.notice('warning', '⚠ Stopped: ' .. tostring(reason))
  end
end

-- Events ---------------------------------------------------------------------------------------

local function message_role(event)
  return type(event.message) == 'table' and event.message.role or nil
end

local dispatch = {
  message_start = function(event)
    local role = message_role(event)
    if role == 'user' then
      user_message(event.message)
    elseif role == 'assistant' then
      assistant_start()
    end
  end,
  message_update = function(event)
    if event.kind == 'text' or event.kind == 'thinking' then
      B.stream(event.kind, event.delta)
    end
  end,
  message_end = function(event)
    if message_role(event) == 'assistant' then
      B.end_stream()
    end
  end,
  tool_execution_start = T.tool_start,
  tool_execution_update = T.tool_update,
  tool_execution_end = T.tool_end,
  retry_scheduled = retry_scheduled,
  agent_end = agent_end,
  -- A hook ended: one line, unless it ran quietly (ok, with nothing to say). Its start is
  -- shown by its end: most hooks take a moment.
  hook_end = function(event)
    local line = M.hook_line(event)
    if line then
      local failed = event.outcome == 'error' or event.outcome == 'timeout'
      M.notice(failed and 'warning' or 'info', line)
    end
  end,
  -- The session's model is deprecated, was replaced, or lacks the thinking level.
  notice = function(event)
    local warning = event.level == 'warning'
    M.notice(warning and 'warning' or 'info', (warning and '⚠ ' or 'ℹ ') .. tostring(event.message))
  end,
}

local HOOK_OUTCOMES = { ok = 'ran', blocked = 'blocked', error = 'failed', timeout = 'timed out' }

--- The line a `hook_end` event is shown as, or nil for a hook that ran quietly.
function M.hook_line(event)
  if event.outcome == 'ok' and (event.message == nil or event.message == '') then
    return nil
  end
  local said = (event.message and event.message ~= '') and (': ' .. tostring(event.message)) or ''
  return string.format(
    '%s %s hook %s (%s)%s',
    event.outcome == 'ok' and '↪' or '⚠',
    tostring(event.hookEvent),
    HOOK_OUTCOMES[event.outcome] or tostring(event.outcome),
    tostring(event.command),
    said
  )
end

--- Render one `agent/event` (its params) into the chat buffer.
function M.handle_event(event)
  if event.parentToolCallId ~= nil then -- a subagent's: drawn inside its task call's block
    M.buffer()
    T.child_event(event)
    return
  end
  local handler = dispatch[event.type]
  if handler then
    M.buffer()
    handler(event)
  end
end

M.STDERR_SHOWN = 12 -- lines of the server's stderr shown when it exits unasked

--- The server process exited; `stopped` when :TillerStop asked for it. Otherwise the last
--- lines it wrote to stderr (`stderr`) say why.
function M.server_exited(code, signal, stopped, stderr)
  if not B.valid() then
    return
  end
  B.end_stream()
  if stopped then
    M.notice('info', '■ Tiller stopped')
    return
  end
  local lines = {
    string.format('tiller exited (code %s, signal %s); :Tiller starts it again', code, signal),
  }
  local tail = B.trim_trailing_blanks(vim.deepcopy(stderr or {}))
  if #tail > 0 then
    table.insert(lines, 'its last words (stderr):')
    for i = math.max(1, #tail - M.STDERR_SHOWN + 1), #tail do
      table.insert(lines, '  ' .. tail[i])
    end
  end
  M.notice('error', table.concat(lines, '\n'))
end

local warned_unsaved = false

--- The agent changed the buffer of `path`, which stays unsaved (save_edits = false): say once
--- what that means.
function M.kept_unsaved(path)
  if warned_unsaved then
    return
  end
  warned_unsaved = true
  M.notice(
    'warning',
    string.format(
      '⚠ %s changed but not saved (save_edits = false): the agent\'s shell commands and '
        .. 'searches see the files on disk until you save them',
      vim.fn.fnamemodify(path, ':~:.')
    )
  )
end

--- Show a prompt the server never received (it was not running, or exited first).
function M.unsent(text)
  local lines = { '## You (not sent)' }
  vim.list_extend(lines, vim.split(text, '\n', { plain = true }))
  B.write(lines, 'user', 'TillerNotice')
end

return M
