"""The ecosystem check (issue 26, item 2): real launch scripts of public repositories, judged as a snapshot.

``tests/data/ecosystem/manifest.json`` names the repositories, their commits, the launch scripts and the pins;
the scripts are other people's code and are not committed: ``python tools/ecosystem_corpus.py materialize --from
MIRRORS`` (bare git directories) or ``--from-github`` writes them into ``tests/data/ecosystem/repos``. The
snapshot test judges every script there and compares every error and warning finding (file, line, rule,
severity) with ``tests/data/ecosystem/snapshot.json``. A change that moves a finding fails it; when the change is
meant, ``python tools/ecosystem_corpus.py snapshot`` rewrites the snapshot and the diff shows its effect on real
scripts (and ``classification.json`` needs the new error findings classified).

Without the materialized corpus only the manifest and classification checks run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import ecosystem_corpus as ec  # noqa: E402

sys.path.remove(str(ROOT / "tools"))

CLASSIFICATION = ec.DATA / "classification.json"
CPU_BUDGET_S = 180  # of one CPU, for the whole corpus (issue 26: CI's time)
CLASSES = {"real", "version", "false alarm"}


def _snapshot() -> dict[str, list]:
    return json.loads(ec.SNAPSHOT.read_text())


def _errors(snapshot: dict[str, list]) -> set[tuple]:
    return {(f, line, rule) for rows in snapshot.values() for f, line, rule, severity in rows if severity == "error"}


def test_the_corpus_is_large_and_wide():
    manifest = ec.load_manifest()
    with_scripts = [e for e in manifest["repositories"] if e["scripts"]]
    assert len(with_scripts) >= 30
    assert sum(len(e["scripts"]) for e in with_scripts) >= 1000
    for entry in with_scripts:
        assert len(entry["commit"]) == 40 and "/" in entry["repo"]
        assert all(len(s["sha256"]) == 64 for s in entry["scripts"])


def test_every_error_of_the_snapshot_is_classified_with_its_proof():
    """Each error finding of the snapshot has one hand classification (real / version / false alarm) with the
    source line that proves it; a classification whose finding left the snapshot is stale."""
    classified = json.loads(CLASSIFICATION.read_text())["findings"]
    keys = {(c["file"], c["line"], c["rule"]) for c in classified}
    assert len(keys) == len(classified), "a finding is classified twice"
    for c in classified:
        assert c["class"] in CLASSES and c["proof"].strip(), c
    errors = _errors(_snapshot())
    assert sorted(errors - keys)[:10] == [], "error findings without a classification"
    assert sorted(keys - errors)[:10] == [], "classifications of findings no longer in the snapshot"


@pytest.mark.skipif(
    not ec.corpus_dir().is_dir(),
    reason="the ecosystem corpus is not materialized: python tools/ecosystem_corpus.py materialize --from MIRRORS",
)
def test_the_findings_on_the_corpus_are_the_snapshot(monkeypatch):
    monkeypatch.delenv("SHARDCHECK_VERL_VERSION", raising=False)  # judged as a user's run judges them
    results, cpu = ec.run_corpus()
    expected = _snapshot()
    assert cpu <= CPU_BUDGET_S, f"the corpus took {cpu:.0f} s of CPU (budget {CPU_BUDGET_S} s)"
    moved = []
    for shown in sorted(set(results) | set(expected)):
        now = {tuple(r) for r in results.get(shown, [])}
        then = {tuple(r) for r in expected.get(shown, [])}
        moved += [f"+ {r}" for r in sorted(now - then)] + [f"- {r}" for r in sorted(then - now)]
    assert not moved, (
        f"{len(moved)} findings moved on the ecosystem corpus (review them; if meant: python "
        "tools/ecosystem_corpus.py snapshot):\n" + "\n".join(moved[:40])
    )
