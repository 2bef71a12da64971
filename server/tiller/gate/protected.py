"""Protected paths: files that make a program run code, or that decide what Tiller may do.

Writing one of them is the first step of an attack that needs no question afterwards: a
``core.fsmonitor`` command in ``.git/config`` runs at the next remembered ``git status``, a
``.vscode/tasks.json`` task runs when the folder is opened, ``~/.config/tiller/config.toml``
sets the next session's mode to ``auto``. So the permission gate (tiller.gate.permissions) never
lets a file tool change one without a question, in every mode but ``auto``: not by
``acceptEdits``, not by an ``allow`` rule, not by a remembered ``allowAlways`` (which is not
remembered for them). Checkpoints list changes to them even where ``.gitignore`` ignores them
(tiller.checkpoints.shadow).

``ProtectedPaths.why(real, roots)`` says why a real path is protected, or None:

- a path with a component named like ``PROTECTED_FOLDERS`` or a file named like
  ``PROTECTED_FILES`` (compared case-insensitively: macOS's file systems are), counted from the
  workspace root the path is in (from ``/`` for a path outside every root);
- ``HEAD``, ``config`` or ``commondir`` next to another of them (a folder git takes for a
  repository: ``git status`` in it reads that ``config``);
- anything in Tiller's own folders (the config dir, the data dir, the session dir);
- a hidden entry directly in the home folder (``~/.bashrc``, ``~/.gitconfig``, ``~/.ssh``,
  ``~/.config``…), unless the workspace root is inside that entry (working on ``~/.dotfiles``
  itself).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path

from tiller.frozen import frozen

__all__ = ["PROTECTED_FILES", "PROTECTED_FOLDERS", "REPOSITORY_FILES", "ProtectedPaths"]

PROTECTED_FOLDERS: dict[str, str] = {
    ".git": "git's own files: its config and hooks run commands",
    ".tiller": "Tiller's project folder: prompt templates and skills",
    ".agents": "agent skills",
    ".claude": "Claude Code's settings: its hooks run commands",
    ".vscode": "VS Code's folder settings: tasks can run when the folder opens",
    ".idea": "JetBrains' project settings: run configurations and startup tasks",
    ".zed": "Zed's folder settings and tasks",
    ".devcontainer": "a dev container definition: its commands run on opening",
    ".husky": "git hooks (husky)",
    ".githooks": "git hooks",
}
"""Folders (at any depth of the workspace) whose files make a program run code."""

PROTECTED_FILES: dict[str, str] = {
    ".envrc": "direnv runs it on entering the folder",
    ".exrc": "Vim and Neovim can run it on start",
    ".nvimrc": "Neovim can run it on start",
    ".nvim.lua": "Neovim can run it on start",
    ".lazy.lua": "lazy.nvim runs it on start",
    ".pre-commit-config.yaml": "pre-commit runs its hooks at each commit",
    "lefthook.yml": "lefthook runs its hooks at each commit",
    ".lefthook.yml": "lefthook runs its hooks at each commit",
    ".mcp.json": "MCP servers that agents start",
}
"""Files (at any depth of the workspace) that make a program run code."""

REPOSITORY_FILES = ("HEAD", "config", "commondir")
"""Two of these side by side make a folder git takes for a repository."""


@frozen
class ProtectedPaths:
    """Which real paths are protected (see the module docstring). ``tiller_dirs``: Tiller's
    config, data and session folders; ``home``: the user's home folder (None: no home rule)."""

    tiller_dirs: Sequence[Path] = ()
    home: Path | None = None
    _real_dirs: tuple[Path, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_real_dirs",
                           tuple(Path(os.path.realpath(d)) for d in self.tiller_dirs))

    def why(self, real: Path, roots: Sequence[Path]) -> str | None:
        """Why the real path ``real`` is protected, for a session whose workspace roots are
        ``roots``; None when it is not. Reads the disk (the repository rule looks at the
        path's siblings)."""
        for folder in self._real_dirs:
            if real == folder or real.is_relative_to(folder):
                return "Tiller's own configuration and data"
        real_roots = [Path(os.path.realpath(root)) for root in roots]
        root = next((r for r in real_roots if real.is_relative_to(r)), None)
        parts = real.relative_to(root).parts if root is not None else real.parts[1:]
        for index, part in enumerate(parts):
            name, last = part.casefold(), index == len(parts) - 1
            if name == ".git":  # the folder, or a worktree's or submodule's .git file
                return PROTECTED_FOLDERS[".git"]
            reason = _lookup(PROTECTED_FILES if last else PROTECTED_FOLDERS, name)
            if reason is not None:
                return reason
        if real.name in REPOSITORY_FILES and any(
                os.path.lexists(real.parent / other) for other in REPOSITORY_FILES
                if other != real.name):
            return "a git repository's own files: git reads this config"
        return self._home_reason(real, real_roots)

    def _home_reason(self, real: Path, roots: Sequence[Path]) -> str | None:
        if self.home is None:
            return None
        home = Path(os.path.realpath(self.home))
        if real == home or not real.is_relative_to(home):
            return None
        entry = home / real.relative_to(home).parts[0]
        if not entry.name.startswith(".") or any(r.is_relative_to(entry) for r in roots):
            return None
        return "a start-up or configuration file in the home folder"


def _lookup(table: dict[str, str], name: str) -> str | None:
    return next((reason for key, reason in table.items() if key.casefold() == name), None)
