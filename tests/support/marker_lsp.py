"""A tiny language server for the editor tests, written with pygls: it reports every line of a
document that holds ``BROKEN`` as an error (``marker-lsp``, code ``M1``) and every line that holds
``OLDSTYLE`` as a warning (code ``M2``), publishing on open, change and save, ``--delay SECONDS``
after the event (as a real server takes its time to analyse). Run it on stdio:
``python tests/support/marker_lsp.py [--delay 1]``."""

from __future__ import annotations

import argparse
import asyncio

from lsprotocol import types
from pygls.lsp.server import LanguageServer

MARKERS = (
    ("BROKEN", types.DiagnosticSeverity.Error, "M1", "BROKEN marks a broken line"),
    ("OLDSTYLE", types.DiagnosticSeverity.Warning, "M2", "OLDSTYLE is deprecated"),
)


def markers(lines: list[str]) -> list[types.Diagnostic]:
    """The diagnostics of a document's ``lines``."""
    found = []
    for number, line in enumerate(lines):
        for marker, severity, code, message in MARKERS:
            column = line.find(marker)
            if column >= 0:
                start = types.Position(line=number, character=column)
                end = types.Position(line=number, character=column + len(marker))
                found.append(types.Diagnostic(
                    range=types.Range(start=start, end=end), message=message,
                    severity=severity, code=code, source="marker-lsp"))
    return found


def build(delay: float) -> LanguageServer:
    """The server, publishing ``delay`` seconds after each open, change and save."""
    server = LanguageServer("marker-lsp", "v1",
                            text_document_sync_kind=types.TextDocumentSyncKind.Full)

    async def publish(uri: str) -> None:
        await asyncio.sleep(delay)
        document = server.workspace.get_text_document(uri)
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=document.version, diagnostics=markers(document.lines)))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(params: types.DidOpenTextDocumentParams) -> None:
        await publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(params: types.DidChangeTextDocumentParams) -> None:
        await publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: types.DidSaveTextDocumentParams) -> None:
        await publish(params.text_document.uri)

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay", type=float, default=0.0)
    build(parser.parse_args().delay).start_io()
