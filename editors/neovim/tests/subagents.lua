-- A task call's subagent in the chat, with no server: `agent/event`s fed as the server sends
-- them. The parent's call starts, names its subagent; the subagent's events (they carry
-- `parentToolCallId`) draw its card inside the call's block, live, never as the chat's own
-- messages; the call's result comes after the card, all in the call's fold.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')

harness.run(function(_, obs)
  local chat = require('tiller.chat')
  local status = require('tiller.status')
  local function feed(event)
    status.handle_event(event)
    chat.handle_event(event)
  end
  local function child(event)
    event.sessionId, event.parentSessionId, event.parentToolCallId = 'c', 's', 't1'
    feed(event)
  end
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end
  chat.open()

  feed({ type = 'agent_start' })
  feed({ type = 'message_start', message = { role = 'assistant' } })
  feed({ type = 'message_end', message = { role = 'assistant' } })
  feed({ type = 'tool_execution_start', toolCallId = 't1', toolName = 'task', args = { description = 'Find it' }, title = 'Find it', kind = 'other' })
  feed({ type = 'tool_execution_update', toolCallId = 't1', toolName = 'task', partialResult = { sessionId = 'c', agent = 'explore' } })
  obs.named = chat.lines()
  child({ type = 'agent_start' })
  child({ type = 'message_start', message = { role = 'assistant' } })
  child({ type = 'message_update', kind = 'text', index = 0, delta = 'Looking.' })
  child({ type = 'tool_execution_start', toolCallId = 'g1', toolName = 'grep', args = { pattern = 'x' }, title = "Search 'x' in .", kind = 'search' })
  child({ type = 'tool_execution_update', toolCallId = 'g1', toolName = 'grep', partialResult = { status = 'awaitingPermission' } })
  obs.waiting = chat.lines()
  child({ type = 'tool_execution_end', toolCallId = 'g1', toolName = 'grep', isError = false, result = { content = {} } })
  child({ type = 'message_end', message = { role = 'assistant', content = { { type = 'text', text = 'x is in a.py' } } } })
  child({ type = 'agent_end', stopReason = 'stop' })
  child({ type = 'agent_settled' })
  obs.phase_after_child = status.get().phase
  obs.live = chat.lines()
  feed({ type = 'tool_execution_end', toolCallId = 't1', toolName = 'task', isError = false, result = { content = { { type = 'text', text = 'x is in a.py' } } } })
  obs.lines = chat.lines()
  local header = chat.block_line('t1')
  obs.header = header
  obs.closed_end = vim.fn.foldclosedend(header)
end)
