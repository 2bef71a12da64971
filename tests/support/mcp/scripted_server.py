"""An MCP server for the failure cases no published server shows on demand, built on the
official SDK's ``MCPServer``: ``crash`` exits mid-call, ``fail`` answers ``isError``,
``slow`` outlasts any tool timeout, ``grow`` adds a tool and says the tool list changed,
``grow_prompt`` adds the prompt ``later`` and says the prompt list changed, ``flood`` returns
a huge text, ``chatter`` floods notifications, ``client`` tells the MCP revision and the
client's capabilities, ``ask`` asks the user's name (a form). ``--exit-at-start``
writes to stderr and exits before speaking MCP; ``--hang``
never answers ``initialize``.

``--wait-fifo PATH`` opens the FIFO at PATH before speaking MCP (so it starts only once
a test opens the FIFO's other end). ``--prompt-fifo PATH`` adds the prompt ``held``, whose text
(``use tabs``) comes only once a test opens that FIFO's other end. ``--named A,B,...`` adds a
tool of each of those names (``a.b``, ``a_b``: names that collide once sanitised), answering
with its own name.

Run: ``python scripted_server.py [--exit-at-start | --hang | --wait-fifo PATH]
[--prompt-fifo PATH] [--named A,B,...]`` (stdio).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Annotated

# The start-up failures come before the SDK's import (about a second on a loaded machine), so
# what they write reaches stderr well within a short start-up timeout.
if __name__ == "__main__" and "--exit-at-start" in sys.argv:
    sys.stderr.write("scripted server: refusing to start\n")
    sys.exit(2)
if __name__ == "__main__" and "--hang" in sys.argv:
    sys.stderr.write("scripted server: hanging\n")
    sys.stderr.flush()
    time.sleep(3600)

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts import Prompt
from pydantic import BaseModel

server = MCPServer("scripted")


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    sys.stderr.write("crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def fail(why: str) -> str:
    """Fail (the SDK answers with an ``isError`` result)."""
    raise ToolError(why)


@server.tool()
def slow(seconds: float = 30.0) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "done sleeping"


async def changed(ctx: Context, what: str) -> None:
    """Say the ``what`` list changed in both eras: on a ``subscriptions/listen`` stream
    (2026-07-28) and as ``notifications/<what>/list_changed`` (the handshake era); the SDK
    drops the one that does not fit the connection."""
    if what == "tools":
        await ctx.notify_tools_changed()
        await ctx.session.send_tool_list_changed()
    else:
        await ctx.notify_prompts_changed()
        await ctx.session.send_prompt_list_changed()


def extra() -> str:
    """A tool that exists only after grow."""
    return "extra here"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool ``extra`` and say so (see ``changed``)."""
    server.add_tool(extra)
    await changed(ctx, "tools")
    return "grown"


def later(topic: str) -> str:
    """A prompt that exists only after grow_prompt."""
    return f"Later, talk about {topic}."


@server.tool()
async def grow_prompt(ctx: Context) -> str:
    """Add the prompt ``later`` and say so (see ``changed``)."""
    server.add_prompt(Prompt.from_function(later))
    await changed(ctx, "prompts")
    return "prompt added"


@server.tool()
async def chatter(ctx: Context, count: int = 1000) -> str:
    """Send ``count`` log messages and ``count`` tools/list_changed, then answer."""
    for n in range(count):
        await ctx.info(f"note {n}")
        await changed(ctx, "tools")
    return f"said {count} things"


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("Your name?", Name)


@server.tool()
def ask(name: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
    """Ask the user's name (a form elicitation: in a 2026-07-28 call an input request, else a
    request mid-call), answer what came back."""
    return f"{name.action}: {name.data.name if name.action == 'accept' else '-'}"


@server.tool()
def client(ctx: Context) -> str:
    """The MCP revision of this request and the capabilities the client declared, as JSON."""
    capabilities = ctx.client_capabilities
    return json.dumps({
        "protocolVersion": ctx.protocol_version,
        "capabilities": capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
        if capabilities is not None else None,
    })


@server.tool()
def flood(lines: int = 5000) -> str:
    """A text of ``lines`` long lines."""
    return "\n".join(f"line {n} " + "x" * 60 for n in range(lines))


def held() -> str:
    """A prompt that answers once the test opens the other end of the --prompt-fifo FIFO."""
    with open(sys.argv[sys.argv.index("--prompt-fifo") + 1]):
        pass
    return "use tabs"


def named(name: str) -> None:
    """Add a tool called ``name`` that answers with its name."""

    def answer() -> str:
        return f"this is {name}"

    server.add_tool(answer, name=name, description=f"The tool {name}.")


if __name__ == "__main__":
    if "--named" in sys.argv:
        for name in sys.argv[sys.argv.index("--named") + 1].split(","):
            named(name)
    if "--prompt-fifo" in sys.argv:
        server.add_prompt(Prompt.from_function(held))
    if "--wait-fifo" in sys.argv:
        with open(sys.argv[sys.argv.index("--wait-fifo") + 1]):
            pass
    server.run("stdio")
