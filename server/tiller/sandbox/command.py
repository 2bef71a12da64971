"""One session's command sandbox: how a command will run (``plan``) and the bubblewrap command
line that runs it so (``wrap``).

The file system a sandboxed command sees:

- ``/`` read-only (``--ro-bind / /``), a fresh ``/dev``, a ``/proc`` of its own pid namespace
  (no other process is visible), a private empty ``/tmp``;
- in ``workspace-write``: the workspace roots (``cwd`` and ``additionalDirectories``) and the
  configured ``writable`` folders bound writable; then, read-only again, every entry at the top
  of those roots that the permission gate protects (``.git``, ``.vscode``, ``.envrc``, the
  home folder's dotfiles when the home folder is a root...), the git folders a ``.git`` file
  points to, and Tiller's config folder where it lies inside a root;
- hidden (an empty read-only folder, or ``/dev/null`` for a file): the configured secrets
  (``hidden``), Tiller's data and session folders, and the sockets that would let a command
  act outside the sandbox (the user's runtime folder with its D-Bus and systemd sockets, the
  system bus, systemd's private socket, Docker's, Podman's and containerd's).

It runs with no capabilities (``--cap-drop ALL``: root gets none either), ``no_new_privs``
(bubblewrap sets it), in new pid, IPC and (without network) network namespaces, and dies with
the server (``--die-with-parent``); when the command's shell exits, the pid namespace ends and
every process it left behind is killed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tiller.frozen import frozen
from tiller.modes import Escalation
from tiller.sandbox.probe import availability, bwrap_path
from tiller.sandbox.settings import SandboxSettings
from tiller.sandbox.use import RunsIn, SandboxUse

__all__ = ["ESCAPE_HATCHES", "CommandSandbox", "Mounts"]

ESCAPE_HATCHES: tuple[str, ...] = (
    "/run/user", "/run/dbus", "/run/systemd/private", "/run/docker.sock", "/run/docker",
    "/run/podman", "/run/containerd", "/var/run/docker.sock",
)
"""Sockets through which a command could have another process act for it, outside the
sandbox (``systemd-run --user``, ``docker run -v /:/host``): always hidden."""


@frozen
class Mounts:
    """What a sandboxed command sees besides the read-only root: ``writable`` folders,
    ``read_only`` paths inside them, ``hidden`` paths (real paths, in mount order)."""

    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _git_dirs(dot_git: Path) -> list[Path]:
    """The folders a ``.git`` file (a worktree's, a submodule's) points to: its ``gitdir`` and
    that folder's ``commondir``; [] for anything else."""
    try:
        first = dot_git.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return []
    if not first.startswith("gitdir:"):
        return []
    git_dir = _real(dot_git.parent / first.removeprefix("gitdir:").strip())
    found = [git_dir]
    with contextlib.suppress(OSError, IndexError):
        common = (git_dir / "commondir").read_text(encoding="utf-8").splitlines()[0].strip()
        found.append(_real(git_dir / common))
    return found


@dataclass
class CommandSandbox:
    """A session's sandbox for its commands. ``roots()``: the workspace roots now;
    ``protected(path)``: the permission gate's protected-path test (tiller.gate.protected);
    ``read_only_dirs``: Tiller's config folder (kept read-only inside a root);
    ``hidden_dirs``: Tiller's data and session folders (hidden); ``terminal()``: the session
    runs commands in the editor's terminal; ``may_escalate()``: a command asking to leave the
    sandbox can be allowed in the session's permission mode."""

    settings: SandboxSettings
    roots: Callable[[], Sequence[Path]]
    protected: Callable[[Path], bool] = field(default=lambda _path: False)
    read_only_dirs: Sequence[Path] = ()
    hidden_dirs: Sequence[Path] = ()
    terminal: Callable[[], bool] = field(default=lambda: False)
    may_escalate: Callable[[], bool] = field(default=lambda: True)

    def plan(self, escalate: Escalation | None = None, reason: str | None = None) -> SandboxUse:
        """How a command asking for ``escalate`` (the model's ``reason``) runs now."""
        settings, required = self.settings, self.settings.mode == "required"
        if not settings.on:
            return SandboxUse("off", True, reason="the sandbox is off")
        if escalate == "unsandboxed":
            if required:
                return SandboxUse("off", True, "unsandboxed", reason, refused=(
                    "the sandbox is required in this session: a command cannot run outside "
                    "it (escalate \"network\" still can, if the user allows it)"))
            return SandboxUse("off", True, "unsandboxed", reason or "no reason given")
        if self.terminal() and not required:
            return SandboxUse("off", True, reason="it runs in the editor's terminal, which "
                              "Tiller does not sandbox")
        found = availability()
        if not found.ok:
            if required:
                return SandboxUse("off", True, reason=found.reason, refused=(
                    f"the sandbox is required in this session, and {found.reason}"))
            return SandboxUse("off", True, reason=f"no sandbox here: {found.reason}")
        wants_network = escalate == "network" and not settings.network
        runs_in: RunsIn = "read-only" if settings.mode == "read-only" else "workspace-write"
        return SandboxUse(runs_in, settings.network or wants_network,
                          "network" if wants_network else None,
                          (reason or "no reason given") if wants_network else None)

    # ------------------------------------------------------------------ the command line

    def mounts(self, use: SandboxUse) -> Mounts:
        """What a command running as ``use`` sees, from the disk as it is now."""
        writable: list[Path] = []
        if use.runs_in == "workspace-write":
            candidates = [*self.roots(), *(Path(os.path.expanduser(w))
                                           for w in self.settings.writable)]
            for path in candidates:
                real = _real(path)
                if real.is_dir() and real not in writable:
                    writable.append(real)
        read_only = self._read_only(writable)
        return Mounts(tuple(writable), tuple(read_only), tuple(self._hidden(writable)))

    def _read_only(self, writable: Sequence[Path]) -> list[Path]:
        found: list[Path] = []

        def add(path: Path) -> None:
            if _inside(path, writable) and path not in found and os.path.lexists(path):
                found.append(path)

        for root in writable:
            with contextlib.suppress(OSError), os.scandir(root) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    path = root / entry.name
                    if self.protected(path):
                        add(_real(path))
                    if entry.name == ".git" and entry.is_file(follow_symlinks=False):
                        for git_dir in _git_dirs(path):
                            add(git_dir)
        for folder in self.read_only_dirs:
            add(_real(folder))
        return found

    def _hidden(self, writable: Sequence[Path]) -> list[Path]:
        names = [*self.settings.hidden, *map(str, self.hidden_dirs), *ESCAPE_HATCHES]
        if runtime := os.environ.get("XDG_RUNTIME_DIR"):
            names.append(runtime)
        found: list[Path] = []
        for name in names:
            path = Path(os.path.expanduser(name))
            if not path.is_absolute() or not os.path.lexists(path):
                continue
            real = _real(path)
            if any(root == real or root.is_relative_to(real) for root in writable):
                continue  # a workspace inside a hidden folder stays visible
            if real.is_relative_to("/tmp") and not _inside(real, writable):
                continue  # the private /tmp hides it already
            if real not in found and os.path.lexists(real):
                found.append(real)
        # a path inside another hidden folder is hidden with it (bwrap could not even make its
        # mount point in the empty read-only folder that replaces the outer one)
        return [path for path in found
                if not any(other != path and path.is_relative_to(other) for other in found)]

    def wrap(self, argv: Sequence[str], cwd: Path, use: SandboxUse,
             env: dict[str, str]) -> list[str]:
        """The bwrap command line that runs ``argv`` in ``cwd`` as ``use`` says (a sandboxed
        ``use``); ``env`` (the command's environment) gets ``TMPDIR=/tmp`` when its
        ``TMPDIR`` would not be writable."""
        bwrap = bwrap_path() or "bwrap"
        mounts = self.mounts(use)
        args = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc",
                "--cap-drop", "ALL"]
        if not use.network:
            args.append("--unshare-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for path in mounts.writable:
            args += ["--bind", str(path), str(path)]
        for path in mounts.read_only:
            args += ["--ro-bind", str(path), str(path)]
        for path in mounts.hidden:
            if path.is_dir():
                args += ["--tmpfs", str(path), "--remount-ro", str(path)]
            else:
                args += ["--ro-bind", "/dev/null", str(path)]
        tmpdir = env.get("TMPDIR")
        if tmpdir and not _inside(_real(Path(tmpdir)), mounts.writable):
            env["TMPDIR"] = "/tmp"
        return [*args, "--chdir", str(cwd), "--", *argv]
