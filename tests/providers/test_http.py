"""tiller.providers.http: the SSE reader on awkward chunkings, and what the client does with TLS
and redirects. (Every failure mode of a real server is in the provider tests, on the fakes.)"""

from __future__ import annotations

import http.server
import json
import ssl
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import anyio
import httpx2
import pytest

from tiller.errors import HttpConnectionError, HttpStatusError
from tiller.providers import base
from tiller.providers import http as provider_http
from tiller.providers.http import FAST_READ, HttpEndpoint, sse_events

pytestmark = pytest.mark.anyio


class Chunks(httpx2.AsyncByteStream):
    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


async def events_of(*chunks: bytes) -> list[tuple[str, str]]:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                               stream=Chunks(chunks))

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(answer)) as client:
        endpoint = HttpEndpoint("http://x", headers={}, timeout=5, http_client=client)
        response = await endpoint.open_stream("/s", {})
        try:
            return [event async for event in sse_events(response)]
        finally:
            await response.aclose()


async def test_events_split_anywhere_in_crlf_or_lf_with_names_comments_and_multiline_data() -> None:
    stream = (b": a comment\r\nevent: delta\r\ndata: {\"a\":\r\ndata:  1}\r\n\r\n"
              b"data: \xc3\xa9t\xc3\xa9\n\nevent: empty\n\ndata:[DONE]\n\n")
    whole = await events_of(stream)
    assert whole == [("delta", '{"a":\n 1}'), ("", "été"), ("", "[DONE]")]
    # One byte at a time (a multi-byte character split too): the same events.
    assert await events_of(*(stream[i:i + 1] for i in range(len(stream)))) == whole


async def test_bytes_that_are_not_utf8_read_as_replacement_characters() -> None:
    """As the SSE standard decodes a stream (and as llama.cpp-style servers can send half of a
    character a token ended in): the event and the rest of the stream still arrive."""
    stream = b'data: {"t": "caf\xc3"}\n\ndata: {"t": "\xff ok"}\n\ndata: [DONE]\n\n'
    assert await events_of(stream) == [
        ("", '{"t": "caf\ufffd"}'), ("", '{"t": "\ufffd ok"}'), ("", "[DONE]")]


async def test_an_event_the_stream_ended_in_is_dropped() -> None:
    assert await events_of(b"data: 1\n\ndata: {\"cut") == [("", "1")]


async def test_an_event_past_the_cap_is_malformed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_http, "MAX_EVENT", 64)
    with pytest.raises(ValueError, match="over 64 bytes"):
        await events_of(b"data: " + b"x" * 40 + b"\n", b"data: " + b"y" * 40 + b"\n\n")
    with pytest.raises(ValueError, match="over 64 bytes"):
        await events_of(*[b"z" * 16] * 10)  # one line that never ends


async def test_an_error_status_carries_its_json_body_and_headers() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(429, headers={"Retry-After": "3"},
                               json={"error": {"message": "slow down"}})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(answer)) as client:
        endpoint = HttpEndpoint("http://x", headers={}, timeout=5, http_client=client)
        with pytest.raises(HttpStatusError) as raised:
            await endpoint.open_stream("/s", {})
    assert raised.value.status == 429
    assert raised.value.body == {"error": {"message": "slow down"}}
    assert raised.value.headers["retry-after"] == "3"


async def test_a_plain_http_server_gets_no_tls_and_no_redirects_an_https_one_both() -> None:
    plain = HttpEndpoint("http://127.0.0.1:9/v1", headers={}, timeout=5)
    secure = HttpEndpoint("https://127.0.0.1:9/v1", headers={}, timeout=5)
    try:
        assert plain.client().follow_redirects is False
        assert secure.client().follow_redirects is True
        # Nothing listens on port 9: a connection error, in our terms.
        with pytest.raises(HttpConnectionError):
            await plain.open_stream("/chat/completions", {})
    finally:
        await plain.aclose()
        await secure.aclose()


async def test_connections_read_through_the_light_backend() -> None:
    """``_lighter`` reaches into httpx2's transport; a release that moves its pool would leave
    the heavier reads in place without failing anything else: this notices."""
    endpoint = HttpEndpoint("http://127.0.0.1:9/v1", headers={}, timeout=5)
    try:
        pool = endpoint.client()._transport._pool  # type: ignore[attr-defined]
        assert type(pool._network_backend).__name__ == "LightBackend"
    finally:
        await endpoint.aclose()


class _Events(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b'data: {"over": "tls"}\n\ndata: [DONE]\n\n')

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An HTTPS server on loopback whose self-signed certificate (openssl) is the only one the
    process trusts (``SSL_CERT_FILE``, read by the TLS context built afresh)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=tiller-test",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    base.tls_context.cache_clear()
    server = http.server.HTTPServer(("127.0.0.1", 0), _Events)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        base.tls_context.cache_clear()


async def test_an_https_server_is_read_over_verified_tls(tls_server: str) -> None:
    endpoint = HttpEndpoint(tls_server, headers={}, timeout=5)
    try:
        response = await endpoint.open_stream("/chat/completions", {"model": "m"})
        events = [event async for event in sse_events(response)]
        await response.aclose()
    finally:
        await endpoint.aclose()
    assert events == [("", '{"over": "tls"}'), ("", "[DONE]")]
    # A name the certificate does not carry is not talked to.
    base.tls_context.cache_clear()
    stranger = HttpEndpoint(tls_server.replace("127.0.0.1", "localhost"), headers={}, timeout=5)
    try:
        with pytest.raises(HttpConnectionError, match="(?i)certificate"):
            await stranger.open_stream("/chat/completions", {"model": "m"})
    finally:
        await stranger.aclose()


CHAT_BODY = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in [
    {"id": "c", "object": "chat.completion.chunk", "model": "m",
     "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]},
    {"id": "c", "object": "chat.completion.chunk", "model": "m",
     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]) + b"data: [DONE]\n\n"
RESPONSES_BODY = b"".join(
    b"event: " + event["type"].encode() + b"\ndata: " + json.dumps(event).encode() + b"\n\n"
    for event in [
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "message", "id": "m1", "role": "assistant", "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
         "item_id": "m1", "delta": "hi"},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"type": "message", "id": "m1", "role": "assistant",
                  "content": [{"type": "output_text", "text": "hi"}]}},
        {"type": "response.completed", "response": {"id": "r", "status": "completed",
                                                    "output": []}},
    ])


class _KeepAlive(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with a Content-Length: the connection stays open for the next request."""

    protocol_version = "HTTP/1.1"
    connections: list[int] = []

    def setup(self) -> None:
        super().setup()
        self.connections.append(self.client_address[1])

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        body = RESPONSES_BODY if self.path.endswith("/responses") else CHAT_BODY
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_finished_stream_leaves_its_connection_for_the_next_call(api: str) -> None:
    """After ``[DONE]`` (or ``response.completed``) the rest of the body is read, so the next
    model call reuses the connection instead of opening (and, over TLS, handshaking) a new one."""
    from tiller.providers.base import ModelRequest
    from tiller.providers.openai import OpenAIProvider
    from tiller.types import UserMessage

    connections: list[int] = []
    handler = type("Handler", (_KeepAlive,), {"connections": connections})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    provider = OpenAIProvider(model="m", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                              api_key="k", api=api)  # type: ignore[arg-type]
    try:
        for _ in range(3):
            *_, final = [item async for item in provider.stream(
                ModelRequest(messages=[UserMessage(content="hi")]))]
            assert final.stop_reason == "stop", final.error_message
            assert final.content[0].text == "hi"  # type: ignore[union-attr]
    finally:
        await provider.aclose()
        server.shutdown()
        server.server_close()
    assert len(connections) == 1


async def test_headers_from_the_config_win_whatever_their_case_and_are_sent_once() -> None:
    from tiller.providers.base import ModelRequest
    from tiller.providers.openai import OpenAIProvider
    from tiller.types import UserMessage

    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                               content=CHAT_BODY)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(answer)) as client:
        provider = OpenAIProvider(
            model="m", base_url="http://x/v1", api_key="sk-key", api="chat", http_client=client,
            headers={"Authorization": "Bearer from-config", "X-Team": "core"})
        *_, final = [item async for item in provider.stream(
            ModelRequest(messages=[UserMessage(content="hi")]))]
        keyed = OpenAIProvider(model="m", base_url="http://x/v1", api_key="sk-key", api="chat",
                               http_client=client)
        *_, keyed_final = [item async for item in keyed.stream(
            ModelRequest(messages=[UserMessage(content="hi")]))]
    assert final.stop_reason == keyed_final.stop_reason == "stop"
    assert seen[0].headers.get_list("authorization") == ["Bearer from-config"]
    assert seen[0].headers["x-team"] == "core"
    assert seen[1].headers.get_list("authorization") == ["Bearer sk-key"]
    assert seen[1].headers["user-agent"].startswith("Tiller/")


class _EventStream(http.server.BaseHTTPRequestHandler):
    """A server of one event stream (``read_paced`` sets ``read_first`` on each event read)."""

    read_first = threading.Event()

    def start(self, *headers: tuple[str, str]) -> None:
        """Read the request; answer 200 with an event stream's headers and ``headers``."""
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Trickle(_EventStream):
    """One event, then (once the client has read it: ``read_first``) five more, 30 ms apart,
    each its own write and flush, then the end of the body (HTTP/1.0: the connection closes)."""

    def do_POST(self) -> None:
        self.start()
        self.wfile.write(b"data: 0\n\n")
        self.wfile.flush()
        self.read_first.wait(10)
        for n in range(1, 6):
            time.sleep(0.03)  # the pace of a model's tokens, not a synchronization
            self.wfile.write(f"data: {n}\n\n".encode())
            self.wfile.flush()


class _CountedReads(httpx2.AsyncByteStream):
    """A response body that counts the chunks read from the connection."""

    def __init__(self, stream: httpx2.AsyncByteStream) -> None:
        self.stream, self.reads = stream, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            self.reads += 1
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


async def read_paced(
    base: type[_EventStream], window: float
) -> tuple[list[str], int]:
    """One stream from a server with a handler made from ``base`` (whose ``read_first`` is set
    once the client has the first event), read with ``window``: the events' data, and how many
    chunks the body was read in."""
    handler = type("Handler", (base,), {"read_first": threading.Event()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = HttpEndpoint(f"http://127.0.0.1:{server.server_address[1]}", headers={}, timeout=5)
    try:
        response = await endpoint.open_stream("/s", {})
        counted = response.stream = _CountedReads(response.stream)  # type: ignore[arg-type]
        data = []
        async for _, datum in sse_events(response, window):
            data.append(datum)
            handler.read_first.set()  # type: ignore[attr-defined]
        await response.aclose()
    finally:
        await endpoint.aclose()
        server.shutdown()
        server.server_close()
    return data, counted.reads


@pytest.mark.parametrize("window", [0.0, 1.0])
async def test_a_stream_read_once_per_window_gets_what_came_meanwhile_in_one_read(
    window: float,
) -> None:
    """With a window, the events the server sends while the reader waits out the window come in
    one read (one wake-up), all of them and in order. The first read of the body waits for
    nothing (the first event may even come with the headers, read before the window applies),
    so events 1-5 take at most two reads. Without a window, every event is read as it comes."""
    data, reads = await read_paced(_Trickle, window)
    assert data == [str(n) for n in range(6)]
    if window:
        assert reads <= 3  # [0], [1], [2-5] (or [0, 1], [2-5])
    else:
        assert reads > 3  # read as they came (30 ms apart)


class _ChunkedBurst(_EventStream):
    """As the real APIs stream: HTTP/1.1, ``Transfer-Encoding: chunked``, an HTTP chunk per
    event. One event, then (once the client has read it) five more in a single write."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.start(("transfer-encoding", "chunked"))
        self.wfile.write(_http_chunk(b"data: 0\n\n"))
        self.wfile.flush()
        self.read_first.wait(10)
        self.wfile.write(b"".join(_http_chunk(f"data: {n}\n\n".encode()) for n in range(1, 6))
                         + b"0\r\n\r\n")
        self.wfile.flush()


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def test_the_http_chunks_of_one_read_are_not_paced_one_by_one() -> None:
    """Pacing is per read of the connection, not per HTTP chunk: five events that arrive in one
    read come at once, not a window apart each (five seconds here)."""
    with anyio.fail_after(4):
        data, _ = await read_paced(_ChunkedBurst, 1.0)
    assert data == [str(n) for n in range(6)]


class _FastBursts(_EventStream):
    """A fast stream: three bursts of 64 events (8 KiB each), each written once the client has
    read an event of the one before."""

    def do_POST(self) -> None:
        self.start()
        for burst in range(3):
            self.read_first.clear()
            self.wfile.write(b"".join(f"data: {burst}.{n:02d} {'x' * 112}\n\n".encode()
                                      for n in range(64)))
            self.wfile.flush()
            self.read_first.wait(10)


async def test_a_fast_stream_is_read_as_fast_as_it_comes() -> None:
    """A read that brings FAST_READ bytes or more is followed at once: the reader does not wait
    out a window (60 s here) between bursts, which would only make a fast reply later."""
    assert 8192 > FAST_READ
    with anyio.fail_after(30):
        data, _ = await read_paced(_FastBursts, 60.0)
    assert [datum.split()[0] for datum in data] == [
        f"{burst}.{n:02d}" for burst in range(3) for n in range(64)]
