"""The documentation links only to what a clone has: every relative link in the repository's
Markdown (README.md, protocol.md, docs/, the editors' and bench's READMEs) names a file or folder
that git tracks here. A link out of the checkout (``../shared/...``) worked in the developers'
tree and nowhere else."""

from __future__ import annotations

import re
import subprocess
from typing import get_args

from support.paths import REPO
from tiller.types import RunStopReason

FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.MULTILINE)
HTML_LINK = re.compile(r"<(?:a|img)\s[^>]*(?:href|src)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def tracked() -> set[str]:
    """The repository's files as git lists them, relative to the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode()
    return {name for name in listed.split("\0") if name}


def documents(files: set[str]) -> list[str]:
    """The repository's own Markdown files (an npm package's are not its)."""
    return sorted(name for name in files if name.endswith(".md") and "node_modules/" not in name)


def links(markdown: str) -> list[str]:
    """The link targets of ``markdown``, code blocks and code spans left out (an example's
    ``[name](uri)`` is no link)."""
    prose = CODE_SPAN.sub("", FENCE.sub("", markdown))
    return [*INLINE_LINK.findall(prose), *REFERENCE.findall(prose), *HTML_LINK.findall(prose)]


def broken_links(document: str, markdown: str, files: set[str]) -> list[str]:
    """The relative links of ``markdown`` (the text of ``document``, a path in the checkout)
    that name nothing git tracks: no tracked file, and no folder holding one."""
    folders = {"/".join(name.split("/")[:depth]) for name in files
               for depth in range(1, name.count("/") + 1)}
    broken = []
    for target in links(markdown):
        if SCHEME.match(target) or target.startswith("#"):
            continue  # a web address, or a heading of the same page
        path = target.split("#", 1)[0].split("?", 1)[0]
        resolved = ((REPO / document).parent / path).resolve()
        try:
            inside = resolved.relative_to(REPO.resolve()).as_posix()
        except ValueError:
            broken.append(f"{document}: {target} (outside the repository)")
            continue
        if inside not in files and inside not in folders:
            broken.append(f"{document}: {target}")
    return broken


def test_every_relative_link_names_a_file_of_the_repository() -> None:
    files = tracked()
    checked = documents(files)
    assert {"README.md", "protocol.md", "docs/loop.md"} <= set(checked)
    broken = [line for document in checked for line in
              broken_links(document, (REPO / document).read_text(encoding="utf-8"), files)]
    assert broken == []


def test_the_readme_links_to_the_loop_page() -> None:
    assert "docs/loop.md" in links((REPO / "README.md").read_text(encoding="utf-8"))


def test_the_check_finds_what_a_clone_lacks() -> None:
    """Code is no link; a link out of the checkout, or to a file git does not track, is
    broken; a web address, a heading and a tracked file or folder are not."""
    markdown = ("See [the loop](docs/loop.md#turns), [gone](docs/gone.md), "
                "[theirs](../shared/design/loop-semantics.md), [web](https://example.com), "
                "[here](#words), [tests](tests/support), `[name](uri)`.\n\n```\n"
                "[x](missing.md)\n```\n\n[ref]: protocol.md\n")
    assert links(markdown) == ["docs/loop.md#turns", "docs/gone.md",
                               "../shared/design/loop-semantics.md", "https://example.com",
                               "#words", "tests/support", "protocol.md"]
    files = {"docs/loop.md", "protocol.md", "tests/support/paths.py"}
    assert broken_links("README.md", markdown, files) == [
        "README.md: docs/gone.md",
        "README.md: ../shared/design/loop-semantics.md (outside the repository)",
    ]
    assert broken_links("docs/loop.md", "[up](../protocol.md)", files) == []


def test_the_loop_page_names_every_way_a_run_ends() -> None:
    """docs/loop.md keeps step with the code: its table has a row for each run stop reason."""
    page = (REPO / "docs" / "loop.md").read_text(encoding="utf-8")
    rows = [line.split("|") for line in page.splitlines() if line.startswith("| `")]
    named = {name for row in rows if row[2].strip() != "when"  # not the header
             for name in re.findall(r"`(\w+)`", row[1])}
    assert named == set(get_args(RunStopReason))


def quick_start() -> str:
    """The README up to its first section: what a newcomer reads before running anything."""
    return (REPO / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0]


def test_the_quick_start_says_where_the_command_is_and_which_local_servers_call_tools() -> None:
    """``make`` puts ``tiller`` in .venv/bin, not on PATH: the quick start says so (and how to
    activate), and names the local servers with which the agent can act (the embedded model
    cannot)."""
    text = quick_start()
    assert ".venv/bin/tiller" in text and ". .venv/bin/activate" in text
    assert "chat only" in text
    assert "ollama serve" in text and "llama-server --jinja" in text


INSTALL_TILLER = re.compile(r"pip install\s+(?:--\S+\s+)*['\"]?tiller\b")
"""An install command that would fetch PyPI's "tiller", an unrelated package."""


def test_no_hint_installs_pypis_tiller() -> None:
    """Error hints and docs name this checkout's install (``pip install -e '.[local]'``,
    ``make chat``), never ``pip install 'tiller[local]'``."""
    files = tracked()
    texts = [name for name in files if name.endswith((".py", ".md", ".lua", ".ts"))
             and "node_modules/" not in name and name != "tests/test_docs.py"]
    found = [name for name in texts
             if INSTALL_TILLER.search((REPO / name).read_text(encoding="utf-8", errors="replace"))]
    assert found == []
    assert INSTALL_TILLER.search("run pip install 'tiller[local]'")
    assert not INSTALL_TILLER.search("pip install -e '.[local]'")
