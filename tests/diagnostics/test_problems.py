"""Which diagnostics an edit introduced (tiller.diagnostics.problems): problems are matched by
severity, message, source and code, at their place shifted by the edit's diff, else the nearest
of their kind; the report lists errors first, at most ten, and counts the rest."""

from __future__ import annotations

from tiller.diagnostics.problems import Diagnostic, line_map, new_problems, report
from tiller.tools.files import unified_diff


def problem(line: int, message: str = "undefined name 'y'", severity: str = "error",
            source: str | None = "ruff", code: str | None = "F821") -> Diagnostic:
    return Diagnostic(line=line, message=message, severity=severity,  # type: ignore[arg-type]
                      source=source, code=code)


def test_a_problem_moved_by_the_edit_is_not_new() -> None:
    old = "a\nb\nc\nd\n"
    new = "a\nx\nx\nb\nc\nd\n"
    moved = line_map(unified_diff(old, new, "f.py"))
    assert [moved(n) for n in (1, 2, 3, 4)] == [1, 4, 5, 6]
    assert new_problems([problem(3)], [problem(2), problem(5)], moved) == [problem(2)]


def test_the_line_map_follows_every_hunk_and_drops_removed_lines() -> None:
    lines = [f"{n}\n" for n in range(1, 31)]
    old = "".join(lines)
    new = "".join(lines[:2] + lines[3:20] + ["new\n", "new\n"] + lines[20:])
    moved = line_map(unified_diff(old, new, "f.py"))
    assert moved(2) == 2 and moved(3) is None and moved(4) == 3
    assert moved(20) == 19 and moved(21) == 22 and moved(30) == 31
    assert line_map(None)(7) == 7
    assert line_map(unified_diff("", "x\n", "f.py"))(1) == 2  # all below moves down


def test_without_a_diff_the_nearest_problem_of_a_kind_pairs_first() -> None:
    before = [problem(10), problem(50)]
    after = [problem(10), problem(30), problem(52)]
    assert new_problems(before, after) == [problem(30)]


def test_another_kind_is_new_wherever_it_is() -> None:
    before = [problem(1, "old", code="X1")]
    after = [problem(1, "old", code="X1"), problem(1, "old", code="X2"),
             problem(1, "old", severity="warning", code="X1"),
             problem(1, "old", source="mypy", code="X1")]
    assert new_problems(before, after) == after[1:]


def test_information_and_hints_are_never_new() -> None:
    after = [problem(1, severity="information"), problem(2, severity="hint")]
    assert new_problems([], after) == []


def test_a_removed_line_s_problem_still_pairs_with_one_of_its_kind() -> None:
    old = "a\ny\nc\n"
    new = "a\ny2\nc\n"
    moved = line_map(unified_diff(old, new, "f.py"))
    assert new_problems([problem(2)], [problem(2)], moved) == []


def test_the_report_lists_errors_first_and_counts_the_rest() -> None:
    problems = [problem(n, f"warn {n}", severity="warning", code=None) for n in range(1, 8)]
    problems += [problem(n, f"err {n}\n  more", source=None, code=None) for n in range(1, 6)]
    text = report([("pkg/a.py", problems)], "the editor's diagnostics")
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == ("New problems after this change (the editor's diagnostics; they were "
                        "not there before it): 5 errors, 7 warnings.")
    assert lines[1] == "pkg/a.py:1: error: err 1 more"
    assert lines[6] == "pkg/a.py:1: warning: warn 1 [ruff]"
    assert lines[-1] == "… and 2 more (2 warnings)."
    assert len(lines) == 12
    assert report([("a.py", [])], "x") is None


def test_a_long_message_is_cut() -> None:
    text = report([("a.py", [problem(3, "m" * 1000)])], "x")
    assert text is not None and text.splitlines()[1].endswith("m… [ruff F821]")
    assert len(text.splitlines()[1]) < 340
