"""Serving Tiller's front from the first byte: ``initialize`` is answered before the front,
anyio and the JSON-RPC layer are imported, so a client is ready to send its prompt as soon as
Python and the config are.

``serve_tiller`` imports the front in a thread while it reads the first message. A
plain ``initialize`` (``tiller.fronts.tiller.hello``: known fields, JSON's types, our protocol
version, not ACP's) is answered then and there; the front, once imported, takes what it
declared and warms up for the first prompt (``TillerFront.warm``). Any other first message
(an ACP ``initialize``, a wrong version, a parse error...) waits for the import and is served
as the front serves it, the ACP switch included.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tiller.config import ServerConfig
from tiller.fronts.tiller.hello import (
    Initialize,
    initialize_result,
    may_be_acp,
    speaks_our_version,
)
from tiller.wire.framing import Framing
from tiller.wire.stdio import Stdio

if TYPE_CHECKING:
    from tiller.wire.jsonrpc import Switch

__all__ = ["resume_collection", "serve_tiller"]

log = logging.getLogger(__name__)

FRONT_MODULES = ("tiller.wire.jsonrpc", "tiller.fronts.tiller.front")


def _import_front() -> None:
    for name in FRONT_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # imported again below, where the error is raised
            log.debug("importing %s in the background failed", name, exc_info=True)


def resume_collection() -> None:
    """Turn the garbage collector back on (``tiller.__main__`` pauses it for start-up) once the
    front is ready: its warm-up's imports done (not the whole warm-up: that may wait for a
    first turn), or serving a first message other than a plain ``initialize``."""
    gc.enable()
    log.debug("garbage collection resumed")


def plain_initialize(message: Any) -> Initialize | None:
    """The params of ``message`` if it is Tiller's ``initialize`` as this module answers it
    (see the module docstring), else None."""
    if not (isinstance(message, dict) and message.get("jsonrpc") == "2.0"
            and message.get("method") == "initialize" and "id" in message):
        return None
    msg_id, params = message["id"], message.get("params", {})
    if not (isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)
            and isinstance(params, dict)):
        return None
    if may_be_acp(params):
        return None  # the switch decides
    plain = Initialize.plain(params)
    return plain if plain is not None and speaks_our_version(plain) else None


async def serve_tiller(config: ServerConfig, switch: Callable[[], Switch]) -> None:
    """Serve Tiller's front on stdio (``tiller.wire.jsonrpc.serve``), answering a plain first
    ``initialize`` before the front is imported; ``switch()`` builds the ACP switch for a
    first message that is not one."""
    importing = threading.Thread(target=_import_front, name="tiller-import", daemon=True)
    importing.start()
    stdio = await Stdio.open(None if config.framing == "auto" else Framing(config.framing))
    first = await stdio.first()
    answered = plain_initialize(first)
    if answered is not None:
        result = json.dumps(initialize_result(config), separators=(",", ":"))
        stdio.writer.write(
            f'{{"jsonrpc":"2.0","id":{json.dumps(first["id"])},"result":{result}}}'.encode())
        log.debug("initialize answered before the front was imported")
    await asyncio.to_thread(importing.join)
    from tiller.fronts.tiller.front import TillerFront
    from tiller.wire.jsonrpc import serve

    front = TillerFront(config)
    gc.freeze()  # what start-up built lives as long as the process: no collection walks it
    if answered is None:
        resume_collection()
        await serve(front.front, config, stdio, switch=switch(), first=first)
        return
    front.accept(answered)
    warming = asyncio.ensure_future(front.warm(imported=resume_collection))
    try:
        await serve(front.front, config, stdio)
    finally:
        warming.cancel()
