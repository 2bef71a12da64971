"""A raw ACP client for tests: ``tiller --acp`` over real stdio, NDJSON written and read by
hand, so a test can send what no SDK would (a response to nothing, an id-less error) and see
every byte the agent sends.

Every message from the agent is checked against ACP's JSON schema (tests/support/acp_schema.py);
``raw_acp`` fails the test on one that does not conform. The agent's requests are answered by
``answer(method, params)``, which returns the result or raises ``ClientError`` to send an
error answer; the default answers permission questions ``allow_once`` and refuses the rest.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup

from support.acp_schema import AcpWireCheck
from support.fake_openai import FakeOpenAI
from support.helpers import clean_env

__all__ = ["ClientError", "RawAcp", "raw_acp"]

Message = dict[str, Any]
Answer = Callable[[str, dict[str, Any]], Awaitable[Any]]


class ClientError(Exception):
    """Raised by an ``answer`` function: the agent's request gets this error answer."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            self.error["data"] = data


async def allow_once(method: str, params: dict[str, Any]) -> Any:
    """Allow every permission question once; refuse every other request."""
    if method == "session/request_permission":
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    raise ClientError(-32601, f"this client does not serve {method}")


class RawAcp:
    """One connection. ``received`` holds every message from the agent, in order."""

    def __init__(self, process: Process, answer: Answer) -> None:
        self.process = process
        self.answer = answer
        self.received: list[Message] = []
        self.wire = AcpWireCheck()
        self._ids = itertools.count(1)
        self._changed = anyio.Event()

    async def send(self, message: Message) -> None:
        """Write one message as it is (one line)."""
        self.wire.client_sent(message)
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Message:
        """Send a request and return its response (result or error), whatever came between."""
        msg_id = next(self._ids)
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method,
                         "params": params or {}})
        return await self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """``request``'s result; AssertionError for an error answer."""
        response = await self.request(method, params)
        assert "result" in response, response
        return response["result"]

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def wait_for(self, predicate: Callable[[Message], bool], start: int = 0) -> Message:
        """The first message from the agent (from index ``start``) that matches, once there is
        one."""
        with anyio.fail_after(30):
            while True:
                found = next((m for m in self.received[start:] if predicate(m)), None)
                if found is not None:
                    return found
                await self._changed.wait()

    def updates(self, start: int = 0) -> list[dict[str, Any]]:
        """The ``update`` of every ``session/update`` from index ``start`` on."""
        return [m["params"]["update"] for m in self.received[start:]
                if m.get("method") == "session/update"]

    def requests(self, method: str) -> list[Message]:
        return [m for m in self.received if m.get("method") == method and "id" in m]

    async def _read(self, group: TaskGroup) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    message = json.loads(line)
                    self.received.append(message)
                    self.wire.agent_sent(message)
                    self._changed.set()
                    self._changed = anyio.Event()
                    if "method" in message and "id" in message:
                        group.start_soon(self._reply, message)

    async def _reply(self, request: Message) -> None:
        reply: Message = {"jsonrpc": "2.0", "id": request["id"]}
        try:
            reply["result"] = await self.answer(request["method"], request.get("params") or {})
        except ClientError as exc:
            reply["error"] = exc.error
        await self.send(reply)


@asynccontextmanager
async def raw_acp(
    fake: FakeOpenAI, cwd: Path, *args: str, answer: Answer = allow_once,
    env: dict[str, str] | None = None,
) -> AsyncIterator[RawAcp]:
    """A running ``tiller --acp`` with sessions under ``cwd/.sessions`` (``env``: its
    environment, ``clean_env()`` by default); stdin is closed on exit, and the process
    awaited."""
    argv = [sys.executable, "-m", "tiller", "--acp", "--base-url", fake.url, "--cwd", str(cwd),
            "--session-dir", str(cwd / ".sessions"), *args]
    async with await anyio.open_process(argv, env=env or clean_env(), cwd=cwd,
                                        stderr=None) as process:
        client = RawAcp(process, answer)
        async with anyio.create_task_group() as group:
            group.start_soon(client._read, group)
            try:
                yield client
            finally:
                assert process.stdin is not None
                await process.stdin.aclose()
                with anyio.fail_after(30):
                    await process.wait()
                group.cancel_scope.cancel()
    assert not client.wire.problems, "\n".join(client.wire.problems)
