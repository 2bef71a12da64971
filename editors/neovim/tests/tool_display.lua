-- Tool calls shown from how the server describes them, with no server: `agent/event`s fed to
-- the chat for tools the plugin cannot know by name (an MCP tool, tools added later), then a
-- loaded session whose calls come back with `session/load`'s `toolCalls` (the client's
-- `session/list` and `session/load` answered here).

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')

local function result(text)
  return { content = { { type = 'text', text = text } } }
end

harness.run(function(config, obs)
  local chat = require('tiller.chat')
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end
  vim.cmd('cd ' .. vim.fn.fnameescape(config.workdir))
  local inside = config.workdir .. '/sub/a.txt'

  local function call(id, name, fields, ok)
    local start = { type = 'tool_execution_start', toolCallId = id, toolName = name, args = fields.args or {} }
    for _, key in ipairs({ 'title', 'kind', 'path' }) do
      start[key] = fields[key]
    end
    chat.handle_event(start)
    chat.handle_event({
      type = 'tool_execution_end',
      toolCallId = id,
      toolName = name,
      isError = not ok,
      result = result(id .. ' done'),
    })
    return chat.lines()[chat.block_line(id)]
  end

  obs.live = {
    titled = call('t', 'touch', { args = { target = 'sub/a.txt' }, title = 'Touch sub/a.txt', kind = 'edit', path = inside }, true),
    command = call('c', 'runner', { args = { script = 'make all' }, title = 'make all', kind = 'execute' }, true),
    path_only = call('p', 'stamp', { args = { file = 'sub/a.txt' }, title = 'stamp', kind = 'edit', path = inside }, true),
    mcp = call('m', 'mcp__git__git_status', { args = { repo = '.' }, title = 'git: git_status', kind = 'other' }, false),
    bare = call('b', 'mystery', { args = { level = 3 }, title = 'mystery', kind = 'other' }, true),
  }

  -- A hook's runs during a call: quiet when it says nothing, one line when it blocks, and the
  -- call's block still ends as it should.
  chat.handle_event({ type = 'tool_execution_start', toolCallId = 'h', toolName = 'runner', args = { script = 'rm -rf data' }, title = 'rm -rf data', kind = 'execute' })
  local hook = { hookId = 'hook-1', hookEvent = 'PreToolUse', command = 'no-rm.sh', source = 'config.toml', toolCallId = 'h' }
  chat.handle_event(vim.tbl_extend('force', hook, { type = 'hook_start' }))
  chat.handle_event(vim.tbl_extend('force', hook, { type = 'hook_end', outcome = 'blocked', exitCode = 2, message = 'use trash' }))
  chat.handle_event(vim.tbl_extend('force', hook, { type = 'hook_end', hookId = 'hook-2', outcome = 'ok' }))
  chat.handle_event(vim.tbl_extend('force', hook, { type = 'hook_end', hookId = 'hook-3', outcome = 'timeout', message = 'timed out after 1 seconds' }))
  chat.handle_event({ type = 'tool_execution_end', toolCallId = 'h', toolName = 'runner', isError = true, result = result('Tool call blocked: use trash') })
  local hook_lines = {}
  for _, line in ipairs(chat.lines()) do
    if line:find(' hook ', 1, true) then
      table.insert(hook_lines, line)
    end
  end
  obs.hooked = { header = chat.lines()[chat.block_line('h')], lines = hook_lines }
  -- The question that asks to trust a workspace's hooks.
  obs.hooked.question = require('tiller.review').question_lines({
    toolName = 'hooks', reason = '.claude/settings.json asks to run 2 commands as hooks',
    preview = { kind = 'hooks', file = '.claude/settings.json', commands = { 'Stop: make test', 'PreToolUse (Bash): no-rm.sh' } },
  })

  -- A saved session: its calls shown as session/load's toolCalls say, the same id twice.
  local client = require('tiller.client')
  local history = {
    sessionId = 'loaded1',
    messages = {
      { role = 'user', content = 'go' },
      {
        role = 'assistant',
        content = {
          { type = 'toolCall', id = 'x', name = 'runner', arguments = { script = 'make' } },
          { type = 'toolCall', id = 'y', name = 'stamp', arguments = { file = 'sub/a.txt' } },
        },
      },
      { role = 'toolResult', toolCallId = 'x', toolName = 'runner', content = { { type = 'text', text = 'built' } }, isError = false },
      { role = 'toolResult', toolCallId = 'y', toolName = 'stamp', content = { { type = 'text', text = 'stamped' } }, isError = false },
      { role = 'assistant', content = { { type = 'toolCall', id = 'x', name = 'touch', arguments = { target = 'b' } } } },
      { role = 'toolResult', toolCallId = 'x', toolName = 'touch', content = { { type = 'text', text = 'touched' } }, isError = false },
    },
    toolCalls = {
      { toolCallId = 'x', title = 'make', kind = 'execute' },
      { toolCallId = 'y', title = 'stamp', kind = 'edit', path = inside },
      { toolCallId = 'x', title = 'Touch b', kind = 'edit', path = config.workdir .. '/b' },
    },
  }
  client.request = function(method, _, callback)
    vim.schedule(function()
      if method == 'session/list' then
        callback(nil, { sessions = { { sessionId = 'loaded1', title = 'go', messageCount = 6 } } })
      elseif method == 'session/load' then
        callback(nil, history)
      else
        callback({ code = -32601, message = 'not here: ' .. method }, nil)
      end
    end)
  end
  vim.ui.select = function(items, _, on_choice)
    on_choice(items[1], 1)
  end
  local picked = false
  require('tiller.sessions').pick(function()
    picked = true
  end)
  harness.wait_for('the loaded session', function()
    return picked
  end)
  obs.loaded = chat.lines()
end)
