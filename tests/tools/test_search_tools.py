"""The search tools (ls, find, grep) and their shared walk, called directly.

grep runs on both engines where it matters: the ``grep`` fixture gives the Python engine and,
when ``rg`` is installed, ripgrep; ``test_grep_engines_give_identical_output`` compares them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from tiller.errors import ToolError
from tiller.tools.base import Tool, ToolContext, ToolResult
from tiller.tools.builtin import default_tools
from tiller.tools.find import FindTool
from tiller.tools.grep import GrepTool
from tiller.tools.ls import LsTool
from tiller.tools.walk import PathGlob, is_ignored, parse_gitignore, spawned, walk_files
from tiller.types import TextContent

pytestmark = pytest.mark.anyio

needs_rg = pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not installed")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

PROJECT: dict[str, str | bytes] = {
    ".gitignore": "build/\n*.log\n!keep.log\n/top_only.txt\ndocs/**/*.tmp\n",
    ".hidden.py": "secret = 'needle'\n",
    "src/app.py": "import os\n\ndef main():\n    return 'needle'\n",
    "src/util/helpers.py": "def helper():\n    # Needle in a haystack\n    pass\n",
    "src/util/data.json": '{"needle": true}\n',
    "tests/test_app.py": "def test_main():\n    assert main() == 'needle'\n",
    "build/out.py": "needle = 'built'\n",
    "debug.log": "needle in the log\n",
    "keep.log": "needle kept\n",
    "top_only.txt": "needle top\n",
    "sub/top_only.txt": "needle sub\n",
    "sub/.gitignore": "*.py\n",
    "sub/ignored.py": "needle = 'ignored by sub/.gitignore'\n",
    "docs/a/b/x.tmp": "needle tmp\n",
    "docs/readme.md": "# Needle docs\n",
    "node_modules/pkg/index.py": "needle = 'dependency'\n",
    "image.bin": b"needle\x00\x01\x02binary",
}

PY_FILES = [".hidden.py", "src/app.py", "src/util/helpers.py", "tests/test_app.py"]


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (relative path -> content) under ``root``; returns ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def git_init(root: Path) -> Path:
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    """PROJECT outside any git repository."""
    root = tmp_path / "plain"
    root.mkdir()
    return write_tree(root, PROJECT)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """PROJECT in a fresh git repository (nothing committed)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    root.mkdir()
    return git_init(write_tree(root, PROJECT))


ENGINES = [pytest.param(False, id="python"), pytest.param(True, id="rg", marks=needs_rg)]


@pytest.fixture(params=ENGINES)
def grep(request: pytest.FixtureRequest) -> GrepTool:
    """grep on the Python engine, and on ripgrep when it is installed."""
    return GrepTool(use_ripgrep=request.param)


def ctx_at(cwd: Path) -> ToolContext:
    return ToolContext(cwd=cwd, tool_call_id="call-1")


async def call(tool: Tool[Any], cwd: Path, **args: Any) -> ToolResult:
    """Validate ``args`` as the loop would and run the tool in ``cwd``."""
    return await tool.execute(tool.Params.model_validate(args), ctx_at(cwd))


def text_of(result: ToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


# --- ls ---------------------------------------------------------------------------------------


async def test_ls_sorts_case_insensitively_marks_dirs_and_shows_dotfiles(tmp_path: Path) -> None:
    write_tree(tmp_path, {"b.txt": "", "A.txt": "", "a.md": "", ".env": "", "c/d.txt": ""})
    (tmp_path / "Docs").mkdir()
    result = await call(LsTool(), tmp_path)
    assert text_of(result) == ".env\na.md\nA.txt\nb.txt\nc/\nDocs/"
    assert result.details["entries"] == 6


async def test_ls_lists_a_relative_path_and_says_when_empty(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pkg/mod.py": ""})
    (tmp_path / "empty").mkdir()
    assert text_of(await call(LsTool(), tmp_path, path="pkg")) == "mod.py"
    assert text_of(await call(LsTool(), tmp_path, path="empty")) == "(empty directory)"


async def test_ls_limit_cuts_with_a_notice(tmp_path: Path) -> None:
    write_tree(tmp_path, {f"f{index}.txt": "" for index in range(5)})
    result = await call(LsTool(), tmp_path, limit=2)
    assert text_of(result) == (
        "f0.txt\nf1.txt\n\n[Showing 2 of 5 entries (limit 2). Use limit=5 to see them all, "
        "or list a subdirectory.]"
    )
    assert result.details["truncated"] is True


async def test_ls_errors_for_a_missing_path_or_a_file(tmp_path: Path) -> None:
    write_tree(tmp_path, {"file.txt": "x"})
    with pytest.raises(ToolError, match="Path not found"):
        await call(LsTool(), tmp_path, path="nope")
    with pytest.raises(ToolError, match="Not a directory"):
        await call(LsTool(), tmp_path, path="file.txt")


# --- find -------------------------------------------------------------------------------------


async def test_find_with_double_star_respects_gitignore_in_a_repo(repo: Path) -> None:
    result = await call(FindTool(), repo, pattern="**/*.py")
    assert text_of(result).splitlines() == PY_FILES
    assert result.details["source"] == "git"


async def test_find_outside_git_walks_and_gives_the_same_results(repo: Path, plain: Path) -> None:
    for pattern in ["**/*.py", "*.py", "*.log", "*.txt", "docs/**", "src/*.py", "src/**/*"]:
        in_git = text_of(await call(FindTool(), repo, pattern=pattern))
        walked = await call(FindTool(), plain, pattern=pattern)
        forced = await call(FindTool(use_git=False), repo, pattern=pattern)
        assert walked.details["source"] == forced.details["source"] == "walk"
        assert text_of(walked) == in_git == text_of(forced), pattern
    # Below the top, the walk still applies the ancestors' .gitignore files (docs/**/*.tmp).
    for tool in (FindTool(), FindTool(use_git=False)):
        assert text_of(await call(tool, repo, pattern="*", path="docs")) == "readme.md"


async def test_find_glob_rules(plain: Path) -> None:
    async def find(pattern: str, **args: Any) -> list[str]:
        return text_of(await call(FindTool(), plain, pattern=pattern, **args)).splitlines()

    assert await find("*.py") == PY_FILES  # no '/': names at any depth
    assert await find("src/*.py") == ["src/app.py"]  # with '/': the whole path
    assert await find("src/**/*.py") == ["src/app.py", "src/util/helpers.py"]
    assert await find("*.log") == ["keep.log"]  # *.log ignored, !keep.log re-included
    assert await find("*.txt") == ["sub/top_only.txt"]  # /top_only.txt is anchored
    assert await find("docs/**") == ["docs/readme.md"]
    assert await find("*.py", path="src") == ["app.py", "util/helpers.py"]


async def test_find_limit_notice_and_no_match(plain: Path) -> None:
    result = await call(FindTool(), plain, pattern="**/*.py", limit=2)
    assert text_of(result) == (
        ".hidden.py\nsrc/app.py\n\n[Showing 2 of 4 paths (limit 2). Use limit=4 for all of "
        "them, or narrow the pattern or path.]"
    )
    none = await call(FindTool(), plain, pattern="*.rs")
    assert text_of(none) == "No files found matching *.rs"
    assert none.is_error is False


async def test_find_errors_for_a_missing_path_or_a_file(plain: Path) -> None:
    with pytest.raises(ToolError, match="Path not found"):
        await call(FindTool(), plain, pattern="*", path="missing")
    with pytest.raises(ToolError, match="Not a directory"):
        await call(FindTool(), plain, pattern="*", path="keep.log")


async def test_find_lists_an_ignored_directory_asked_for_by_name(repo: Path) -> None:
    assert text_of(await call(FindTool(), repo, pattern="*", path="build")) == "out.py"


def test_gitignore_matcher_rules() -> None:
    rules = parse_gitignore("# comment\n\n*.o\n!keep.o\n/root.txt\nlogs/\na/**/z\n\\#hash\n", "")
    assert is_ignored(rules, "x/y.o", is_dir=False)
    assert not is_ignored(rules, "x/keep.o", is_dir=False)
    assert is_ignored(rules, "root.txt", is_dir=False)
    assert not is_ignored(rules, "x/root.txt", is_dir=False)
    assert is_ignored(rules, "x/logs", is_dir=True)
    assert not is_ignored(rules, "x/logs", is_dir=False)
    assert is_ignored(rules, "a/z", is_dir=False) and is_ignored(rules, "a/b/c/z", is_dir=False)
    assert is_ignored(rules, "#hash", is_dir=False)
    nested = parse_gitignore("/only_here\n", "sub")
    assert is_ignored(nested, "sub/only_here", is_dir=False)
    assert not is_ignored(nested, "only_here", is_dir=False)
    assert PathGlob("[!a]?.py").matches("x/bc.py") and not PathGlob("[!a]?.py").matches("ab.py")


def test_walk_skips_git_and_node_modules(plain: Path) -> None:
    write_tree(plain, {".git/config": "", "lib/node_modules/x.js": "", "lib/ok.js": ""})
    files = walk_files(plain)
    assert "lib/ok.js" in files
    assert not [name for name in files if ".git/" in name or "node_modules" in name]


# --- grep -------------------------------------------------------------------------------------


async def test_grep_regex_matches_in_path_order(grep: GrepTool, plain: Path) -> None:
    result = await call(grep, plain, pattern=r"def \w+\(")
    assert text_of(result) == (
        "src/app.py:3:def main():\n"
        "src/util/helpers.py:1:def helper():\n"
        "tests/test_app.py:1:def test_main():"
    )
    assert result.details["engine"] == ("ripgrep" if grep.use_ripgrep else "python")
    assert result.details["matches"] == 3


async def test_grep_respects_gitignore_skips_binary_and_dependencies(
    grep: GrepTool, plain: Path, repo: Path
) -> None:
    expected = (
        ".hidden.py:1:secret = 'needle'\n"
        "docs/readme.md:1:# Needle docs\n"
        "keep.log:1:needle kept\n"
        "src/app.py:4:    return 'needle'\n"
        "src/util/data.json:1:{\"needle\": true}\n"
        "src/util/helpers.py:2:    # Needle in a haystack\n"
        "sub/top_only.txt:1:needle sub\n"
        "tests/test_app.py:2:    assert main() == 'needle'"
    )
    for root in (plain, repo):
        assert text_of(await call(grep, root, pattern="needle", ignoreCase=True)) == expected


async def test_grep_literal_and_case(grep: GrepTool, tmp_path: Path) -> None:
    write_tree(tmp_path, {"f.txt": "call a.b(x)\ncall axb(x)\nCALL A.B(X)\n"})
    literal = await call(grep, tmp_path, pattern="a.b(", literal=True)
    assert text_of(literal) == "f.txt:1:call a.b(x)"
    both = await call(grep, tmp_path, pattern="a.b(", literal=True, ignore_case=True)
    assert text_of(both) == "f.txt:1:call a.b(x)\nf.txt:3:CALL A.B(X)"
    regex = await call(grep, tmp_path, pattern=r"a.b\(")
    assert text_of(regex) == "f.txt:1:call a.b(x)\nf.txt:2:call axb(x)"


async def test_grep_glob_filters_files(grep: GrepTool, plain: Path) -> None:
    by_name = await call(grep, plain, pattern="needle", glob="*.json")
    assert text_of(by_name) == 'src/util/data.json:1:{"needle": true}'
    by_path = await call(grep, plain, pattern="needle", glob="src/*.py")
    assert text_of(by_path) == "src/app.py:4:    return 'needle'"
    # A glob does not bring back ignored files.
    by_ignored = await call(grep, plain, pattern="needle", glob="*.log")
    assert text_of(by_ignored) == "keep.log:1:needle kept"


async def test_grep_context_lines_and_separators(grep: GrepTool, tmp_path: Path) -> None:
    lines = [f"line {number}" for number in range(1, 11)]
    lines[1], lines[3], lines[8] = "hit A", "hit B", "hit C"
    write_tree(tmp_path, {"a.txt": "\n".join(lines) + "\n", "b.txt": "x\nhit D\n"})
    result = await call(grep, tmp_path, pattern="hit", context=1)
    assert text_of(result) == (
        "a.txt-1-line 1\n"
        "a.txt:2:hit A\n"
        "a.txt-3-line 3\n"
        "a.txt:4:hit B\n"
        "a.txt-5-line 5\n"
        "--\n"
        "a.txt-8-line 8\n"
        "a.txt:9:hit C\n"
        "a.txt-10-line 10\n"
        "--\n"
        "b.txt-1-x\n"
        "b.txt:2:hit D"
    )


async def test_grep_limit_keeps_the_last_match_context_and_says_so(
    grep: GrepTool, tmp_path: Path
) -> None:
    write_tree(tmp_path, {"a.txt": "m1\nc\nm2\nc\nm3\n", "b.txt": "m4\n"})
    result = await call(grep, tmp_path, pattern="^m", limit=2, context=1)
    assert text_of(result) == (
        "a.txt:1:m1\na.txt-2-c\na.txt:3:m2\na.txt-4-c\n\n"
        "[2 matches limit reached. Use limit=4 for more, or narrow the pattern, path or glob.]"
    )
    assert result.details["limitReached"] is True
    exact = await call(grep, tmp_path, pattern="^m", limit=4)
    assert exact.details["limitReached"] is False
    assert "limit reached" not in text_of(exact)


async def test_grep_no_match_invalid_regex_and_missing_path(grep: GrepTool, plain: Path) -> None:
    result = await call(grep, plain, pattern="no such text anywhere")
    assert (text_of(result), result.is_error) == ("No matches found", False)
    with pytest.raises(ToolError, match="Invalid regex pattern '\\('"):
        await call(grep, plain, pattern="(")
    with pytest.raises(ToolError, match="Path not found"):
        await call(grep, plain, pattern="x", path="missing")


async def test_grep_a_pattern_that_backtracks_for_ever_stalls_nothing(
    grep: GrepTool, tmp_path: Path
) -> None:
    """ripgrep's engine never backtracks: no match. Python's syntax is searched on the regex
    engine, which stops at SEARCH_SECONDS with an error (re would run 2**40 steps holding the
    whole server: tests/session/test_background_processes.py shows it serving meanwhile)."""
    write_tree(tmp_path, {"a.txt": "a" * 40 + "b\n"})
    if grep.use_ripgrep:
        assert text_of(await call(grep, tmp_path, pattern="^(a|a)*$")) == "No matches found"
        return
    with pytest.raises(ToolError) as refused:
        await call(grep, tmp_path, pattern="^(a|a)*$")
    assert str(refused.value) == (
        "The regex pattern '^(a|a)*$' took over 2 s on one search: it backtracks too much "
        "(nested repetition such as (a|a)* or (x+x+)+); give a simpler pattern")


async def test_grep_a_single_file_and_long_lines(grep: GrepTool, tmp_path: Path) -> None:
    write_tree(tmp_path, {"sub/long.txt": "short needle\n" + "needle " + "x" * 600 + "\n"})
    result = await call(grep, tmp_path, pattern="needle", path="sub/long.txt")
    first, second, _blank, notice = text_of(result).split("\n")
    assert first == "long.txt:1:short needle"
    assert second == "long.txt:2:" + ("needle " + "x" * 600)[:500] + "…"
    assert notice.startswith("[Lines longer than 500 characters were cut")


async def test_grep_output_is_cut_at_the_line_limit(grep: GrepTool, tmp_path: Path) -> None:
    write_tree(tmp_path, {"many.txt": "hit\n" * 2500})
    result = await call(grep, tmp_path, pattern="hit", limit=3000)
    lines = text_of(result).split("\n")
    assert lines[1999] == "many.txt:2000:hit"
    assert lines[-1].startswith("[Output truncated to its first 2000 lines")
    assert result.details["truncated"] is True


def _engine_cases() -> list[dict[str, Any]]:
    return [
        {"pattern": "needle"},
        {"pattern": "NEEDLE", "ignoreCase": True, "context": 2},
        {"pattern": r"^\s+\w+", "context": 1},
        {"pattern": "def", "glob": "**/*.py", "context": 3},
        {"pattern": "(", "literal": True},
        {"pattern": "e", "limit": 5, "context": 1},
        {"pattern": "needle", "path": "src"},
        {"pattern": "x{3}", "path": "long/f.txt"},
    ]


@needs_rg
async def test_grep_engines_give_identical_output(repo: Path, plain: Path) -> None:
    extra: dict[str, str | bytes] = {
        "long/f.txt": "a\r\nxxx " + "y" * 700 + "\nb\n",
        "bom.txt": "\ufeffneedle with bom\n",
        "latin1.txt": b"caf\xe9 needle\n",
        "A/b.txt": "needle A\n",
        "a.txt": "needle a\n",
    }
    python, ripgrep = GrepTool(use_ripgrep=False), GrepTool()
    assert ripgrep.ripgrep_path() is not None and python.ripgrep_path() is None
    for root in (write_tree(repo, extra), write_tree(plain, extra)):
        for args in _engine_cases():
            expected = await call(python, root, **args)
            actual = await call(ripgrep, root, **args)
            assert text_of(actual) == text_of(expected), args
            assert actual.details["engine"] == "ripgrep"
            assert expected.details["engine"] == "python"


# --- shared -----------------------------------------------------------------------------------


def test_schemas_use_camel_case_and_describe_every_field() -> None:
    grep_schema = GrepTool().parameters_schema()
    assert "ignoreCase" in grep_schema["properties"]
    for tool in (GrepTool(), FindTool(), LsTool()):
        properties = tool.parameters_schema()["properties"]
        assert all(spec.get("description") for spec in properties.values()), tool.name


def test_default_tools_include_the_search_tools() -> None:
    names = [tool.name for tool in default_tools()]
    assert {"grep", "find", "ls"} <= set(names)


async def test_a_cancelled_subprocess_is_killed(tmp_path: Path) -> None:
    pid = 0
    with anyio.CancelScope() as scope:  # cancelled once the process runs, not after a guess
        async with spawned(["sleep", "30"], tmp_path) as process:
            pid = process.pid
            scope.cancel()
            await process.wait()
    assert pid and scope.cancelled_caught
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
