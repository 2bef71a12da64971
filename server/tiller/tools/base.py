"""The tool contract shared by the loop and every built-in tool.

A tool declares its parameters as a pydantic model (the JSON schema the model sees is generated
from it, and the loop validates arguments against it). ``execute`` returns a ``ToolResult`` or
raises; the loop turns any exception (``ToolError`` for expected failures) into an error result
the model can read. Cancellation (abort, timeout) arrives as the async library's cancellation:
a tool that owns processes must kill them on the way out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel

from tiller.types import ImageContent, TextContent

__all__ = ["EditorFiles", "Tool", "ToolContext", "ToolResult"]

P = TypeVar("P", bound=BaseModel)


@dataclass
class ToolResult:
    """What a tool returns. ``terminate`` asks the loop to end the run after this batch
    (honoured only when every result in the batch asks for it)."""

    content: list[TextContent | ImageContent]
    details: Any = None
    is_error: bool = False
    terminate: bool = False

    @classmethod
    def text(cls, text: str, *, details: Any = None, is_error: bool = False) -> ToolResult:
        return cls(content=[TextContent(text=text)], details=details, is_error=is_error)


class EditorFiles(Protocol):
    """The editor's view of files, unsaved buffers included (``client/readTextFile`` and
    ``client/writeTextFile``). ``can_read``/``can_write`` say which the client offers; without
    one, tools use the disk for it. Both methods raise ``ToolError`` when the client fails."""

    can_read: bool
    can_write: bool

    async def read_text(
        self, path: Path, line: int | None = None, limit: int | None = None
    ) -> str:
        """The file's text as the editor has it; ``line`` (1-based) and ``limit`` select lines."""
        ...

    async def write_text(self, path: Path, content: str) -> None:
        """Replace the file's content in the editor (its buffer, so the user can undo)."""
        ...


@dataclass
class ToolContext:
    """Where and for whom a tool runs. ``update`` emits a cumulative partial result; ``files``
    is the editor's file access, or None to use the disk only. ``resolved_path`` is the real
    path of the call's ``path`` argument as the permission gate decided on it (and showed the
    user): a file tool acts on exactly that path on disk. None when no gate resolved one; the
    tool then resolves the path itself, once (``tiller.tools.safefs``)."""

    cwd: Path
    tool_call_id: str
    update: Callable[[Any], None] = field(default=lambda _partial: None)
    files: EditorFiles | None = None
    resolved_path: Path | None = None


class Tool(ABC, Generic[P]):
    """A callable capability offered to the model.

    Subclasses set ``name``, ``description`` and ``Params``; ``sequential = True`` makes any batch
    containing this tool run one call at a time.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    sequential: ClassVar[bool] = False

    def parameters_schema(self) -> dict[str, Any]:
        """The JSON schema of ``Params``, as sent to the model."""
        schema = self.Params.model_json_schema(by_alias=True)
        schema.pop("title", None)
        return schema

    @abstractmethod
    async def execute(self, params: P, ctx: ToolContext) -> ToolResult:
        """Run the call. Raise ``ToolError`` for failures the model should read."""
