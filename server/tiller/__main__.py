"""``tiller`` / ``python -m tiller``: serve JSON-RPC on stdio. Logs go to stderr, never stdout.

``tiller --acp`` serves the Agent Client Protocol instead (``tiller.acp``); without the flag an
ACP client is recognised by its first ``initialize``.

``tiller chat ...`` is the terminal front end instead (``tiller.chat``); ``tiller schema`` prints
the protocol's JSON Schema (``tiller.schema``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tiller import procs
from tiller.config import ServerConfig, load_config
from tiller.errors import ConfigError

if TYPE_CHECKING:
    from tiller.front import Front, Switch

__all__ = ["main"]


def setup_logging(config: ServerConfig) -> None:
    """Route logs to stderr (or --log-file); keep pygls quiet, it logs every message at INFO."""
    handler: logging.Handler = logging.StreamHandler(sys.stderr)
    if config.log_file:
        handler = logging.FileHandler(config.log_file)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.log_level)
    logging.getLogger("pygls").setLevel(logging.CRITICAL)


def serve(argv: Sequence[str]) -> int:
    procs.harden()  # before any key is read: /proc/PID/environ, memory, fds become private
    try:
        config = load_config(argv, os.environ)
    except ConfigError as exc:
        print(f"tiller: {exc}", file=sys.stderr)
        return 2
    procs.scrub_environ(config.key_variables())  # config.env keeps them for the providers
    setup_logging(config)
    from tiller.front import serve as serve_front

    if config.acp:  # --acp: the Agent Client Protocol from the first message on
        from tiller.acp import AcpFront

        front, switch = AcpFront(config).front, None
    else:
        from tiller.rpc import TillerFront

        front, switch = TillerFront(config).front, acp_on_initialize(config)
    try:
        asyncio.run(serve_front(front, config, switch=switch))
    except KeyboardInterrupt:
        pass
    return 0


def acp_on_initialize(config: ServerConfig) -> Switch:
    """A first ``initialize`` whose ``params.protocolVersion`` is an integer comes from an ACP
    client: the connection is then served by the ACP front instead."""

    def switch(first: dict[str, Any]) -> Front | None:
        params = first.get("params")
        if not (isinstance(params, dict) and "protocolVersion" in params):
            return None  # not ACP's initialize: tiller.acp is never imported
        from tiller.acp import AcpFront, is_acp_initialize

        return AcpFront(config).front if is_acp_initialize(first) else None

    return switch


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["chat"]:
        from tiller.chat import main as chat_main

        return chat_main(args[1:])
    if args[:1] == ["schema"]:
        from tiller.schema import main as schema_main

        return schema_main(args[1:])
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
