"""The exception tree. Only misuse raises; tool and provider failures are data.

::

    TillerError                      root of everything Tiller raises on purpose
    ├── RequestError                 a client request that cannot be served; has a JSON-RPC code
    │   ├── AgentBusyError           -32010  a run is active: use agent/steer or agent/followUp
    │   ├── NoActiveRunError         -32011  nothing to abort or steer into
    │   ├── CannotContinueError      -32012  agent/continue with nothing to continue from
    │   ├── UnknownSessionError      -32013  no session with that id
    │   ├── ProviderNotConfiguredError -32014  no usable provider (missing key, unknown name)
    │   ├── UnknownEntryError        -32015  session/fork at an entry the session does not have
    │   ├── SessionLogError          -32016  a session file that cannot be read (tiller.store.log)
    │   ├── CheckpointsOffError      -32017  session/changes or session/revert without checkpoints
    │   ├── CommandFailedError       -32018  a slash command whose source could not expand it
    │                                        (an MCP prompt the server refused)
    │   ├── ResourceLimitError       -32019  the server reached its open-file limit
    │   ├── RunFailedError           -32020  ACP only: a session/prompt whose run ended in error
    │   │                                    (tiller.fronts.acp)
    │   ├── PromptBlockedError       -32021  a UserPromptSubmit hook refused the prompt
    │   │                                    (tiller.hooks)
    │   ├── UnknownProcessError      -32022  process/output or process/kill: no such process
    │   ├── AcpRequestError          ACP's own codes, answered in ACP mode only (ACP's schema)
    │   │   ├── AuthRequiredError    -32000  the provider has no key (tiller.fronts.acp.auth)
    │   │   └── ResourceNotFoundError -32002  an unknown sessionId (UnknownSessionError in ACP)
    │   └── JsonRpcError             JSON-RPC's own codes (tiller.wire answers them)
    │       ├── ParseError           -32700  not JSON
    │       ├── InvalidRequest       -32600  JSON, but not a JSON-RPC request
    │       ├── MethodNotFound       -32601  a method nobody serves
    │       ├── InvalidParams        -32602  params that do not fit the method (names the field)
    │       └── InternalError        -32603  a bug: logged, answered without a traceback
    ├── ClientAnswerError            the client answered one of our requests with an error
    ├── HttpCallError                a provider's HTTP call failed (tiller.providers.http); caught
    │   │                            in the provider, whose stream's final message says it
    │   ├── HttpStatusError          the server answered an error status (its body read)
    │   ├── HttpTimeoutError         nothing arrived within the timeout
    │   ├── HttpConnectionError      cannot connect, or the connection broke (the cause chained)
    │   └── StreamErrorEvent         the stream carried an error payload (status 200)
    ├── ToolError                    raised by a tool: becomes an error tool result, never escapes
    │   └── SymlinkInPathError       a no-follow walk met a symlink (tiller.tools.safefs)
    └── ConfigError                  invalid command line or environment at start-up

Tiller's own codes live in -32099..-32000 (JSON-RPC's implementation-defined range), away from
the LSP codes -32001/-32002 that vim.lsp and vscode-jsonrpc treat specially. protocol.md lists
them.
"""

from __future__ import annotations

import errno
from typing import Any, ClassVar

__all__ = [
    "JSONRPC_ERRORS",
    "OUT_OF_DESCRIPTORS",
    "AcpRequestError",
    "AgentBusyError",
    "AuthRequiredError",
    "CannotContinueError",
    "CheckpointsOffError",
    "ClientAnswerError",
    "CommandFailedError",
    "ConfigError",
    "HttpCallError",
    "HttpConnectionError",
    "HttpStatusError",
    "HttpTimeoutError",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "JsonRpcError",
    "MethodNotFound",
    "NoActiveRunError",
    "ParseError",
    "PromptBlockedError",
    "ProviderNotConfiguredError",
    "RequestError",
    "ResourceLimitError",
    "ResourceNotFoundError",
    "RunFailedError",
    "SessionLogError",
    "StreamErrorEvent",
    "SymlinkInPathError",
    "TillerError",
    "ToolError",
    "UnknownEntryError",
    "UnknownProcessError",
    "UnknownSessionError",
]


class TillerError(Exception):
    """Root of the tree drawn in this module's docstring."""


class RequestError(TillerError):
    """A request that cannot be served; rpc turns it into a JSON-RPC error with ``code``."""

    code: ClassVar[int] = -32000

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class AgentBusyError(RequestError):
    code = -32010


class NoActiveRunError(RequestError):
    code = -32011


class CannotContinueError(RequestError):
    code = -32012


class UnknownSessionError(RequestError):
    code = -32013


class ProviderNotConfiguredError(RequestError):
    code = -32014


class UnknownEntryError(RequestError):
    code = -32015


class SessionLogError(RequestError):
    """A session file that cannot be used at all (no header, a newer format, corrupt: a
    ``parentId`` loop or a malformed entry)."""

    code = -32016


class CheckpointsOffError(RequestError):
    """``session/changes`` or ``session/revert`` for a session without checkpoints (no git on
    PATH, or sessions not saved); the message says which."""

    code = -32017


class CommandFailedError(RequestError):
    """A slash command its source could not expand (an MCP server refusing ``prompts/get``,
    or gone); the message names the server and its reason. Nothing is sent to the model."""

    code = -32018


OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})
"""The errnos of an OSError that is the process's (or the system's) open-file limit, not the
file's fault: the request fails with ResourceLimitError."""


class ResourceLimitError(RequestError):
    """A request that needed a file descriptor when the server had none left (EMFILE: its
    open-file limit; ENFILE: the system's); the message says which limit and how to get
    under it. The server keeps serving."""

    code = -32019


class RunFailedError(RequestError):
    """ACP only: a ``session/prompt`` whose run ended in ``error`` (the model or network
    failed); ``data`` carries ``{stopReason: "error", errorMessage, usage}``."""

    code = -32020


class PromptBlockedError(RequestError):
    """A UserPromptSubmit hook refused the prompt (exit code 2, or ``decision: "block"``); the
    message carries its reason, ``data`` ``{hookEvent, reason}``. No run started: nothing was
    added to the conversation."""

    code = -32021


class UnknownProcessError(RequestError):
    """A ``processId`` that names no background process of the session."""

    code = -32022


class AcpRequestError(RequestError):
    """An error with one of ACP's own codes: the ACP front answers it; Tiller's front never
    raises one, so protocol.md's table does not list them (ACP's schema does)."""


class AuthRequiredError(AcpRequestError):
    """ACP's "authentication required": the provider has no key (tiller.fronts.acp.auth)."""

    code = -32000


class ResourceNotFoundError(AcpRequestError):
    """ACP's own code for an unknown ``sessionId``; Tiller's ``UnknownSessionError`` (-32013)
    is answered with it in ACP mode."""

    code = -32002


class JsonRpcError(RequestError):
    """An error with one of JSON-RPC 2.0's own codes (the specification's names); the
    subclasses say which (this base class answers as an internal error)."""

    code = -32603


class ParseError(JsonRpcError):
    code = -32700


class InvalidRequest(JsonRpcError):
    code = -32600


class MethodNotFound(JsonRpcError):
    code = -32601


class InvalidParams(JsonRpcError):
    code = -32602


class InternalError(JsonRpcError):
    code = -32603


JSONRPC_ERRORS: tuple[type[JsonRpcError], ...] = (
    ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError)
"""JSON-RPC's codes, in the specification's order."""


class ClientAnswerError(TillerError):
    """The client answered a request of ours (``client/*``, ACP's ``fs/*``...) with an
    error: its ``code``, ``message`` and ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class HttpCallError(TillerError):
    """A provider's HTTP call failed; ``message`` says how (the provider words it for users)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class HttpStatusError(HttpCallError):
    """An error status. ``body`` is the answer's JSON (else its text, else None); ``headers``
    its headers, names lower-cased (``retry-after`` among them)."""

    def __init__(self, status: int, body: Any, headers: dict[str, str]) -> None:
        said = body if isinstance(body, str) else None if body is None else str(body)
        super().__init__(f"HTTP {status}: {said[:300]}" if said else f"HTTP {status}")
        self.status = status
        self.body = body
        self.headers = headers


class HttpTimeoutError(HttpCallError):
    """Nothing arrived within the timeout: no answer, or a stream that stalled."""


class HttpConnectionError(HttpCallError):
    """No connection, or one that broke; the HTTP library's exception is the ``__cause__``."""


class StreamErrorEvent(HttpCallError):
    """An error payload in a 200 stream; ``body`` is the payload's ``error`` member."""

    def __init__(self, message: str, body: Any) -> None:
        super().__init__(message)
        self.body = body


class ToolError(TillerError):
    """Raised inside a tool to fail the call with this message as the error result;
    ``details`` (optional) become the result's ``details``."""

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.details = details


class SymlinkInPathError(ToolError):
    """A path walked without following symlinks met one at ``at`` (tiller.tools.safefs):
    nothing was read or written."""

    def __init__(self, message: str, at: str) -> None:
        super().__init__(message)
        self.at = at


class ConfigError(TillerError):
    """Invalid configuration at start-up."""
