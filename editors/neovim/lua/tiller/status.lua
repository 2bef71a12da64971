-- tiller.status: what the agent is doing, for a statusline or winbar.
--
--   require('tiller').status()  -->  '⠹ Tiller: running bash · 1.2k tokens · $0.0031'
--
-- States: idle, thinking (from the start of a run to its first token, and between steps),
-- writing, running <tool>, waiting for you (a permission question is open), stopped. Tokens
-- and cost add up the `usage` of every model call since the plugin started. While the agent is
-- busy a timer redraws the statuslines so the spinner turns. The chat window's own statusline
-- shows it.

local M = {}

local uv = vim.uv or vim.loop

M.SPINNER = { '⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏' }
M.INTERVAL_MS = 120

local S = {
  phase = 'stopped', -- 'stopped', 'idle', 'thinking', 'writing', 'tool'
  tools = {}, -- toolCallId -> tool name, while running
  input_tokens = 0,
  output_tokens = 0,
  cost = 0,
  frame = 1,
  timer = nil,
}

local function open_questions()
  local ok, review = pcall(require, 'tiller.review')
  return ok and #review.open_questions() or 0
end

local function busy()
  return S.phase ~= 'idle' and S.phase ~= 'stopped'
end

local function tick()
  S.frame = S.frame % #M.SPINNER + 1
  pcall(vim.cmd, 'redrawstatus!')
end

local function update_timer()
  if busy() and not S.timer then
    S.timer = uv.new_timer()
    S.timer:start(M.INTERVAL_MS, M.INTERVAL_MS, vim.schedule_wrap(function()
      if S.timer then
        tick()
      end
    end))
  elseif not busy() and S.timer then
    S.timer:stop()
    S.timer:close()
    S.timer = nil
    pcall(vim.cmd, 'redrawstatus!')
  end
end

local function running_tool()
  for _, name in pairs(S.tools) do
    return name
  end
  return nil
end

local function add_usage(usage)
  if type(usage) ~= 'table' then
    return
  end
  S.input_tokens = S.input_tokens + (tonumber(usage.inputTokens) or 0)
  S.output_tokens = S.output_tokens + (tonumber(usage.outputTokens) or 0)
  S.cost = S.cost + (tonumber(usage.cost) or 0)
end

local handlers = {
  agent_start = function()
    S.phase, S.tools = 'thinking', {}
  end,
  turn_start = function()
    S.phase = next(S.tools) and 'tool' or 'thinking'
  end,
  message_update = function()
    S.phase = 'writing'
  end,
  message_end = function(event)
    if type(event.message) == 'table' and event.message.role == 'assistant' then
      add_usage(event.message.usage)
      S.phase = 'thinking'
    end
  end,
  tool_execution_start = function(event)
    S.tools[tostring(event.toolCallId)] = tostring(event.toolName or 'tool')
    S.phase = 'tool'
  end,
  tool_execution_end = function(event)
    S.tools[tostring(event.toolCallId)] = nil
    S.phase = next(S.tools) and 'tool' or 'thinking'
  end,
  agent_settled = function()
    S.phase, S.tools = 'idle', {}
  end,
}

--- Follow one `agent/event` (tiller.init registers it).
function M.handle_event(event)
  if event.parentToolCallId ~= nil then -- a subagent's run is not the chat's
    return
  end
  local handler = handlers[event.type]
  if handler then
    handler(event)
    update_timer()
  end
end

--- The server started (`alive` true) or exited.
function M.server_state(alive)
  S.phase, S.tools = alive and 'idle' or 'stopped', {}
  update_timer()
end

local function tokens(n)
  if n >= 1000000 then
    return string.format('%.1fM', n / 1000000)
  elseif n >= 1000 then
    return string.format('%.1fk', n / 1000)
  end
  return tostring(n)
end

--- The state as a short text: spinner (when busy), state, tokens and cost.
function M.text()
  local what
  local questions = open_questions()
  if questions > 0 then
    what = questions == 1 and 'waiting for you' or string.format('waiting for you (%d)', questions)
  elseif S.phase == 'tool' then
    what = 'running ' .. (running_tool() or 'a tool')
  else
    what = S.phase
  end
  local text = 'Tiller: ' .. what
  if busy() or questions > 0 then
    text = M.SPINNER[S.frame] .. ' ' .. text
  end
  local total = S.input_tokens + S.output_tokens
  if total > 0 then
    text = text .. ' · ' .. tokens(total) .. ' tokens'
    if S.cost >= 0.00005 then -- shown to 4 decimals
      text = text .. string.format(' · $%.4f', S.cost)
    end
  end
  return text
end

--- M.text() escaped for 'statusline' (the chat window's: `%!v:lua...statusline()`).
function M.statusline()
  local text = M.text():gsub('%%', '%%%%')
  return ' ' .. text .. '%=%f '
end

--- The state as data: {phase, tool, questions, inputTokens, outputTokens, cost}.
function M.get()
  return {
    phase = S.phase,
    tool = running_tool(),
    questions = open_questions(),
    inputTokens = S.input_tokens,
    outputTokens = S.output_tokens,
    cost = S.cost,
  }
end

return M
