"""The JSON-RPC plumbing both fronts use: framing off a byte stream (``framing``), stdin and
stdout as framed messages (``stdio``), message validation (``transport``), the peer that
dispatches requests and matches responses (``endpoint``), typed method registration and
server-to-client requests (``jsonrpc``), merged streamed deltas (``coalesce``).
"""
