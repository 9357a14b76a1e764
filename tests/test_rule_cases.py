"""Every rule's case file (src/shardcheck/rules/cases/<ID>.yml, sqlfluff style): the bad case reports exactly the
findings written there (line, message, fix), the good case none of that rule and no error at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from shardcheck.api import check
from shardcheck.rules.examples import INFERRED, LAUNCHES, Case, faulted, rule_cases
from shardcheck.rules.registry import all_rules, run_rules

CASES = rule_cases()


def run_case(case: Case, tmp_path: Path):
    """(the findings of the case's rule, the whole result's validity) for one case."""
    if case.launch == "sizes":
        findings, _ = run_rules(case.job())
        errors = [f for f in findings if f.severity == "error" or f.rule == "VALUE-UNKNOWN"]
        return [f for f in findings if f.rule == case.rule], not errors
    model_dir = None
    if case.model_config is not None:
        model_dir = tmp_path / "yarn-short"
        model_dir.mkdir(exist_ok=True)
        (model_dir / "config.json").write_text(json.dumps(case.model_config))
    path = tmp_path / "run.sh"
    text = case.text(model_dir)
    if text is not None:
        path.write_text(text)
    pinned = os.environ.pop("SHARDCHECK_VERL_VERSION", None) if case.verl_version == INFERRED else None
    try:
        with faulted(case.fault):
            result = check(
                path,
                case.env,
                device=case.device,
                host_memory=case.host_memory,
                verl_version=None if case.verl_version == INFERRED else case.verl_version,
                megatron_core_version=case.megatron_core_version,
            )
    finally:
        if pinned is not None:
            os.environ["SHARDCHECK_VERL_VERSION"] = pinned
    return [f for f in result.findings if f.rule == case.rule], result.valid


def test_every_rule_has_a_case_file():
    assert set(CASES) == set(all_rules())


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_bad_case_reports_exactly(tmp_path, rule_id):
    bad = CASES[rule_id][0]
    found, _ = run_case(bad, tmp_path)
    got = [
        (f.line, f.message.replace(str(tmp_path), "{tmp}"), f.fix.replace(str(tmp_path), "{tmp}") if f.fix else None)
        for f in found
    ]
    assert got == [(e.line, e.message, e.fix) for e in bad.expect]
    for f in found:
        assert f.severity == all_rules()[rule_id].severity
        if bad.launch in LAUNCHES:
            assert f.line is not None, f"{rule_id} finding has no line: {f}"
        elif bad.launch != "sizes":
            assert f.path is not None, f"{rule_id} finding names no file: {f}"


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_good_case_is_silent(tmp_path, rule_id):
    good = CASES[rule_id][1]
    found, valid = run_case(good, tmp_path)
    assert not found, [(f.rule, f.message) for f in found]
    if good.launch not in ("missing", "script"):
        assert valid is True, rule_id  # the good side of a layout rule is a whole valid launch, not just silent
