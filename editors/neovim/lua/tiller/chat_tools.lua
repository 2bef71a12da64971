-- tiller.chat_tools: tool call blocks in the chat buffer (see tiller.chat for the layout).
--
-- Each block is a header line naming the tool and its arguments, tracked with an extmark (so a
-- result arriving for an earlier call of a parallel batch lands under its own header), and a
-- body with its output, result and, for a file change, the diff; tiller.chatbuf folds it.

local B = require('tiller.chatbuf')

local M = {}

local api = vim.api
local S = B.S
local BLOCKS, HIGHLIGHT = B.BLOCKS, B.HIGHLIGHT
local edit, highlight, append, gap = B.edit, B.highlight, B.append, B.gap
local end_stream, content_lines = B.end_stream, B.content_lines
local trim_trailing_blanks, valid = B.trim_trailing_blanks, B.valid
local open_folds_at, reopen_folds = B.open_folds_at, B.reopen_folds

local function one_line(text, max)
  text = tostring(text):gsub('\r?\n', ' ⏎ ')
  if #text > max then
    text = text:sub(1, max) .. '…'
  end
  return text
end

--- One line naming a tool call's arguments: the command for bash, the path for file tools,
--- else the arguments as JSON.
function M.summarize_args(name, args)
  if type(args) ~= 'table' then
    return args ~= nil and one_line(args, 300) or ''
  end
  if name == 'bash' and type(args.command) == 'string' then
    return one_line(args.command, 300)
  end
  if type(args.path) == 'string' and (name == 'read' or name == 'write' or name == 'edit') then
    local extra = ''
    if args.offset or args.limit then
      extra = string.format(' (lines %s+%s)', tostring(args.offset or 1), tostring(args.limit or ''))
    end
    return one_line(args.path .. extra, 300)
  end
  local ok, json = pcall(vim.json.encode, args)
  return one_line(ok and json or vim.inspect(args), 300)
end

local ICONS = { running = '⚙', ok = '✓', error = '✗' }

local function header_text(block)
  local text = string.format('%s %s', ICONS[block.status], block.name)
  if block.summary ~= '' then
    text = text .. ': ' .. block.summary
  end
  return text
end

-- Indented body lines: the first `max` of `lines` (or the last, with from_end), with a line
-- saying how many were left out.
local function body_lines(lines, from_end)
  local max = B.config.tool_output_lines
  lines = trim_trailing_blanks(lines)
  local out = {}
  if #lines == 0 then
    return { '  (no output)' }
  end
  local first, last = 1, #lines
  if #lines > max then
    if from_end then
      first = #lines - max + 1
      table.insert(out, string.format('  … (%d earlier lines)', first - 1))
    else
      last = max
    end
  end
  for i = first, last do
    table.insert(out, '  ' .. lines[i])
  end
  if last < #lines then
    table.insert(out, string.format('  … (%d more lines)', #lines - last))
  end
  return out
end

local function block_row(block)
  local pos = api.nvim_buf_get_extmark_by_id(S.buf, BLOCKS, block.mark, {})
  return pos and pos[1]
end

-- Replace a block's body (and refresh its header line).
--
-- The header and the body are replaced by one change: Neovim 0.11 updates an expr fold
-- incrementally, and a change to its header line right after lines were inserted under it
-- left the fold one line short (0.7.2 got it right). Neovim evaluates 'foldexpr' during the
-- change, while the block's mark is displaced, so the fold table is set beforehand to what it
-- will be after the change.
local function set_block(block, body)
  local row = block_row(block)
  if not row then
    return
  end
  local old = block.nlines
  -- A header alone is a one-line fold, which never shows closed: not one the user opened.
  local open = old > 0 and open_folds_at(row + 1) or {}
  block.nlines = #body
  S.folds = B.build_folds(row, #body - old)
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, HIGHLIGHT, row, row + 1 + old)
    local lines = { header_text(block) }
    vim.list_extend(lines, body)
    api.nvim_buf_set_lines(buf, row, row + 1 + old, false, lines)
    api.nvim_buf_set_extmark(buf, BLOCKS, row, 0, { id = block.mark })
  end)
  highlight(block.status == 'error' and 'TillerToolError' or 'TillerTool', row)
  reopen_folds(open, row + 1)
end

function M.tool_start(event)
  end_stream()
  local id = tostring(event.toolCallId)
  local name = tostring(event.toolName or 'tool')
  local block = { nlines = 0, name = name, summary = M.summarize_args(name, event.args) }
  block.status = 'running'
  if S.last ~= 'tool' then
    gap()
  end
  local row = append({ header_text(block) })
  block.mark = api.nvim_buf_set_extmark(S.buf, BLOCKS, row, 0, {})
  highlight('TillerTool', row)
  table.insert(S.blocks, block)
  S.calls[id] = block
  S.folds = nil
  S.last = 'tool'
end

function M.tool_update(event)
  local block = S.calls[tostring(event.toolCallId)]
  local partial = event.partialResult
  if not block or type(partial) ~= 'table' then
    return
  end
  if partial.status == 'awaitingPermission' then
    set_block(block, { '  (waiting for your permission)' })
  elseif type(partial.output) == 'string' then
    set_block(block, body_lines(vim.split(partial.output, '\n', { plain = true }), true))
  end
end

--- The user answered the permission question of tool call `id` (called by tiller.handlers).
function M.permission_answered(id, outcome)
  local block = valid() and S.calls[tostring(id)]
  if block and block.status == 'running' then
    local allowed = outcome == 'allowOnce' or outcome == 'allowAlways'
    set_block(block, { allowed and '  (allowed, running)' or '  (rejected)' })
  end
end

function M.tool_end(event)
  local block = S.calls[tostring(event.toolCallId)]
  if not block or block.status ~= 'running' then
    M.tool_start(event)
    block = S.calls[tostring(event.toolCallId)]
  end
  local result = type(event.result) == 'table' and event.result or {}
  block.status = event.isError and 'error' or 'ok'
  local body = body_lines(content_lines(result.content))
  -- A file change shows its diff, in full, inside the fold.
  local diff = type(result.details) == 'table' and result.details.diff
  if type(diff) == 'string' and diff ~= '' then
    for _, line in ipairs(trim_trailing_blanks(vim.split(diff, '\n', { plain = true }))) do
      table.insert(body, '  ' .. line)
    end
  end
  set_block(block, body)
end

--- The 1-based line of the header of tool call `id`, or nil.
function M.block_line(id)
  local block = valid() and S.calls[tostring(id)]
  local row = block and block_row(block)
  return row and row + 1 or nil
end

return M
