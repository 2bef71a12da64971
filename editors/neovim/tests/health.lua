-- `:checkhealth tiller` for each case in config.cases, {setup, path}: with setup(setup) and,
-- when `path` is given, that folder first on $PATH. The lines of each health buffer are the
-- observations (tests/editors/test_neovim.py reads the reports).

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')

harness.run(function(config, obs)
  vim.cmd('runtime plugin/tiller.lua')
  local tiller = require('tiller')
  obs.reports = {}
  local path = vim.env.PATH
  for _, case in ipairs(config.cases) do
    tiller.setup(case.setup)
    vim.env.PATH = case.path and (case.path .. ':' .. path) or path
    vim.cmd('checkhealth tiller')
    table.insert(obs.reports, vim.api.nvim_buf_get_lines(0, 0, -1, false))
    vim.cmd('bwipeout!')
  end
  vim.env.PATH = path
end)
