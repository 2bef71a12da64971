"""Malformed LSP frames (``BAD_FRAMES``): each must get exactly one answer and leave the server
serving the frames that follow (the framing tests, in-process and over stdio)."""

from __future__ import annotations

import json

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "agent/getState"}).encode()
N = len(BODY)

BAD_FRAMES = {
    "short": b"Content-Length: %d\r\n\r\n%s" % (N - 5, BODY),
    "long": b"Content-Length: %d\r\n\r\n%s" % (N + 5, BODY),
    "much-longer": b"Content-Length: %d\r\n\r\n%s" % (N + 100_000, BODY),
    "negative": b"Content-Length: -%d\r\n\r\n%s" % (N, BODY),
    "zero": b"Content-Length: 0\r\n\r\n%s" % BODY,
    "non-numeric": b"Content-Length: forty\r\n\r\n%s" % BODY,
    "absurd": b"Content-Length: 99999999999999\r\n\r\n%s" % BODY,
    "no-blank-line": b"Content-Length: %d\r\n%s" % (N, BODY),
    "nul-in-value": b"Content-Length: %d\x00\r\n\r\n%s" % (N, BODY),
    "nul-in-name": b"Content\x00-Length: %d\r\n\r\n%s" % (N, BODY),
    "no-length": b"Content-Type: application/vscode-jsonrpc\r\n\r\n%s" % BODY,
    "not-json": b"Content-Length: 5\r\n\r\nhello",
    "junk-line": b"garbage\r\n",
}
