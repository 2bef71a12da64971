"""The ``write`` tool: create or overwrite a file with the given UTF-8 content.

Parent directories are created. The result's details carry a unified diff from the previous
content (empty for a new file) so a client can show what changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
from pydantic import BaseModel, Field

from tiller.errors import ToolError
from tiller.tools.base import Tool, ToolContext, ToolResult
from tiller.tools.files import first_changed_line, mutation_lock, resolve_path, unified_diff

__all__ = ["WriteParams", "WriteTool"]


class WriteParams(BaseModel):
    path: str = Field(description="Path of the file to write, relative to the working directory")
    content: str = Field(description="The complete new content of the file")


@dataclass
class _Written:
    old: str
    size: int


def _write_file(path: Path, content: str) -> _Written:
    """Write ``content`` to ``path`` (creating parents); returns the previous text and size."""
    with mutation_lock:
        if path.is_dir():
            raise ToolError(f"{path} is a directory")
        old = path.read_bytes().decode("utf-8", errors="replace") if path.exists() else ""
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        path.write_bytes(data)
        return _Written(old, len(data))


class WriteTool(Tool[WriteParams]):
    name = "write"
    description = (
        "Write content to a file, replacing it if it exists and creating parent directories "
        "as needed. Use it for new files or complete rewrites; prefer edit for changes."
    )
    Params = WriteParams

    async def execute(self, params: WriteParams, ctx: ToolContext) -> ToolResult:
        """Write the file; ToolError if the path is a directory or cannot be written."""
        path = resolve_path(params.path, ctx.cwd)
        try:
            written = await anyio.to_thread.run_sync(_write_file, path, params.content)
        except OSError as exc:
            raise ToolError(f"Could not write {path}: {exc.strerror or exc}") from exc
        return ToolResult.text(
            f"Wrote {written.size} bytes to {params.path}",
            details={
                "path": str(path),
                "diff": unified_diff(written.old, params.content, params.path),
                "firstChangedLine": first_changed_line(written.old, params.content),
            },
        )
