-- tiller.rpc against tests/support/rpc_peer.py (config.cmd): requests and answers, a server request
-- answered later while other requests are served, notifications both ways, framing split
-- across writes, an exit with pending requests, and a command that cannot start.

local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local harness = dofile(here .. '/harness.lua')
local wait_for = harness.wait_for

harness.run(function(config, obs)
  local rpc = require('tiller.rpc')
  local notes, asked, exit = {}, {}, nil
  local conn = assert(rpc.spawn(config.cmd, {
    on_notification = function(method, params)
      table.insert(notes, { method = method, params = params })
    end,
    on_request = function(method, params, reply, id)
      table.insert(asked, { method = method, params = params, reply = reply, id = id })
    end,
    on_exit = function(code, signal)
      exit = { code = code, signal = signal }
    end,
  }))
  obs.pid = conn.pid

  local answers = {}
  local function call(name, method, params)
    conn.request(method, params, function(err, result)
      answers[name] = { err = err or vim.NIL, result = result == nil and vim.NIL or result }
    end)
  end
  local function answered(name)
    return function()
      return answers[name] ~= nil
    end
  end

  call('echo', 'echo', { text = 'naïve ✓ "quoted"\n', n = 3 })
  wait_for('the echo', answered('echo'))

  -- The peer asks us; we answer only after another request went both ways.
  call('ask', 'ask', { method = 'client/question', params = { q = 'sure?' } })
  wait_for('the question', function()
    return #asked == 1
  end)
  call('meanwhile', 'echo', { while_asked = true })
  wait_for('the request made while the question is open', answered('meanwhile'))
  obs.ask_open_meanwhile = answers.ask == nil
  asked[1].reply({ outcome = 'allowOnce' })
  asked[1].reply({ outcome = 'twice' }) -- a second answer is not sent
  wait_for('the answer to ask', answered('ask'))
  call('ask_error', 'ask', { method = 'client/other', params = vim.empty_dict() })
  wait_for('the second question', function()
    return #asked == 2
  end)
  asked[2].reply(nil, { code = -32601, message = 'not here' })
  wait_for('the answer to the second ask', answered('ask_error'))
  obs.asked = vim.tbl_map(function(q)
    return { method = q.method, params = q.params, id = q.id }
  end, asked)

  conn.notify('remember', { value = 42 })
  call('remembered', 'remembered', vim.empty_dict())
  wait_for('remembered', answered('remembered'))

  call('burst', 'burst', { count = 50 })
  wait_for('the burst', function()
    return #notes == 51
  end)
  obs.notes = notes
  call('unknown', 'no/such', vim.empty_dict())
  wait_for('the unknown method', answered('unknown'))

  call('exit', 'exit', { code = 3, stderr = 'first line\nusage: peer\nbad argument' })
  wait_for('the exit', function()
    return exit ~= nil
  end)
  obs.answers_at_exit = answers.exit
  obs.exit = exit
  obs.stderr = conn.stderr_tail()
  obs.alive = conn.alive()
  call('after', 'echo', {})
  wait_for('the request after the exit', answered('after'))
  obs.answers = answers

  local missing, err = rpc.spawn({ config.workdir .. '/no-such-command' }, {})
  obs.missing = { conn = missing == nil and vim.NIL or 'started', err = err }
end)
