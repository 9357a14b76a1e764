"""Run shardcheck over every launch script in a verl checkout's examples folder.

Set VERL_CHECKOUT to a verl checkout directory (one with an ``examples`` folder) to enable; the test
is skipped otherwise.  It asserts only robustness: ``check()`` never raises (input problems come back
as ``r.error``) and every ``r.error`` is one line.  It prints a summary of what was read.
"""

from __future__ import annotations

import os
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

CHECKOUT = os.environ.get("VERL_CHECKOUT")
if not CHECKOUT:
    pytest.skip("VERL_CHECKOUT is not set (a verl checkout directory)", allow_module_level=True)

EXAMPLES = Path(CHECKOUT) / "examples"


def _scripts() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*.sh") if p.is_file())


def test_examples_folder_exists():
    assert EXAMPLES.is_dir(), f"{EXAMPLES} is not a directory"
    assert _scripts(), f"no .sh files under {EXAMPLES}"


@lru_cache(maxsize=1)
def _results() -> tuple[list[tuple[str, object]], list[str]]:
    """(shown path, Result) for every script check() returned on, and the scripts it raised on."""
    from shardcheck.api import check

    results, raised = [], []
    for path in _scripts():
        shown = str(path.relative_to(EXAMPLES.parent))
        try:
            results.append((shown, check(path, env={}, display=shown)))
        except Exception as exc:  # noqa: BLE001 -- check() must never raise; any exception is the finding
            raised.append(f"{shown}: {type(exc).__name__}: {exc}")
    return results, raised


def test_check_every_example_script():
    results, raised = _results()
    multiline: list[str] = []
    counts = Counter()
    rules = Counter()
    counts["total"] = len(results) + len(raised)
    for shown, r in results:
        if r.error is not None:
            if "\n" in r.error or "\r" in r.error:
                multiline.append(f"{shown}: {r.error!r}")
            if r.status == "skipped":
                counts["no_launch"] += 1
            else:
                counts["other_error"] += 1
            continue
        counts["read_fully"] += 1
        if any(f.severity == "error" for f in r.findings):
            counts["with_error_findings"] += 1
        if any(f.rule == "VALUE-UNKNOWN" for f in r.findings):
            counts["with_value_unknown"] += 1
        for f in r.findings:
            rules[(f.severity, f.rule)] += 1

    print()
    print(f"verl examples under {EXAMPLES}")
    print(f"  scripts total:                 {counts['total']}")
    print(f"  read fully (no r.error):       {counts['read_fully']}")
    print(f"  no verl launch (r.error):      {counts['no_launch']}")
    print(f"  other r.error:                 {counts['other_error']}")
    print(f"  with error-severity findings:  {counts['with_error_findings']}")
    print(f"  with VALUE-UNKNOWN findings:   {counts['with_value_unknown']}")
    print(f"  check() raised:                {len(raised)}")
    for (severity, rule), n in sorted(rules.items()):
        print(f"    {severity:8} {rule:28} {n}")

    assert not raised, "check() raised on:\n" + "\n".join(raised)
    assert not multiline, "r.error spans several lines on:\n" + "\n".join(multiline)


def test_every_fsdp_example_reads():
    """Every example whose actor runs under FSDP/FSDP2 resolves to FSDP layouts with known sizes or
    reported unknowns, and its findings name a line; prints the counts by strategy and by rule."""
    results, raised = _results()
    assert not raised, "check() raised on:\n" + "\n".join(raised)
    strategies, rules = Counter(), Counter()
    fsdp = []
    for shown, r in results:
        if r.error is not None:
            continue
        s = r.job.strategy
        strategies[s.value if s.known else "unknown"] += 1
        if r.job.fsdp_layouts:
            fsdp.append((shown, r))
    for shown, r in fsdp:
        actor = r.job.fsdp_layout("actor")
        assert actor is not None and actor.strategy.value in ("fsdp", "fsdp2"), shown
        assert r.layout_summary()["strategy"] == actor.strategy.value, shown
        for f in r.findings:
            rules[(f.severity, f.rule)] += 1
    print()
    print(
        f"verl examples: {len(results)} checked, {sum(strategies.values())} read fully, strategies "
        f"{dict(strategies)}, FSDP jobs {len(fsdp)}"
    )
    for (severity, rule), n in sorted(rules.items()):
        print(f"    {severity:8} {rule:28} {n}")
    assert fsdp, "no FSDP example was read"


def test_fast_paths_change_nothing_on_the_examples(monkeypatch):
    """Every example judged with the plain override and config fast paths gives the same findings, layout
    and verdict as with Hydra's parser and OmegaConf throughout."""
    from shardcheck.api import check
    from shardcheck.frameworks.verl import config_tree
    from shardcheck.inputs import hydra_fast
    from shardcheck.report.json_report import result_to_dict

    fast = {shown: result_to_dict(r) for shown, r in _results()[0]}
    monkeypatch.setattr(hydra_fast, "fast_override", lambda text: None)
    monkeypatch.setattr(config_tree, "_apply_plain", lambda defaults, overrides: None)
    for path in _scripts():
        shown = str(path.relative_to(EXAMPLES.parent))
        assert result_to_dict(check(path, env={}, display=shown)) == fast[shown], shown
