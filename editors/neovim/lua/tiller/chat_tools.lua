-- tiller.chat_tools: tool call blocks in the chat buffer (see tiller.chat for the layout).
--
-- Each block is a header line showing the call, and a body with its output, result and, for a
-- file change, the diff; tiller.chatbuf keeps the blocks (one per call, found by its id, so a
-- result arriving for an earlier call of a parallel batch lands under its own header) and
-- folds them. A call is shown as the server describes it (tool_execution_start's title, kind
-- and path), never from its tool's name: an MCP tool, or one added later, shows as a built-in
-- one does.
--
-- A `task` call's subagent (its events carry `parentToolCallId`) is drawn inside that call's
-- block, live, as a card of its own: `▸ explore · 2 tool calls · working`, its calls with
-- their status, and what it said last (quoted with `│`); the call's result comes after it.

local B = require('tiller.chatbuf')

local M = {}

-- Subagents by the id of their parent's task call: { agent, calls = { {id, text, status} },
-- said, ended }.
local children = {}

local function one_line(text, max)
  text = tostring(text):gsub('\r?\n', ' ⏎ ')
  if #text > max then
    text = text:sub(1, max) .. '…'
  end
  return text
end

local function text_field(value)
  return type(value) == 'string' and value ~= '' and value or nil
end

--- What a tool call's header shows after its status icon, from `event` (a
--- tool_execution_start, or a tool_execution_end when the start was not seen): a command (kind
--- `execute`) after its tool's name (`bash: make test`); else the title its tool gave it
--- (`Edit notes.txt`); else the tool's name, and the path it acts on or its arguments.
function M.describe(event)
  local name = tostring(event.toolName or 'tool')
  local title = text_field(event.title)
  if title and event.kind == 'execute' then
    return name .. ': ' .. one_line(title, 300)
  end
  if title and title ~= name then
    return one_line(title, 300)
  end
  local path = text_field(event.path)
  if path then
    return name .. ': ' .. one_line(vim.fn.fnamemodify(path, ':~:.'), 300)
  end
  local args = event.args
  if type(args) ~= 'table' then
    return args ~= nil and (name .. ': ' .. one_line(args, 300)) or name
  end
  if next(args) == nil then
    return name
  end
  local ok, json = pcall(vim.json.encode, args)
  return name .. ': ' .. one_line(ok and json or vim.inspect(args), 300)
end

local ICONS = { running = '⚙', ok = '✓', error = '✗' }

local function header(call)
  return ICONS[call.status] .. ' ' .. call.text
end

local function group(call)
  return call.status == 'error' and 'TillerToolError' or 'TillerTool'
end

-- Indented body lines: the first `max` of `lines` (or the last, with from_end), with a line
-- saying how many were left out.
local function body_lines(lines, from_end)
  local max = B.config.tool_output_lines
  lines = B.trim_trailing_blanks(lines)
  local out = {}
  if #lines == 0 then
    return { '  (no output)' }
  end
  local first, last = 1, #lines
  if #lines > max then
    if from_end then
      first = #lines - max + 1
      table.insert(out, string.format('  … (%d earlier lines)', first - 1))
    else
      last = max
    end
  end
  for i = first, last do
    table.insert(out, '  ' .. lines[i])
  end
  if last < #lines then
    table.insert(out, string.format('  … (%d more lines)', #lines - last))
  end
  return out
end

-- Replace the body of call `id` (its header refreshed).
local function set_body(id, call, body)
  B.set_call(id, header(call), body, group(call))
end

local CHILD_ICONS = { running = '⚙', waiting = '?', ok = '✓', error = '✗' }

-- The lines of call `id`'s subagent card (empty when it has none).
local function child_lines(id)
  local child = children[tostring(id)]
  if not child then
    return {}
  end
  local n = #child.calls
  local lines = { string.format('  ▸ %s · %d tool call%s · %s', child.agent, n, n == 1 and '' or 's',
    child.ended or 'working') }
  for _, call in ipairs(child.calls) do
    table.insert(lines, '    ' .. CHILD_ICONS[call.status] .. ' ' .. call.text)
  end
  if child.said ~= '' then
    local said = B.trim_trailing_blanks(vim.split(child.said, '\n', { plain = true }))
    local first = math.max(1, #said - B.config.tool_output_lines + 1)
    for i = first, #said do
      table.insert(lines, '    │ ' .. said[i])
    end
  end
  return lines
end

--- One event of a subagent (it has `parentToolCallId`): its card in the parent call's block.
function M.child_event(event)
  local parent = tostring(event.parentToolCallId)
  local call = B.call(parent)
  if not call then
    return
  end
  local child = children[parent]
  if not child then
    child = { agent = 'subagent', calls = {}, said = '' }
    children[parent] = child
  end
  if event.type == 'tool_execution_start' then
    table.insert(child.calls, { id = event.toolCallId, text = M.describe(event), status = 'running' })
  elseif event.type == 'tool_execution_update' or event.type == 'tool_execution_end' then
    local waiting = type(event.partialResult) == 'table' and event.partialResult.status == 'awaitingPermission'
    if event.type == 'tool_execution_update' and not waiting then
      return
    end
    for _, known in ipairs(child.calls) do
      if known.id == event.toolCallId then
        known.status = waiting and 'waiting' or (event.isError and 'error' or 'ok')
      end
    end
  elseif event.type == 'message_end' and type(event.message) == 'table' and event.message.role == 'assistant' then
    local said = table.concat(B.content_lines(event.message.content), '\n')
    if vim.trim(said) == '' then
      return
    end
    child.said = said
  elseif event.type == 'agent_end' then
    child.ended = tostring(event.stopReason)
  else
    return
  end
  if call.status == 'running' then
    B.set_call(parent, header(call), child_lines(parent), group(call))
  end
end

function M.tool_start(event)
  local call = { status = 'running', text = M.describe(event) }
  B.add_call(event.toolCallId, call, header(call), group(call))
end

function M.tool_update(event)
  local call = B.call(event.toolCallId)
  local partial = event.partialResult
  if not call or type(partial) ~= 'table' then
    return
  end
  if type(partial.agent) == 'string' and type(partial.sessionId) == 'string' then -- a task's subagent
    children[tostring(event.toolCallId)] = { agent = partial.agent, calls = {}, said = '' }
    set_body(event.toolCallId, call, child_lines(event.toolCallId))
  elseif partial.status == 'awaitingPermission' then
    set_body(event.toolCallId, call, { '  (waiting for your permission)' })
  elseif type(partial.output) == 'string' then
    set_body(event.toolCallId, call, body_lines(vim.split(partial.output, '\n', { plain = true }), true))
  end
end

--- The user answered the permission question of tool call `id` (called by tiller.handlers).
function M.permission_answered(id, outcome)
  local call = B.call(id)
  if call and call.status == 'running' then
    local allowed = outcome == 'allowOnce' or outcome == 'allowAlways'
    set_body(id, call, { allowed and '  (allowed, running)' or '  (rejected)' })
  end
end

function M.tool_end(event)
  local call = B.call(event.toolCallId)
  if not call or call.status ~= 'running' then
    M.tool_start(event)
    call = B.call(event.toolCallId)
  end
  local result = type(event.result) == 'table' and event.result or {}
  call.status = event.isError and 'error' or 'ok'
  local body = child_lines(event.toolCallId)
  vim.list_extend(body, body_lines(B.content_lines(result.content)))
  -- A result with a diff (a file change) shows it, in full, inside the fold.
  local diff = type(result.details) == 'table' and result.details.diff
  if type(diff) == 'string' and diff ~= '' then
    for _, line in ipairs(B.trim_trailing_blanks(vim.split(diff, '\n', { plain = true }))) do
      table.insert(body, '  ' .. line)
    end
  end
  set_body(event.toolCallId, call, body)
end

--- The 1-based line of the header of tool call `id`, or nil.
M.block_line = B.call_line

return M
