"""Golden outputs of `shardcheck check` for the three shared 256K cases, in text and JSON.

The expected files are under tests/data/golden/; after a deliberate change of the report, regenerate them
with `SHARDCHECK_UPDATE_GOLDEN=1 pytest tests/test_golden.py` and review the diff.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from shardcheck.cli import main

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "golden"
CASES = ["qwen3_235b_256k_before", "qwen3_235b_256k_after", "qwen3_235b_256k_etp_unset"]

if importlib.util.find_spec("verl") is not None:  # an installed verl changes the defaults' source text
    pytest.skip(
        "an installed verl replaces the bundled defaults the golden files were made with", allow_module_level=True
    )


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("case", CASES)
def test_golden(case, fmt, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # paths in the output are relative, as a user in the repository types them
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    code = main(["check", "--format", fmt, f"tests/data/cases/{case}.sh"])
    out = capsys.readouterr().out
    expected = GOLDEN / f"{case}.{'txt' if fmt == 'text' else 'json'}"
    if os.environ.get("SHARDCHECK_UPDATE_GOLDEN") == "1":
        expected.write_text(out)
    assert out == expected.read_text(), f"{expected.name} differs; see the module docstring to regenerate"
    assert code == 1  # each case has an error (the before/after scripts carry an unknown verl key)
