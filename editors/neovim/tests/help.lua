-- The help file: `:helptags` accepts it (no duplicate or malformed tags) and `:help` finds it.
-- config.root is a copy of the plugin whose doc/ may be written to (tags are generated there).

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')

harness.run(function(config, obs)
  local doc = config.root .. '/doc'
  local ok, err = pcall(vim.cmd, 'helptags ' .. vim.fn.fnameescape(doc))
  obs.helptags_error = (not ok) and tostring(err) or vim.NIL
  obs.tags = {}
  for _, line in ipairs(vim.fn.readfile(doc .. '/tags')) do
    table.insert(obs.tags, vim.split(line, '\t', { plain = true })[1])
  end
  vim.opt.runtimepath:append(config.root)
  obs.help = {}
  for _, subject in ipairs({ 'tiller', ':TillerSteer', 'tiller-permissions' }) do
    vim.cmd('help ' .. subject)
    table.insert(obs.help, {
      file = vim.fn.expand('%:t'),
      line = vim.api.nvim_get_current_line(),
      filetype = vim.bo.filetype,
    })
    vim.cmd('helpclose')
  end
end)
