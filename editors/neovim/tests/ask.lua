-- A one-request RPC client for the terminal UI tests: connects to $TILLER_TEST_SOCKET (the
-- Neovim under test listens there), sends the request $TILLER_TEST_ASK ([method, params]) and
-- prints its result as JSON. nvim_get_mode is answered even while that Neovim waits at a
-- prompt; other requests wait until it returns to a mode.

local request = vim.json.decode(vim.env.TILLER_TEST_ASK)
local chan = vim.fn.sockconnect('pipe', vim.env.TILLER_TEST_SOCKET, { rpc = true })
local result = vim.rpcrequest(chan, request[1], unpack(request[2]))
io.stdout:write(vim.json.encode(result))
vim.cmd('qall!')
