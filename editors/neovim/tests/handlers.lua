-- The answers to the server's requests (tiller.handlers), called directly with crafted params:
-- reads see unsaved buffers, writes change buffers undoably (permission questions: review.lua).
-- tests/editors/test_neovim.py checks the observations and the files on disk.

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
  local notes = harness.capture_notes()
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

  -- Writes: to the loaded buffer (one undo step, not saved with save_edits = false), and to a
  -- file nobody has open.
  handlers.config.save_edits = false
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

  -- An MCP server's form and sign-in page (tiller.mcp_ask), the user played by scripted
  -- vim.ui answers (a select answer is the shown text of the item to pick; nil dismisses).
  local answers, prompts, opened = {}, {}, {}
  vim.ui.select = function(items, opts, on_choice)
    prompts[#prompts + 1] = opts.prompt
    local want = table.remove(answers, 1)
    for _, item in ipairs(items) do
      if (opts.format_item and opts.format_item(item) or item) == want then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
  vim.ui.input = function(opts, on_confirm)
    prompts[#prompts + 1] = opts.prompt .. '|' .. tostring(opts.default)
    on_confirm(table.remove(answers, 1))
  end
  require('tiller.mcp_ask').open = function(url)
    opened[#opened + 1] = url
    return true
  end
  local form = {
    sessionId = 's1', server = 'deploy', mode = 'form', message = 'Which environment?',
    requestedSchema = {
      type = 'object', required = { 'env' },
      properties = {
        env = { type = 'string', enum = { 'staging', 'production' } },
        dryRun = { type = 'boolean', title = 'Dry run' },
        count = { type = 'integer', default = 2 },
        hero = { type = 'string', oneOf = { { const = 'h1', title = 'Superman' } } },
        note = { type = 'string', description = 'why' },
      },
    },
  }
  answers = { 'Fill in', 'production', 'x', '3', 'false', 'Superman', '' }
  obs.form = dispatch('client/elicit', form)
  obs.form_prompts = prompts
  prompts = {}
  answers = { 'Fill in', 'staging', nil }
  obs.form_dismissed = dispatch('client/elicit', form)
  answers = { 'Decline' }
  obs.form_declined = dispatch('client/elicit', form)
  answers = { 'Open' }
  obs.url = dispatch('client/elicit', {
    sessionId = 's1', server = 'bank', mode = 'url', message = 'Link it', url = 'https://bank.example/link',
  })
  obs.open_url = dispatch('client/openUrl', {
    sessionId = 's1', server = 'linear', url = 'https://auth.example/authorize?x=1', reason = 'Sign in to MCP server linear',
  })
  obs.opened = opened

  -- Diagnostics (tiller.diagnostics): a linter's in a loaded buffer with no language server,
  -- answered at once; a file not loaded is loaded hidden (nothing reports on it); bad params.
  local function dispatch_later(method, params)
    local answer
    client.handle_server_request(method, params, function(result, err)
      answer = errors(result, err)
    end)
    harness.wait_for(method .. "'s answer", function()
      return answer ~= nil
    end)
    return answer
  end
  vim.cmd('edit ' .. vim.fn.fnameescape(workdir .. '/d.txt'))
  local d_buf = vim.api.nvim_get_current_buf()
  local ns = vim.api.nvim_create_namespace('test-linter')
  vim.diagnostic.set(ns, d_buf, {
    { lnum = 0, col = 2, end_lnum = 0, end_col = 5, severity = vim.diagnostic.severity.ERROR,
      message = 'bad word', source = 'linter', code = 'L1' },
    { lnum = 1, col = 0, severity = vim.diagnostic.severity.HINT, message = 'a hint', code = 7 },
  })
  obs.diagnostics = dispatch_later('client/getDiagnostics', {
    sessionId = 's1', paths = { workdir .. '/d.txt', workdir .. '/e.txt' }, timeoutMs = 20000,
  })
  local e_buf = vim.fn.bufnr(workdir .. '/e.txt')
  obs.e_loaded_hidden = e_buf ~= -1 and vim.api.nvim_buf_is_loaded(e_buf) and not vim.bo[e_buf].buflisted
  obs.diagnostics_no_paths = dispatch_later('client/getDiagnostics', { sessionId = 's1', timeoutMs = 100 })
end)
