"""``tiller`` / ``python -m tiller``: serve JSON-RPC on stdio. Logs go to stderr, never stdout.

``tiller --acp`` serves the Agent Client Protocol instead (``tiller.fronts.acp``); without the flag
an ACP client is recognised by its first ``initialize``.

``tiller chat ...`` is the terminal front end instead (``tiller.chat.app``), ``tiller run PROMPT``
its one-shot mode for scripts; ``tiller schema`` prints
the protocol's JSON Schema (``tiller.protocol.schema``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tiller import procs
from tiller.config import ServerConfig, load_config
from tiller.errors import ConfigError

if TYPE_CHECKING:
    from tiller.wire.jsonrpc import Front, Switch

__all__ = ["main"]


def setup_logging(config: ServerConfig) -> None:
    """Route logs to stderr (or --log-file)."""
    handler: logging.Handler = logging.StreamHandler(sys.stderr)
    if config.log_file:
        from tiller.store.private import private_file

        private_file(config.log_file)  # errors may quote what was said: the user's alone
        handler = logging.FileHandler(config.log_file)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.log_level)


def serve(argv: Sequence[str]) -> int:
    # Start-up builds objects that live as long as the process and little garbage: collecting
    # while importing cost ~7% of the CPU to a first token. Resumed once the front is ready
    # (below for ACP; tiller.fronts.tiller.early.resume_collection).
    gc.disable()
    procs.harden()  # before any key is read: /proc/PID/environ, memory, fds become private
    try:
        keys = procs.receive_keys()  # from a front (tiller chat/run): never in an environ
        config = load_config(argv, {**os.environ, **keys})
    except ConfigError as exc:
        print(f"tiller: {exc}", file=sys.stderr)
        return 2
    procs.scrub_environ(config.key_variables())  # config.env keeps them for the providers
    setup_logging(config)
    from tiller.sandbox import probe

    probe.start()  # in a thread: initialize says whether commands can be sandboxed here
    if config.acp:  # --acp: the Agent Client Protocol from the first message on
        from tiller.fronts.acp.server import AcpFront
        from tiller.wire.jsonrpc import serve as serve_front

        front = AcpFront(config, tuple(argv)).front
        gc.freeze()  # what start-up built lives as long as the process: no collection walks it
        gc.enable()
        logging.getLogger(__name__).debug("garbage collection resumed")
        main = serve_front(front, config)
    else:  # Tiller's front, initialize answered before the front is even imported
        from tiller.fronts.tiller.early import serve_tiller

        main = serve_tiller(config, lambda: acp_on_initialize(config, argv))
    try:
        asyncio.run(main)
    except KeyboardInterrupt:
        pass
    return 0


ACP_HINT = (
    "this connection speaks ACP: its first initialize had an integer protocolVersion without "
    "Tiller's capabilities object. A Tiller client sends capabilities (even {}) with "
    "protocolVersion, or no protocolVersion (protocol.md, initialize)"
)


def acp_on_initialize(config: ServerConfig, argv: Sequence[str] = ()) -> Switch:
    """A first ``initialize`` whose ``params.protocolVersion`` is an integer comes from an ACP
    client, unless its params carry Tiller's ``capabilities`` (and not ACP's
    ``clientCapabilities``): the connection is then served by the ACP front instead, where
    Tiller's own methods get an error naming the reason (``argv``: the command line, which
    ACP's ``authenticate`` reads the configuration again with)."""

    from tiller.fronts.tiller.hello import may_be_acp

    def switch(first: dict[str, Any]) -> Front | None:
        if not may_be_acp(first.get("params")):
            return None  # not ACP's initialize: tiller.fronts.acp is never imported
        from tiller.fronts.acp.server import AcpFront, is_acp_initialize

        if not is_acp_initialize(first):
            return None
        front = AcpFront(config, tuple(argv)).front
        _hint_tiller_methods(front)
        return front

    return switch


def _hint_tiller_methods(front: Front) -> None:
    """Answer Tiller's methods that ACP lacks, on an ACP connection, with a -32601 that says
    why."""
    from tiller.errors import MethodNotFound
    from tiller.protocol.names import METHODS

    def hint(name: str) -> Any:
        async def handle(_params: Any = None) -> Any:
            raise MethodNotFound(f"Method Not Found: {name}: {ACP_HINT}")

        return handle

    for name in METHODS:
        if not front.serves(name):
            front.add(name, hint(name))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["chat"], ["run"]):
        procs.make_private()  # it holds the keys it started with: keep its /proc private
        from tiller.chat.app import main as chat_main

        return chat_main(args[1:], run=args[0] == "run")
    if args[:1] == ["schema"]:
        from tiller.protocol.schema import main as schema_main

        return schema_main(args[1:])
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
