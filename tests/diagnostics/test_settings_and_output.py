"""The ``[diagnostics]`` section as the config file gives it, and the output formats a command's
report is read in (tiller.diagnostics.settings, tiller.diagnostics.commands.parse_output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiller.config import load_config
from tiller.diagnostics.commands import parse_output
from tiller.diagnostics.problems import Diagnostic
from tiller.errors import ConfigError


def load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(["--config", str(path)], {"HOME": str(tmp_path)}).diagnostics


def test_the_section_keeps_its_globs_in_order_and_its_timeouts(tmp_path: Path) -> None:
    settings = load(tmp_path, '[diagnostics]\n"*.py" = "ruff check {path}"\ntimeout = 4\n'
                              '"src/**/*.ts" = "tsc --noEmit"\neditor_timeout = 1.5\n')
    assert settings.commands == (("*.py", "ruff check {path}"),  # type: ignore[attr-defined]
                                 ("src/**/*.ts", "tsc --noEmit"))
    assert (settings.timeout, settings.editor_timeout) == (4.0, 1.5)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("text", "error"), [
    ('[diagnostics]\n"*.py" = 3\n', "'*.py' must be a command line (a string), not 3"),
    ('[diagnostics]\n"*.py" = " "\n', "'*.py' must be a command line"),
    ("[diagnostics]\ntimeout = 0\n", "timeout must be a positive number of seconds, not 0"),
    ('[diagnostics]\neditor_timeout = "3"\n', "editor_timeout must be a positive number"),
    ('diagnostics = "ruff"\n', "diagnostics must be a table"),
])
def test_a_bad_section_names_the_file_and_the_key(tmp_path: Path, text: str, error: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, text)
    assert str(tmp_path / "config.toml") in str(raised.value) and error in str(raised.value)


def test_ruff_s_json_keeps_the_file_s_problems(tmp_path: Path) -> None:
    target = tmp_path / "a.py"
    items = [
        {"filename": str(target), "location": {"row": 2, "column": 5}, "message": "Undefined",
         "code": "F821", "severity": "error"},
        {"filename": str(tmp_path / "b.py"), "location": {"row": 1, "column": 1},
         "message": "other file", "code": "F401"},
        {"filename": str(target), "location": {"row": 1, "column": 1},
         "message": "Expected an expression", "code": None},
    ]
    assert parse_output(json.dumps(items), "", target, tmp_path, "ruff") == [
        Diagnostic(2, "Undefined", "error", 5, "ruff", "F821"),
        Diagnostic(1, "Expected an expression", "error", 1, "ruff", None),
    ]


def test_lines_in_three_shapes_with_severity_words(tmp_path: Path) -> None:
    target = tmp_path / "src" / "a.ts"
    stdout = ("src/a.ts(3,7): error TS2304: Cannot find name 'y'.\n"
              "src/a.ts:4: warning: unused\n"
              f"{target}:5:2: note: see here\n"
              "src/b.ts:1:1: error: elsewhere\n"
              "Found 3 errors.\n")
    stderr = "src/a.ts:9:1: E302 expected 2 blank lines\n"
    assert parse_output(stdout, stderr, target, tmp_path, "tsc") == [
        Diagnostic(3, "TS2304: Cannot find name 'y'.", "error", 7, "tsc"),
        Diagnostic(4, "unused", "warning", None, "tsc"),
        Diagnostic(5, "see here", "information", 2, "tsc"),
        Diagnostic(9, "E302 expected 2 blank lines", "error", 1, "tsc"),
    ]


def test_json_that_is_not_ruff_s_is_read_as_lines(tmp_path: Path) -> None:
    target = tmp_path / "a.py"
    assert parse_output('["a.py:1: error: x"]', "a.py:2: error: y", target, tmp_path) == [
        Diagnostic(2, "y", "error", None, None)]
