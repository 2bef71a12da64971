-- Against the real server (config.cmd, config.args; the model is the fake OpenAI server of
-- tests/editors/test_neovim.py) and a real language server (config.lsp: the pygls marker server
-- of tests/support/marker_lsp.py, attached to Python buffers on FileType as a user's config
-- would): the model edits calc.py, open in a window, and other.py, not loaded, into errors. The
-- server asks the plugin for the diagnostics before and after each edit (client/getDiagnostics);
-- the pytest side reads what the model was told. Run with `filetype on`.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')
local wait_for = harness.wait_for

harness.run(function(config, obs)
  vim.cmd('filetype on')
  vim.cmd('runtime plugin/tiller.lua')
  local client_id = nil
  local function attach(buf)
    local spec = { name = 'marker-lsp', cmd = config.lsp, root_dir = config.workdir }
    if vim.fn.has('nvim-0.10') == 1 then
      vim.lsp.start(spec, { bufnr = buf })
    else
      client_id = client_id or vim.lsp.start_client(spec)
      vim.lsp.buf_attach_client(buf, client_id)
    end
  end
  vim.api.nvim_create_autocmd('FileType', {
    pattern = 'python',
    callback = function(args)
      attach(args.buf)
    end,
  })
  require('tiller').setup({ cmd = config.cmd, args = config.args, cwd = config.workdir })
  local client = require('tiller.client')
  local chat = require('tiller.chat')
  local events = harness.record_events(client)
  harness.on_failure = function(failed)
    failed.chat_at_failure = chat.lines()
  end

  vim.cmd('edit ' .. vim.fn.fnameescape(config.workdir .. '/calc.py'))
  local calc = vim.api.nvim_get_current_buf()
  wait_for('the language server to report calc.py', function()
    return #vim.diagnostic.get(calc) == 1
  end)

  vim.cmd('Tiller break both files')
  wait_for('the run to settle', harness.settled(events, 1))
  obs.ended = {}
  for _, event in ipairs(events) do
    if event.type == 'tool_execution_end' then
      table.insert(obs.ended, event.toolCallId)
    end
  end
  obs.calc_lines = vim.api.nvim_buf_get_lines(calc, 0, -1, false)
  local other = vim.fn.bufnr(config.workdir .. '/other.py')
  obs.other_loaded = other ~= -1 and vim.api.nvim_buf_is_loaded(other)
  obs.other_listed = other ~= -1 and vim.bo[other].buflisted
  obs.other_diagnostics = other ~= -1 and #vim.diagnostic.get(other) or -1
end)
