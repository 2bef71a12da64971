-- Set-up for a test that drives Neovim's own terminal UI (tests/editors/test_neovim.py runs it in a
-- pseudo-terminal and types the keys): the plugin against the real server, and notes.txt open
-- read-only (as `:view` opens it), so the agent's edit changes the buffer but cannot save it.
-- Unlike the other scripts it does not quit: the test types `:qa!`.

local config = vim.json.decode(table.concat(vim.fn.readfile(vim.g.tiller_test_config), '\n'))
vim.cmd('runtime plugin/tiller.lua')
require('tiller').setup({ cmd = config.cmd, args = config.args, cwd = config.workdir })
vim.cmd('edit ' .. vim.fn.fnameescape(config.workdir .. '/notes.txt'))
vim.bo.readonly = true
