"""JSON-RPC message validation between the framed stdio (``tiller.wire.stdio``) and the
dispatcher (``tiller.wire.endpoint``).

The framing layer (``tiller.wire.framing``) detects the framing and recovers from bad frames;
this module replies -32700/-32600 exactly once to input that is not a valid JSON-RPC message
(or nests deeper than ``MAX_DEPTH``) and hands valid messages to the endpoint, params as plain
JSON. ``$/cancelRequest`` is routed to ``on_cancel``, and answered ``null`` when it was sent as
a request.

A response (an object with ``result`` or ``error`` and no ``method``) is never answered, however
malformed: JSON-RPC forbids it, and two peers that answer each other's bad responses would
ping-pong forever. One with a null, missing or unknown id (a client rejecting one of our
notifications with an id-less error, say) is logged and dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from tiller.wire.endpoint import Endpoint
from tiller.wire.framing import MAX_DEPTH, BadFrame, TooDeep, exceeds_depth
from tiller.wire.stdio import FramedWriter, Stdio

__all__ = ["Selector", "serve_stdio"]

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
_TOO_DEEP = f"Invalid request: nested more than {MAX_DEPTH} levels deep"


CancelFn = Callable[[Any], None]
Selector = Callable[[dict[str, Any]], "tuple[Endpoint, CancelFn] | None"]
"""Given the first valid message, another endpoint (and cancel hook) to serve the whole
connection with, or None to keep the default (how ``tiller`` detects an ACP client)."""


class MessageRouter:
    """Validates decoded JSON and feeds valid JSON-RPC messages to an endpoint."""

    def __init__(
        self,
        endpoint: Endpoint,
        writer: FramedWriter,
        on_cancel: Callable[[Any], None],
        select: Selector | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.writer = writer
        self.on_cancel = on_cancel
        self.select = select

    def send_error(self, msg_id: Any, code: int, message: str) -> None:
        body = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
        self.writer.write(json.dumps(body).encode())

    def handle(self, message: Any) -> None:
        """Answer a ``BadFrame`` with -32700, an invalid request with -32600; take a response
        (never answered), dispatch the rest."""
        if isinstance(message, BadFrame):
            self.send_error(None, PARSE_ERROR, f"Parse error: {message.reason}")
            return
        if isinstance(message, TooDeep):  # its id was read from the frame's top level
            if message.is_response:
                log.warning("dropped a response nested too deeply to decode (id %r)",
                            message.msg_id)
            else:
                self.send_error(message.msg_id, INVALID_REQUEST, _TOO_DEEP)
            return
        if isinstance(message, dict) and _is_response(message):
            self.take_response(message)
            return
        readable_id = message.get("id") if isinstance(message, dict) else None
        msg_id = readable_id if _valid_id(readable_id) else None
        if exceeds_depth(message):
            self.send_error(msg_id, INVALID_REQUEST, _TOO_DEEP)
            return
        if isinstance(message, list):
            self.send_error(None, INVALID_REQUEST, "Invalid request: batches are not supported")
            return
        if not isinstance(message, dict):
            self.send_error(None, INVALID_REQUEST, "Invalid request: expected a JSON object")
            return
        problem = _request_problem(message)
        if problem is not None:
            self.send_error(msg_id, INVALID_REQUEST, f"Invalid request: {problem}")
            return
        self.dispatch(message)

    def take_response(self, data: dict[str, Any]) -> None:
        """Hand a response to the endpoint (which drops one for an id it never sent, with a
        warning);
        log and drop one that names no request (null, missing or invalid id), is not JSON-RPC
        2.0 or nests too deep. Never answers."""
        if (data.get("jsonrpc") == "2.0" and _valid_id(data.get("id"))
                and not exceeds_depth(data)):
            self.dispatch(data)
            return
        log.warning("dropped a response that answers no request: %s",
                    json.dumps(data, default=str)[:500])

    def dispatch(self, data: dict[str, Any]) -> None:
        if self.select is not None:  # the first valid message may pick another endpoint
            select, self.select = self.select, None
            chosen = select(data)
            if chosen is not None:
                self.endpoint, self.on_cancel = chosen
                self.endpoint.write = self.writer.write
        method = data.get("method")
        if method == "$/cancelRequest":
            self.cancel(data)
        elif method is not None and "id" in data:
            self.endpoint.on_request(data["id"], method, data.get("params"))
        elif method is not None:
            self.endpoint.on_notification(method, data.get("params"))
        elif "error" in data:
            self.endpoint.on_response(data["id"], error=data["error"])
        else:
            self.endpoint.on_response(data["id"], result=data["result"])

    def cancel(self, data: dict[str, Any]) -> None:
        """``$/cancelRequest``: cancel ``params.id``. Sent as a request it is answered exactly
        once: ``null`` after it has acted, -32602 when ``params.id`` cannot name a request (not
        a string or an integer). A notification with such an id is logged and dropped."""
        params = data.get("params")
        target = params.get("id") if isinstance(params, dict) else None
        answered = "id" in data
        try:
            if _valid_id(target):
                self.on_cancel(target)
            elif answered:
                self.send_error(data["id"], INVALID_PARAMS,
                                "Invalid params: id: the id of a request, a string or an integer")
                answered = False
            else:
                log.warning("$/cancelRequest without a request id: %s",
                            json.dumps(params, default=str)[:200])
        finally:
            if answered:
                self.writer.write(json.dumps({"jsonrpc": "2.0", "id": data["id"],
                                              "result": None}).encode())


def _is_response(data: dict[str, Any]) -> bool:
    """A response (to be taken, never answered): ``result`` or ``error``, and no ``method``."""
    return "method" not in data and ("result" in data or "error" in data)


def _valid_id(msg_id: Any) -> bool:
    return isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)


def _request_problem(data: dict[str, Any]) -> str | None:
    """Why ``data`` (not a response) is not a valid JSON-RPC 2.0 request or notification, or
    None if it is one."""
    if data.get("jsonrpc") != "2.0":
        return 'missing or wrong "jsonrpc" member (must be "2.0")'
    if "id" in data and not _valid_id(data["id"]):
        return '"id" must be a string or an integer'
    if "method" in data:
        if not isinstance(data["method"], str) or not data["method"]:
            return '"method" must be a non-empty string'
        if "params" in data and not isinstance(data["params"], (dict, list)):
            return '"params" must be an object or an array'
        return None
    return 'missing "method"'


async def serve_stdio(
    endpoint: Endpoint,
    on_cancel: Callable[[Any], None],
    stdio: Stdio,
    select: Selector | None = None,
    first: Any = None,
) -> None:
    """Serve ``endpoint`` on ``stdio`` until end of input; ``select`` may hand the connection
    to another endpoint on its first valid message. ``first``: a message already read off
    ``stdio`` (``Stdio.first``), handled before the rest."""
    endpoint.write = stdio.writer.write
    router = MessageRouter(endpoint, stdio.writer, on_cancel, select)
    if first is not None:
        router.handle(first)
    async for message in stdio.messages:
        try:
            router.handle(message)
        except Exception:
            log.exception("failed to handle a message")
