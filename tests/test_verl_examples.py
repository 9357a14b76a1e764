"""Run shardcheck over every launch script in a verl checkout's examples folder.

Set VERL_CHECKOUT to a verl checkout directory (one with an ``examples`` folder) to enable; the test
is skipped otherwise.  It asserts only robustness: ``check()`` never raises (input problems come back
as ``r.error``) and every ``r.error`` is one line.  It prints a summary of what was read.
"""

from __future__ import annotations

import os
from collections import Counter
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


def test_check_every_example_script():
    from shardcheck.api import check

    scripts = _scripts()
    raised: list[str] = []
    multiline: list[str] = []
    counts = Counter()
    rules = Counter()
    for path in scripts:
        shown = str(path.relative_to(EXAMPLES.parent))
        counts["total"] += 1
        try:
            r = check(path, env={}, display=shown)
        except Exception as exc:  # noqa: BLE001 -- check() must never raise; any exception is the finding
            raised.append(f"{shown}: {type(exc).__name__}: {exc}")
            continue
        if r.error is not None:
            if "\n" in r.error or "\r" in r.error:
                multiline.append(f"{shown}: {r.error!r}")
            if "no recognised launch command" in r.error:
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
