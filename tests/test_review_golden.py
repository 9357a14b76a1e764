"""Golden files of every review format on the shared 256K cases (tests/data/golden/).

The outputs are compared byte for byte. When a change is meant to alter them (a new rule, a corrected
figure), regenerate and review the diff of the golden files:

    SHARDCHECK_UPDATE_GOLDEN=1 pytest tests/test_review_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shardcheck.cli import main

CASES = Path(__file__).parent / "data" / "cases"
GOLDEN = Path(__file__).parent / "data" / "golden"
PAIR = ["qwen3_235b_256k_before.sh", "qwen3_235b_256k_after.sh"]
RUNS = {
    "check.sarif": ["check", "--format", "sarif", "qwen3_235b_256k_after.sh", "qwen3_235b_256k_etp_unset.sh"],
    "check.github": ["check", "--format", "github", "qwen3_235b_256k_after.sh", "qwen3_235b_256k_etp_unset.sh"],
    "check.junit.xml": ["check", "--format", "junit", "qwen3_235b_256k_after.sh", "qwen3_235b_256k_etp_unset.sh"],
    "diff.txt": ["diff", *PAIR],
    "diff.json": ["diff", "--format", "json", *PAIR],
    "diff.md": ["diff", "--format", "markdown", *PAIR],
    "diff.sarif": ["diff", "--format", "sarif", *PAIR],
    "diff.github": ["diff", "--format", "github", *PAIR],
    "diff.junit.xml": ["diff", "--format", "junit", *PAIR],
    "diff.html": ["diff", "--format", "html", *PAIR],
}


def render(argv: list[str], capsys, monkeypatch) -> str:
    monkeypatch.chdir(CASES)
    monkeypatch.delenv("SHARDCHECK_DOCS_URL", raising=False)
    main(argv)
    return capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(RUNS))
def test_golden(name, capsys, monkeypatch):
    out = render(RUNS[name], capsys, monkeypatch)
    target = GOLDEN / name
    if os.environ.get("SHARDCHECK_UPDATE_GOLDEN"):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(out, encoding="utf-8")
    assert target.exists(), f"no golden file {target}; run SHARDCHECK_UPDATE_GOLDEN=1 pytest {__file__}"
    assert out == target.read_text(encoding="utf-8"), (
        f"{name} differs from {target}; if the change is meant, regenerate with "
        f"SHARDCHECK_UPDATE_GOLDEN=1 pytest tests/test_review_golden.py and review the diff"
    )
