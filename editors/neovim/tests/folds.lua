-- Tool folds with no server: `agent/event`s fed to the chat as the server sends them. Each
-- block is a closed fold from its header to its last line (output, result or diff), nothing
-- after it folded: a lone call with a 5-line result (the case Neovim 0.11 folded one line
-- short), a parallel batch whose results arrive out of order after partial output, and an edit
-- whose diff follows its result.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')

local function text(s)
  return { content = { { type = 'text', text = s } } }
end

-- Where the block of tool call `id` is, and how the chat window folds it.
local function fold_of(chat, id)
  local header = chat.block_line(id)
  local last = header
  local lines = chat.lines()
  while last < #lines and lines[last + 1]:sub(1, 2) == '  ' do
    last = last + 1
  end
  return {
    header = header,
    last = last,
    closed = vim.fn.foldclosed(header),
    closed_end = vim.fn.foldclosedend(header),
    level_after = last < #lines and vim.fn.foldlevel(last + 1) or vim.NIL,
  }
end

harness.run(function(_, obs)
  local chat = require('tiller.chat')
  local function feed(event)
    chat.handle_event(event)
  end
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end
  chat.open()

  -- 1. One call, five lines of output.
  feed({ type = 'tool_execution_start', toolCallId = 'one', toolName = 'bash', args = { command = 'seq 5' }, title = 'seq 5', kind = 'execute' })
  feed({ type = 'tool_execution_end', toolCallId = 'one', toolName = 'bash', result = text('1\n2\n3\n4\n5') })
  obs.lone = fold_of(chat, 'one')

  -- 2. Text, then a batch of two: both start, output streams into each, the second ends first.
  feed({ type = 'message_start', message = { role = 'assistant' } })
  feed({ type = 'message_update', kind = 'text', delta = 'Two at once.' })
  feed({ type = 'message_end', message = { role = 'assistant' } })
  feed({ type = 'tool_execution_start', toolCallId = 'a', toolName = 'bash', args = { command = 'slow' }, title = 'slow', kind = 'execute' })
  feed({ type = 'tool_execution_start', toolCallId = 'b', toolName = 'bash', args = { command = 'fast' }, title = 'fast', kind = 'execute' })
  feed({ type = 'tool_execution_update', toolCallId = 'a', partialResult = { output = 'a1\na2' } })
  feed({ type = 'tool_execution_update', toolCallId = 'b', partialResult = { output = 'b1\nb2\nb3' } })
  feed({ type = 'tool_execution_update', toolCallId = 'a', partialResult = { output = 'a1\na2\na3' } })
  feed({ type = 'tool_execution_end', toolCallId = 'b', toolName = 'bash', result = text('b1\nb2\nb3\nb4') })
  feed({ type = 'tool_execution_end', toolCallId = 'a', toolName = 'bash', result = text('a1\na2\na3\na4\na5\na6') })
  -- 3. An edit: its result line, then its diff.
  local diff = '--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-old\n+new\n'
  feed({
    type = 'tool_execution_start',
    toolCallId = 'e',
    toolName = 'edit',
    args = { path = 'x.txt' },
    title = 'Edit x.txt',
    kind = 'edit',
    path = vim.fn.getcwd() .. '/x.txt',
  })
  feed({
    type = 'tool_execution_end',
    toolCallId = 'e',
    toolName = 'edit',
    result = { content = { { type = 'text', text = 'Applied 1 edit to x.txt' } }, details = { diff = diff } },
  })
  feed({ type = 'message_start', message = { role = 'assistant' } })
  feed({ type = 'message_update', kind = 'text', delta = 'All done.' })
  feed({ type = 'message_end', message = { role = 'assistant' } })

  obs.lone_after = fold_of(chat, 'one')
  obs.a = fold_of(chat, 'a')
  obs.b = fold_of(chat, 'b')
  obs.e = fold_of(chat, 'e')
  obs.lines = chat.lines()
end)
