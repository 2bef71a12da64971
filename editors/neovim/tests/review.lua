-- Permission questions asked inline in the chat (tiller.review), with crafted requests: the
-- chat opens without taking the focus, typing elsewhere goes on while questions wait, several
-- questions queue, a key answers the question under the cursor (else the oldest), `gd` shows a
-- change beside the real buffer in diff mode, a 300-character command is shown whole, and a
-- question the server withdraws says so.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')

local keys = harness.keys

harness.run(function(config, obs)
  vim.cmd('runtime plugin/tiller.lua')
  require('tiller').setup({ cwd = config.workdir })
  local review = require('tiller.review')
  local chat = require('tiller.chat')
  local handlers = require('tiller.handlers')
  handlers.set_cwd(config.workdir)
  local notes = harness.capture_notes()
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end

  local a_path = config.workdir .. '/a.txt'
  vim.cmd('edit ' .. vim.fn.fnameescape(a_path))
  local a_buf = vim.api.nvim_get_current_buf()
  local a_win = vim.api.nvim_get_current_win()
  vim.api.nvim_buf_set_lines(a_buf, 0, -1, false, { 'one', 'two (unsaved)', 'three' })

  local replies = {}
  local function ask(id, params)
    params.sessionId = 's1'
    params.toolCallId = 'call_' .. id
    params.options = review.OPTIONS
    review.ask(params, function(result, err)
      table.insert(replies, { id = id, result = result, err = err })
    end, id)
  end
  local command = 'echo ' .. string.rep('x', 278) .. ' && rm -rf build/'
  obs.command = command
  ask('cmd', {
    toolName = 'bash',
    args = { command = command },
    preview = {
      kind = 'command', command = command, cwd = config.workdir,
      sandbox = { mode = 'off', network = true, escalated = 'unsandboxed', reason = 'clean the build' },
    },
  })
  obs.focus_kept = vim.api.nvim_get_current_win() == a_win
  obs.chat_shown = chat.window() ~= nil
  ask('edit', {
    toolName = 'edit',
    args = { path = 'a.txt' },
    preview = {
      kind = 'diff',
      path = a_path,
      diff = '--- a/a.txt\n+++ b/a.txt\n@@ -2 +2 @@\n-two (unsaved)\n+TWO\n',
    },
  })
  ask('new', {
    toolName = 'write',
    args = { path = 'new.txt', content = 'n1\nn2\n' },
    preview = {
      kind = 'diff',
      path = config.workdir .. '/new.txt',
      diff = '--- a/new.txt\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+n1\n+n2\n',
    },
  })
  ask('outside', {
    toolName = 'read',
    args = { path = '/etc/hostname' },
    preview = { kind = 'path', path = '/etc/hostname' },
    reason = '/etc/hostname is outside the workspace',
  })
  obs.asked = chat.lines()

  -- The user goes on typing in a.txt: the keys go there, nothing is answered.
  keys('Gotyped while asked 3<CR>and Enter<Esc>')
  obs.typed = vim.api.nvim_buf_get_lines(a_buf, 0, -1, false)
  obs.replies_while_typing = #replies

  -- The server gives up on one question.
  review.cancel('outside')

  -- In the chat: gd on the edit shows the buffer beside the proposal.
  local chat_win = chat.window()
  vim.api.nvim_set_current_win(chat_win)
  local function cursor_on(id)
    for _, q in ipairs(review.open_questions()) do
      if q.id == id then
        vim.api.nvim_win_set_cursor(chat_win, { chat.mark_row(q.block) + 2, 0 })
      end
    end
  end
  local function diff_view()
    local view = {}
    for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
      local buf = vim.api.nvim_win_get_buf(win)
      table.insert(view, {
        name = vim.api.nvim_buf_get_name(buf),
        lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false),
        diff = vim.wo[win].diff,
        is_a = buf == a_buf,
      })
    end
    return view
  end
  local tabs = #vim.api.nvim_list_tabpages()
  cursor_on('edit')
  keys('gd')
  obs.edit_view = diff_view()
  vim.cmd('tabclose')
  vim.api.nvim_set_current_win(chat_win)
  cursor_on('new')
  keys('gd')
  obs.new_view = diff_view()
  vim.cmd('tabclose')
  vim.api.nvim_set_current_win(chat_win)
  cursor_on('cmd')
  keys('gd')
  obs.command_view = diff_view()
  vim.cmd('tabclose')
  obs.tabs_restored = #vim.api.nvim_list_tabpages() == tabs

  -- Keys: on the edit's block A answers it; at the end of the chat `a` answers the oldest.
  vim.api.nvim_set_current_win(chat_win)
  cursor_on('edit')
  keys('A')
  vim.api.nvim_win_set_cursor(chat_win, { vim.api.nvim_buf_line_count(chat.buffer()), 0 })
  keys('a')
  keys('r')
  keys('a')
  obs.replies = replies
  obs.answered = chat.lines()
  obs.notes = notes
end)
