-- The answers to the server's requests (tiller.handlers), called directly with crafted params:
-- reads see unsaved buffers, writes change buffers undoably, permission questions go through
-- vim.ui.select (stubbed here): synchronous, asynchronous in a coroutine, cancelled, and the
-- inputlist() fallback. tests/test_neovim.py checks the observations and the files on disk.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')

local function errors(result, err)
  return { result = result or vim.NIL, code = err and err.code, message = err and err.message }
end

harness.run(function(config, obs)
  local handlers = require('tiller.handlers')
  local client = require('tiller.client')
  local workdir = config.workdir
  handlers.set_cwd(workdir)
  local notes = {}
  vim.notify = function(message, level)
    table.insert(notes, { message = message, level = level })
  end
  obs.notes = notes

  -- Reads: a.txt is loaded and changed without saving; b.txt is only on disk.
  local a_path = workdir .. '/a.txt'
  vim.cmd('edit ' .. vim.fn.fnameescape(a_path))
  local a_buf = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_lines(a_buf, 0, -1, false, { 'buffer line 1', 'buffer line 2', 'buffer line 3' })
  obs.read_buffer = handlers.read_text_file({ sessionId = 's1', path = a_path })
  obs.read_buffer_slice = handlers.read_text_file({ sessionId = 's1', path = 'a.txt', line = 2, limit = 1 })
  obs.read_buffer_tail = handlers.read_text_file({ sessionId = 's1', path = a_path, line = 3 })
  obs.read_disk = handlers.read_text_file({ sessionId = 's1', path = workdir .. '/b.txt' })
  obs.read_disk_slice = handlers.read_text_file({ sessionId = 's1', path = 'b.txt', line = 2, limit = 5 })
  obs.read_disk_past_end = handlers.read_text_file({ sessionId = 's1', path = 'b.txt', line = 9 })
  obs.read_missing = errors(handlers.read_text_file({ sessionId = 's1', path = 'missing.txt' }))
  obs.read_bad_line = errors(handlers.read_text_file({ sessionId = 's1', path = 'b.txt', line = 0 }))
  obs.read_no_path = errors(handlers.read_text_file({ sessionId = 's1' }))

  -- Writes: to the loaded buffer (one undo step, not saved), and to a file nobody has open.
  local written = handlers.write_text_file({
    sessionId = 's1',
    path = a_path,
    content = 'buffer line 1\nchanged line 2\nbuffer line 3\nadded line 4\n',
  })
  obs.write_result = vim.json.encode(written)
  obs.after_write = vim.api.nvim_buf_get_lines(a_buf, 0, -1, false)
  obs.after_write_modified = vim.bo[a_buf].modified
  vim.cmd('undo')
  obs.after_undo = vim.api.nvim_buf_get_lines(a_buf, 0, -1, false)
  obs.write_disk = vim.json.encode(
    handlers.write_text_file({ sessionId = 's1', path = 'new/dir/c.txt', content = 'c1\nc2' })
  )
  obs.c_loaded = handlers.find_buffer(workdir .. '/new/dir/c.txt') ~= nil

  -- Through the dispatcher the rpc client uses.
  local function dispatch(method, params)
    local answer
    client.handle_server_request(method, params, function(result, err)
      answer = errors(result, err)
    end)
    return answer
  end
  obs.dispatch_read = dispatch('client/readTextFile', { path = 'b.txt', limit = 1 })
  obs.dispatch_unknown = dispatch('client/unknown', {})

  -- Permission: a synchronous picker sees the diff preview and its answer is the outcome.
  local options = { 'allowOnce', 'allowAlways', 'rejectOnce', 'rejectAlways' }
  local diff = '--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n'
  local windows_before = #vim.api.nvim_list_wins()
  local start_win = vim.api.nvim_get_current_win()
  local seen
  vim.ui.select = function(items, opts, on_choice)
    local preview = vim.api.nvim_get_current_buf()
    seen = {
      items = items,
      prompt = opts.prompt,
      labels = vim.tbl_map(opts.format_item, items),
      preview_filetype = vim.bo[preview].filetype,
      preview_lines = vim.api.nvim_buf_get_lines(preview, 0, -1, false),
      windows = #vim.api.nvim_list_wins(),
    }
    on_choice('allowAlways', 2)
  end
  obs.permission_diff = handlers.request_permission({
    sessionId = 's1',
    toolCallId = 'call_1',
    toolName = 'edit',
    args = { path = 'a.txt' },
    preview = { kind = 'diff', path = a_path, diff = diff },
    reason = "'edit' changes " .. a_path,
    options = options,
  })
  obs.seen_diff = seen
  obs.windows_restored = #vim.api.nvim_list_wins() == windows_before
  obs.focus_restored = vim.api.nvim_get_current_win() == start_win

  -- A cancelled question is a rejectOnce.
  vim.ui.select = function(items, opts, on_choice)
    seen = { prompt = opts.prompt, windows = #vim.api.nvim_list_wins() }
    on_choice(nil, nil)
  end
  obs.permission_cancel = handlers.request_permission({
    sessionId = 's1',
    toolCallId = 'call_2',
    toolName = 'bash',
    args = { command = 'rm -rf build' },
    preview = { kind = 'command', command = 'rm -rf build', cwd = workdir },
    options = options,
  })
  obs.seen_cancel = seen

  local outside = {
    sessionId = 's1',
    toolCallId = 'call_3',
    toolName = 'read',
    args = { path = '/etc/hostname' },
    preview = { kind = 'path', path = '/etc/hostname' },
    reason = '/etc/hostname is outside the workspace',
    options = options,
  }

  -- An asynchronous picker, with the handler in a coroutine (as newer Neovim runs it).
  vim.ui.select = function(items, opts, on_choice)
    seen = { prompt = opts.prompt }
    vim.defer_fn(function()
      on_choice('allowOnce', 1)
    end, 20)
  end
  local async_result
  coroutine.wrap(function()
    async_result = handlers.request_permission(outside)
  end)()
  obs.async_pending = async_result == nil
  harness.wait_for('the asynchronous answer', function()
    return async_result ~= nil
  end)
  obs.permission_async = async_result
  obs.seen_async = seen

  -- ...and one the server gives up on ($/cancelRequest).
  vim.ui.select = function() end -- never answers
  local cancelled_result
  coroutine.wrap(function()
    cancelled_result = handlers.request_permission(outside)
  end)()
  handlers.cancel_pending()
  harness.wait_for('the cancelled question', function()
    return cancelled_result ~= nil
  end)
  obs.permission_cancelled = cancelled_result

  -- An asynchronous picker where the handler cannot yield (Neovim 0.7-0.9): inputlist().
  local inputlist_choices
  vim.fn.inputlist = function(choices)
    inputlist_choices = choices
    return 4
  end
  obs.permission_fallback = handlers.request_permission(outside)
  obs.fallback_choices = inputlist_choices

  -- permission_ui = 'inputlist' skips vim.ui.select.
  handlers.config.permission_ui = 'inputlist'
  vim.ui.select = function()
    error('vim.ui.select must not be called')
  end
  vim.fn.inputlist = function(choices)
    inputlist_choices = choices
    return 1
  end
  obs.permission_inputlist = handlers.request_permission(outside)
end)
