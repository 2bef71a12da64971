"""The JSON-RPC plumbing both fronts use: framing off a byte stream (``framing``), message
validation in front of pygls's dispatcher (``transport``), typed method registration and
server-to-client requests (``jsonrpc``).
"""
