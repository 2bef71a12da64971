-- tiller.mcp_ask: an MCP server's questions (`client/elicit`) and sign-in pages
-- (`client/openUrl`), asked with vim.ui.select / vim.ui.input (so a UI plugin such as
-- dressing.nvim or snacks renders them).
--
--   client/openUrl {sessionId, server, url, reason} -> {}: the URL is shown (and kept in
--     :messages, to copy) and opened with vim.ui.open (Neovim 0.10+), else xdg-open / open.
--   client/elicit  {server, mode, message, requestedSchema? | url?} -> {action, content?}:
--     form mode asks Fill in / Decline / Cancel, then each field in turn (required ones first,
--     then by name): booleans and enums with vim.ui.select, numbers and text with
--     vim.ui.input (a field's default prefilled; a bad number is asked again; an optional
--     field left empty is left out). Dismissing any prompt cancels. url mode asks Open / Decline and opens the page on Open.

local messages = require('tiller.messages')

local M = {}

--- Open `url` in the browser; false when nothing could (tests replace it).
function M.open(url)
  if vim.ui.open then
    local ok = pcall(vim.ui.open, url)
    return ok
  end
  local opener = vim.fn.has('mac') == 1 and 'open' or (vim.fn.executable('xdg-open') == 1 and 'xdg-open')
  if not opener then
    return false
  end
  return vim.fn.jobstart({ opener, url }, { detach = true }) > 0
end

function M.open_url(params, reply)
  local url = tostring(params.url or '')
  vim.api.nvim_echo({ { 'tiller: ' .. tostring(params.reason or 'open') .. ': ' .. url } }, true, {})
  if not M.open(url) then
    messages.show('open the URL above in a browser', vim.log.levels.WARN)
  end
  reply(vim.empty_dict())
end

--- The fields of a form schema in the order they are asked: required ones first, then by name.
function M.fields(schema)
  local properties = type(schema) == 'table' and schema.properties or {}
  local required = {}
  for _, name in ipairs(type(schema) == 'table' and schema.required or {}) do
    required[name] = true
  end
  local names = vim.tbl_keys(properties)
  table.sort(names, function(a, b)
    if (required[a] or false) ~= (required[b] or false) then
      return required[a] == true
    end
    return a < b
  end)
  local fields = {}
  for _, name in ipairs(names) do
    fields[#fields + 1] = { name = name, schema = properties[name], required = required[name] == true }
  end
  return fields
end

local function label(field)
  local spec = field.schema
  local text = spec.title or field.name
  if spec.description then
    text = text .. ' (' .. spec.description .. ')'
  end
  return text .. (field.required and ' *' or '')
end

-- The choices of an enum field as {value, shown} pairs (enum, oneOf/anyOf consts), or nil.
local function choices(spec)
  local items = spec.type == 'array' and spec.items or spec
  if type(items) ~= 'table' then
    return nil
  end
  if items.enum then
    local out = {}
    for i, value in ipairs(items.enum) do
      out[#out + 1] = { value = value, shown = (spec.enumNames or {})[i] or value }
    end
    return out
  end
  local options = items.oneOf or items.anyOf
  if options then
    local out = {}
    for _, option in ipairs(options) do
      out[#out + 1] = { value = option.const, shown = option.title or option.const }
    end
    return out
  end
  return nil
end

-- Ask one field; done(value) with nil when the user dismissed the prompt.
local function ask_field(field, done)
  local spec = field.schema
  local prompt = label(field) .. ': '
  if spec.type == 'boolean' then
    vim.ui.select({ 'true', 'false' }, { prompt = prompt }, function(choice)
      if choice == nil then
        return done(nil)
      end
      done(choice == 'true')
    end)
    return
  end
  local options = choices(spec)
  if options and spec.type ~= 'array' then
    vim.ui.select(options, {
      prompt = prompt,
      format_item = function(item)
        return item.shown
      end,
    }, function(choice)
      done(choice and choice.value or nil)
    end)
    return
  end
  local default = spec.default
  if type(default) == 'table' then
    default = table.concat(default, ', ')
  end
  local hint = options and (' [' .. table.concat(vim.tbl_map(function(o)
    return o.value
  end, options), ', ') .. ']') or ''
  vim.ui.input({ prompt = label(field) .. hint .. ': ', default = default and tostring(default) or nil }, function(text)
    if text == nil then
      return done(nil)
    end
    if spec.type == 'number' or spec.type == 'integer' then
      local number = tonumber(text)
      if number == nil or (spec.type == 'integer' and number % 1 ~= 0) then
        messages.show(field.name .. ': not ' .. (spec.type == 'integer' and 'an integer' or 'a number'), vim.log.levels.WARN)
        return ask_field(field, done)
      end
      return done(number)
    end
    if spec.type == 'array' then
      return done(vim.tbl_filter(function(item)
        return item ~= ''
      end, vim.split(text, '%s*,%s*')))
    end
    done(text)
  end)
end

function M.elicit(params, reply)
  local who = tostring(params.server or 'an MCP server')
  local question = who .. ' asks: ' .. tostring(params.message or '')
  if params.mode == 'url' then
    vim.ui.select({ 'Open', 'Decline' }, { prompt = question .. ' (' .. tostring(params.url) .. ')' }, function(choice)
      if choice == 'Open' then
        M.open(tostring(params.url))
        reply({ action = 'accept' })
      else
        reply({ action = choice and 'decline' or 'cancel' })
      end
    end)
    return
  end
  vim.ui.select({ 'Fill in', 'Decline', 'Cancel' }, { prompt = question }, function(choice)
    if choice ~= 'Fill in' then
      return reply({ action = choice == 'Decline' and 'decline' or 'cancel' })
    end
    local fields, content = M.fields(params.requestedSchema), {}
    local function next_field(i)
      if i > #fields then
        return reply({ action = 'accept', content = next(content) and content or vim.empty_dict() })
      end
      ask_field(fields[i], function(value)
        if value == nil then
          return reply({ action = 'cancel' })
        end
        if value ~= '' or fields[i].required then -- an optional field left empty is left out
          content[fields[i].name] = value
        end
        next_field(i + 1)
      end)
    end
    next_field(1)
  end)
end

return M
