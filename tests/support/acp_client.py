"""An ACP client for the ACP tests: the official ``agent-client-protocol`` client spawning a real
``tiller --acp``, every message recorded and checked against ACP's schema (``Recorder``)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from acp import (
    ReadTextFileResponse,
    RequestError,
    RequestPermissionResponse,
    WriteTextFileResponse,
    spawn_agent_process,
)
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateElicitationResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    PermissionOption,
    ToolCallUpdate,
)
from pydantic import TypeAdapter

from support.acp_schema import AcpWireCheck
from support.fake_openai import FakeOpenAI
from support.helpers import clean_env

Message = dict[str, Any]
_ELICIT_ANSWER: TypeAdapter[CreateElicitationResponse] = TypeAdapter(CreateElicitationResponse)


class Recorder:
    """The client side: records every message from the agent in order (a stream observer) and
    answers permission questions (``answers``, in order; default allow once), elicitations
    (``elicit_answers``, in order; default decline) and, when offered, file requests from
    in-memory ``buffers``. ``wire`` checks every message from the agent
    against ACP's JSON schema (tests/support/acp_schema.py): ``spawn_acp`` fails the test on one
    that does not conform."""

    def __init__(self, answers: list[str] | None = None) -> None:
        self.raw: list[Message] = []
        self.sent: list[Message] = []
        self.updates: list[Any] = []
        self.answers = list(answers or [])
        self.buffers: dict[str, str] = {}
        self.writes: dict[str, str] = {}
        self.elicit_answers: list[dict[str, Any]] = []
        self._changed = anyio.Event()
        self.wire = AcpWireCheck()

    def observe(self, event: StreamEvent) -> None:
        incoming = event.direction is StreamDirection.INCOMING
        (self.raw if incoming else self.sent).append(event.message)
        (self.wire.agent_sent if incoming else self.wire.client_sent)(event.message)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[Message], bool], sent: bool = False) -> Message:
        """The first message received (``sent``: written) that matches, once there is one."""
        with anyio.fail_after(20):
            while True:
                messages = self.sent if sent else self.raw
                found = next((message for message in messages if predicate(message)), None)
                if found is not None:
                    return found
                await self._changed.wait()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: ToolCallUpdate,
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        answer = self.answers.pop(0) if self.answers else "allow_once"
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=answer,
                                                                outcome="selected"))

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        answer = self.elicit_answers.pop(0) if self.elicit_answers else {"action": "decline"}
        return _ELICIT_ANSWER.validate_python(answer)

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.writes[path] = self.buffers[path] = content
        return WriteTextFileResponse()

    # ------------------------------------------------------------------ reading the record

    def session_updates(self, since: int = 0) -> list[Message]:
        return [m["params"]["update"] for m in self.raw[since:]
                if m.get("method") == "session/update"]

    def labels(self) -> list[str]:
        """What the agent sent, as ``kind[:status]``, repeats collapsed; status-less tool call
        updates (streamed output) and session metadata (title, usage) left out."""
        labels: list[str] = []
        for message in self.raw:
            if message.get("method") == "session/request_permission":
                label = "request_permission"
            elif message.get("method") == "session/update":
                update = message["params"]["update"]
                label = update["sessionUpdate"]
                if label in ("session_info_update", "usage_update"):
                    continue
                if label.startswith("tool_call"):
                    if "status" not in update:
                        continue
                    label += ":" + update["status"]
            else:
                continue
            if not labels or labels[-1] != label:
                labels.append(label)
        return labels

    def text(self, kind: str, since: int = 0) -> str:
        return "".join(update["content"]["text"] for update in self.session_updates(since)
                       if update["sessionUpdate"] == kind)

    def final(self, call_id: str) -> Message:
        return next(u for u in self.session_updates() if u.get("toolCallId") == call_id
                    and u.get("status") in ("completed", "failed"))

    def asked(self) -> list[Message]:
        return [m["params"] for m in self.raw if m.get("method") == "session/request_permission"]


@asynccontextmanager
async def spawn_acp(
    recorder: Recorder, fake: FakeOpenAI, cwd: Path, *args: str, flag: bool = True,
    env: dict[str, str] | None = None, unstable: bool = False,
) -> AsyncIterator[ClientSideConnection]:
    """A running ``tiller`` (``--acp`` unless ``flag`` is False) with sessions under
    ``cwd/.sessions`` (``env``: default ``clean_env()``); stdin is closed on exit.
    ``unstable``: the SDK answers what it still counts as unstable (``elicitation/create``:
    stable in the npm schema, not yet in the Python SDK)."""
    argv = ["-m", "tiller", *(["--acp"] if flag else []), "--base-url", fake.url,
            "--cwd", str(cwd), "--session-dir", str(cwd / ".sessions"), *args]
    async with spawn_agent_process(
        recorder, sys.executable, *argv, env=env or clean_env(), cwd=cwd,
        transport_kwargs={"stderr": None}, observers=[recorder.observe],
        use_unstable_protocol=unstable,
    ) as (conn, _process):
        yield conn
    assert not recorder.wire.problems, "\n".join(recorder.wire.problems)


async def start(
    conn: ClientSideConnection, cwd: Path, *, fs: bool = False, mode: str | None = None
) -> str:
    """Initialize (offering fs/* when ``fs``), create a session, maybe set its mode."""
    capabilities = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs)
    )
    await conn.initialize(protocol_version=1, client_capabilities=capabilities)
    session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
    if mode is not None:
        await conn.set_session_mode(session_id=session.session_id, mode_id=mode)
    return session.session_id


def tool_messages(fake: FakeOpenAI, index: int) -> list[str]:
    return [m["content"] for m in fake.requests[index]["messages"] if m["role"] == "tool"]


def user_texts(fake: FakeOpenAI, index: int) -> list[str]:
    texts = []
    for message in fake.requests[index]["messages"]:
        if message["role"] == "user":
            content = message["content"]
            texts.append(content if isinstance(content, str)
                         else "".join(part.get("text", "") for part in content))
    return texts
