"""The checkpoint part of the protocol (protocol.md, "Checkpoints", ``session/changes``,
``session/revert``): params and results, re-exported by tiller.protocol.models."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tiller.types import PathText, WireModel

__all__ = [
    "ChangesParams",
    "ChangesResult",
    "CheckpointsInfo",
    "FileChange",
    "RevertParams",
    "RevertResult",
    "SkippedFile",
    "TurnCheckpoint",
]


class CheckpointsInfo(WireModel):
    """Whether the workspace is snapshotted around the agent's changes, and why not."""

    enabled: bool
    reason: str | None = None


class ChangesParams(WireModel):
    session_id: str
    from_: str | None = Field(default=None, alias="from", description="first entry (inclusive)")
    to: str | None = Field(default=None, description="last entry (inclusive)")


class FileChange(WireModel):
    path: str = Field(description="relative to the session's cwd")
    status: Literal["added", "modified", "deleted"]
    additions: int
    deletions: int
    diff: str = Field(description="a unified diff; for binary files one line saying so")
    binary: bool = False


class TurnCheckpoint(WireModel):
    """One turn's checkpoint: revert to ``entryId`` to undo that turn and those after it."""

    entry_id: str
    files: list[str]
    after_entry_id: str | None = Field(
        default=None, description="the last message entry before the checkpoint (one of "
        "session/load's entryIds): where the turn sits in the transcript",
    )


class ChangesResult(WireModel):
    files: list[FileChange]
    checkpoints: list[TurnCheckpoint] = Field(default_factory=list)
    not_covered: list[str] = Field(
        default_factory=list, description="what the snapshots left out (size cap, skipped dirs)"
    )


class RevertParams(WireModel):
    session_id: str
    entry_id: str
    paths: list[PathText] | None = None
    force: bool = False


class SkippedFile(WireModel):
    path: str
    reason: str


class RevertResult(WireModel):
    restored: list[str] = Field(default_factory=list)
    conflicts: list[str] = Field(
        default_factory=list, description="changed by someone else since the agent's last change"
    )
    skipped: list[SkippedFile] = Field(default_factory=list)
