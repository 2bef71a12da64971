"""A JSON-RPC peer for the Neovim plugin's own RPC client test (editors/neovim/tests/rpc.lua).

Speaks Content-Length framing on stdio, one message at a time, and does what each request asks:
``echo`` answers its params; ``ask`` sends the client the request it names and answers with the
client's answer (other requests are served meanwhile); ``burst`` sends ``count`` notifications
and its answer in one write, then ``echo``'s answer to nothing byte by byte; ``remembered``
answers the params of the last ``remember`` notification; ``exit`` writes ``stderr`` and exits
with ``code`` without answering.
"""

from __future__ import annotations

import json
import sys
from typing import Any

out = sys.stdout.buffer
inp = sys.stdin.buffer


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_message() -> dict[str, Any] | None:
    length = None
    while True:
        line = inp.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    assert length is not None
    message: dict[str, Any] = json.loads(inp.read(length))
    return message


def main() -> None:
    remembered: Any = None
    asked: dict[str, Any] = {}  # our request id -> the client's request id it answers
    counter = 0
    while (message := read_message()) is not None:
        method, params, mid = message.get("method"), message.get("params"), message.get("id")
        if method is None:  # an answer to one of our requests
            original = asked.pop(str(mid))
            answer = {"result": message.get("result"), "error": message.get("error")}
            out.write(frame({"jsonrpc": "2.0", "id": original, "result": answer}))
        elif method == "remember":
            remembered = params
        elif method == "remembered":
            out.write(frame({"jsonrpc": "2.0", "id": mid, "result": remembered}))
        elif method == "echo":
            out.write(frame({"jsonrpc": "2.0", "id": mid, "result": params}))
        elif method == "ask":
            counter += 1
            ours = f"peer-{counter}"
            asked[ours] = mid
            request = {"jsonrpc": "2.0", "id": ours, "method": params["method"]}
            out.write(frame({**request, "params": params["params"]}))
        elif method == "burst":
            data = b"".join(
                frame({"jsonrpc": "2.0", "method": "note", "params": {"i": i, "text": "naïve ✓"}})
                for i in range(params["count"])
            )
            out.write(data + frame({"jsonrpc": "2.0", "id": mid, "result": "sent"}))
            out.flush()
            for byte in frame({"jsonrpc": "2.0", "method": "note", "params": {"i": -1}}):
                out.write(bytes([byte]))
                out.flush()
        elif method == "exit":
            sys.stderr.write(params["stderr"])
            sys.stderr.flush()
            sys.exit(params["code"])
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            out.write(frame({"jsonrpc": "2.0", "id": mid, "error": error}))
        out.flush()


if __name__ == "__main__":
    main()
