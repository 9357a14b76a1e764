"""`ruff check` over the sources and tests, so that the README's `pytest` covers lint too (rules: pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    try:
        import ruff  # noqa: F401  (the `test` extra installs it)

        return [sys.executable, "-m", "ruff"]
    except ImportError:
        found = shutil.which("ruff")
        if found is None:
            pytest.skip("ruff is not installed (pip install -e '.[test]')")
        return [found]


def test_ruff_check_passes():
    run = subprocess.run(
        [*_ruff(), "check", "--no-cache", "src", "tests", "bench", "tools"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_ruff_format_is_clean():
    """The tree is as `ruff format` writes it (run `ruff format src tests bench tools` before committing)."""
    run = subprocess.run(
        [*_ruff(), "format", "--check", "--no-cache", "src", "tests", "bench", "tools"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
