"""``tiller.jsontext``: JSON from outside with lone surrogate escapes read as U+FFFD, wherever
they are (values, keys, nesting), in text and bytes; pairs, escaped backslashes and other text
as ``json.loads`` reads them. Plus the decoders that use it: the wire's and the providers'."""

from __future__ import annotations

import json

import pytest

from tiller.jsontext import loads, without_lone_surrogates
from tiller.providers.base import json_payload
from tiller.providers.tool_arguments import parse_tool_arguments
from tiller.wire.framing import decode


@pytest.mark.parametrize("as_bytes", [False, True])
def test_lone_surrogates_become_replacement_characters(as_bytes: bool) -> None:
    text = r'{"k\udcff": ["a\ud800b", {"deep": [["\uDFFF"]]}], "n": 1, "ok": "\ud83d\ude00"}'
    value = loads(text.encode() if as_bytes else text)
    assert value == {"k\ufffd": ["a\ufffdb", {"deep": [["\ufffd"]]}], "n": 1, "ok": "\U0001f600"}
    json.dumps(value, ensure_ascii=False).encode()  # valid Unicode: encodes as UTF-8


def test_what_is_not_a_lone_surrogate_is_read_as_json_loads_reads_it() -> None:
    for text in [r'"\\ud800"', r'"\ud83d\ude00 \u00e9"', '"caf\u00e9"', "[1, 2.5, null, true]",
                 r'{"a": "\\\\udcff"}']:
        assert loads(text) == json.loads(text)
    with pytest.raises(ValueError):
        loads('{"cut": ')


def test_the_walk_keeps_the_order_of_keys_and_leaves_clean_values_alone() -> None:
    value = {"b": 1, "\udc00": 2, "a": ["\ud800"]}
    assert list(without_lone_surrogates(value)) == ["b", "\ufffd", "a"]
    clean = {"x": ["y"]}
    assert without_lone_surrogates(clean) is clean
    assert without_lone_surrogates("\udfff!") == "\ufffd!"


def test_the_decoders_of_the_wire_and_of_model_streams_use_it() -> None:
    assert decode(rb'{"jsonrpc": "2.0", "method": "m", "params": {"t": "\udcff"}}') == {
        "jsonrpc": "2.0", "method": "m", "params": {"t": "\ufffd"}}
    assert json_payload(r'{"delta": {"text": "x\ud800"}}') == {"delta": {"text": "x\ufffd"}}
    assert parse_tool_arguments(r'{"content": "\udcff"}') == {"content": "\ufffd"}
    assert parse_tool_arguments(r'{"content": "cut \udcff') == {"content": "cut \ufffd"}
