"""Unit tests of ``tiller.wire.framing``: recovery does not depend on how the input is chunked, and
the depth check never recurses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.frames import BAD_FRAMES
from tiller.wire.framing import MAX_DEPTH, BadFrame, FramedReader, Framing, exceeds_depth

pytestmark = pytest.mark.anyio


def lsp(msg_id: int) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "agent/getState"}).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def read_all(data: bytes, chunk: int) -> list[Any]:
    """Every message (a BadFrame as None) read from ``data`` served ``chunk`` bytes at a time."""
    offset = 0

    async def read(n: int) -> bytes:
        nonlocal offset
        piece = data[offset : offset + min(n, chunk)]
        offset += len(piece)
        return piece

    reader = FramedReader(read, Framing.LSP)
    return [None if isinstance(m, BadFrame) else m["id"] async for m in reader.messages()]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
async def test_recovery_is_the_same_however_the_input_is_chunked(chunk: int) -> None:
    kinds = [k for k in BAD_FRAMES if k != "much-longer"]  # that one needs a following header
    stream = lsp(1) + b"".join(BAD_FRAMES[k] + lsp(i) for i, k in enumerate(kinds, start=10))
    stream += BAD_FRAMES["much-longer"] + lsp(99)

    got = await read_all(stream, chunk)

    expected: list[Any] = [1]
    for i in range(10, 10 + len(kinds)):
        expected += [None, i]
    assert got == [*expected, None, 99]


async def test_a_header_split_across_a_bad_body_end_is_found() -> None:
    """A too-long length that ends inside the next header: reading resumes at that header."""
    body = lsp(2)
    first = b'{"jsonrpc": "2.0", "id": 1, "method": "agent/getState"}'
    stream = b"Content-Length: %d\r\n\r\n%s%s" % (len(first) + 9, first, body)
    assert await read_all(stream, 1 << 20) == [None, 2]


def test_exceeds_depth_counts_levels_without_recursing() -> None:
    def nested(depth: int) -> Any:
        value: Any = 1
        for i in range(depth):
            value = [value] if i % 2 else {"a": value}
        return value

    assert not exceeds_depth(nested(MAX_DEPTH))
    assert exceeds_depth(nested(MAX_DEPTH + 1))
    assert exceeds_depth(nested(200_000))  # far past the recursion limit
    assert not exceeds_depth("scalar") and not exceeds_depth([])
