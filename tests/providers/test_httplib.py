"""``httplib.load`` imports httpx2 and httpcore2 without ``importlib.metadata``, and they know
their versions as the real module would tell them; while the stand-in is in place, anyone else
asking ``importlib.metadata`` anything gets the real answer. Each case runs in a fresh
interpreter: this one imported ``importlib.metadata`` long ago."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tiller.providers.httplib import dist_info_version


def run_fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.process
def test_load_imports_the_http_library_without_importlib_metadata_and_with_its_versions() -> None:
    out = run_fresh("""
        import sys, importlib
        from tiller.providers import httplib
        httplib.load()
        assert "httpx2" in sys.modules and "httpcore2" in sys.modules
        assert "importlib.metadata" not in sys.modules, "importlib.metadata was imported"
        assert not hasattr(importlib, "metadata"), "the stand-in was left on importlib"
        import httpx2, httpcore2
        got = (httpx2.__version__, httpcore2.__version__)
        import importlib.metadata as real
        assert real.__doc__ != "Tiller's stand-in (tiller.providers.httplib).", real.__doc__
        assert got == (real.version("httpx2"), real.version("httpcore2")), got
        httplib.load()  # again: nothing to do
        print(got[0])
    """)
    assert out.strip().count(".") >= 1


@pytest.mark.process
def test_anything_else_asked_of_the_stand_in_comes_from_the_real_module() -> None:
    run_fresh("""
        import sys
        from tiller.providers import httplib
        with httplib._metadata_stand_in():
            import importlib.metadata
            from importlib.metadata import version
            stand_in = sys.modules["importlib.metadata"]
            assert version("pydantic") == stand_in.version("pydantic")
            try:
                version("no-such-distribution-here")
            except Exception as error:
                assert type(error).__name__ == "PackageNotFoundError", repr(error)
            else:
                raise AssertionError("a missing distribution has a version")
            # the real module was loaded to answer: from now on it is the one imported
            real = sys.modules["importlib.metadata"]
            assert real is not stand_in and hasattr(real, "distributions")
            from importlib.metadata import packages_distributions
            assert stand_in.packages_distributions is packages_distributions
        assert sys.modules["importlib.metadata"] is real
        assert importlib.metadata is real
    """)


@pytest.mark.process
def test_the_stand_in_answers_the_import_system_as_a_plain_module_would() -> None:
    run_fresh("""
        import sys
        from tiller.providers import httplib
        with httplib._metadata_stand_in():
            from importlib.metadata import version  # asks for __path__: must not load the real
            import importlib.metadata
            assert importlib.metadata is sys.modules["importlib.metadata"]
            assert importlib.metadata.__doc__.startswith("Tiller's stand-in")
        assert "importlib.metadata" not in sys.modules
    """)


def write_dist(entry: Path, folder: str, version: str) -> None:
    (entry / folder).mkdir(parents=True)
    (entry / folder / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: x\nVersion: {version}\n\nVersion: not this one\n")


def test_a_version_is_read_from_the_first_dist_info_on_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_dist(first, "Foo_Bar-1.2.3.dist-info", "1.2.3")
    write_dist(second, "foo_bar-9.0.dist-info", "9.0")
    write_dist(second, "other-2.0.dist-info", "2.0")
    (first / "broken-1.0.dist-info").mkdir()  # no METADATA
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(first), str(second)])
    assert dist_info_version("foo.bar") == "1.2.3"
    assert dist_info_version("FOO-bar") == "1.2.3"
    assert dist_info_version("other") == "2.0"
    assert dist_info_version("broken") is None
    assert dist_info_version("absent") is None
