"""The ACP client's terminals as ``tiller.tools.base.Terminal``: ``bash`` runs its command with
``terminal/create`` when the client declared ``terminal: true`` (tiller.tools.bash_terminal).

The command line is run as ``<shell> -c <command>`` (the same shell as Tiller's own ``bash``), in
the session's cwd, the client keeping the last ``outputByteLimit`` bytes. An error answer or no
answer becomes a ``ToolError`` (the call's error result), and so does an exit status whose
``exitCode`` is not an integer. ``terminal/wait_for_exit`` may take as
long as the command: it has no timeout of its own (the call's timeout or an abort ends it).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiller.errors import ToolError
from tiller.fronts.acp.editor import Send
from tiller.gate.editor import describe_error
from tiller.tools.base import TerminalOutput

__all__ = ["AcpTerminal"]

REQUEST_TIMEOUT = 30.0


def _shell() -> str:
    return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


def _status(answer: dict[str, Any], method: str) -> tuple[int | None, str | None]:
    """The exit code and signal an exit status states. A number is its integer value (JSON has
    one number type: ``1.0`` is 1); an exit code that is no integer (``"1"``, ``true``, 2.5) is
    not an exit status at all: a ToolError, never success."""
    code, signal = answer.get("exitCode"), answer.get("signal")
    if isinstance(code, float) and code.is_integer():
        code = int(code)
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise ToolError(f"the editor's {method} answer has an exitCode that is not an "
                        f"integer: {json.dumps(code)[:100]}")
    return code, signal if isinstance(signal, str) and signal else None


@dataclass
class AcpTerminal:
    """The terminals of one session (``send``: a request to the ACP client)."""

    send: Send
    session_id: str

    async def _call(self, method: str, params: dict[str, Any],
                    timeout: float = REQUEST_TIMEOUT) -> dict[str, Any]:
        try:
            answer = await self.send(method, {"sessionId": self.session_id, **params}, timeout)
        except TimeoutError:
            raise ToolError(f"the editor did not answer {method} in time") from None
        except Exception as exc:
            raise ToolError(f"the editor failed {method}: {describe_error(exc)}") from exc
        return answer if isinstance(answer, dict) else {}

    async def create(self, command: str, cwd: Path, output_limit: int) -> str:
        answer = await self._call("terminal/create", {
            "command": _shell(), "args": ["-c", command], "cwd": str(cwd),
            "outputByteLimit": output_limit,
        })
        terminal_id = answer.get("terminalId")
        if not isinstance(terminal_id, str) or not terminal_id:
            raise ToolError("the editor's terminal/create answer has no terminalId")
        return terminal_id

    async def output(self, terminal_id: str) -> TerminalOutput:
        answer = await self._call("terminal/output", {"terminalId": terminal_id})
        status = answer.get("exitStatus")
        code, signal = (_status(status, "terminal/output") if isinstance(status, dict)
                        else (None, None))
        return TerminalOutput(str(answer.get("output", "")), answer.get("truncated") is True,
                              isinstance(status, dict), code, signal)

    async def wait_for_exit(self, terminal_id: str) -> TerminalOutput:
        answer = await self._call("terminal/wait_for_exit", {"terminalId": terminal_id},
                                  math.inf)
        code, signal = _status(answer, "terminal/wait_for_exit")
        return TerminalOutput("", exited=True, exit_code=code, signal=signal)

    async def kill(self, terminal_id: str) -> None:
        await self._call("terminal/kill", {"terminalId": terminal_id})

    async def release(self, terminal_id: str) -> None:
        await self._call("terminal/release", {"terminalId": terminal_id})
