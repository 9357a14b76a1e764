"""The CI formats: SARIF 2.1.0 against the official schema, GitHub workflow commands, JUnit XML."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from shardcheck.cli import main
from shardcheck.report.findings_source import Item
from shardcheck.report.github import render_github

CASES = Path(__file__).parent / "data" / "cases"
SCHEMA = Path(__file__).parent / "data" / "sarif" / "sarif-schema-2.1.0.json"
PAIR = [str(CASES / "qwen3_235b_256k_before.sh"), str(CASES / "qwen3_235b_256k_after.sh")]


def _validator():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    if "uri" not in jsonschema.Draft4Validator.FORMAT_CHECKER.checkers:
        pytest.skip("jsonschema cannot check the 'uri' format without rfc3986-validator (the test extra has it)")
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


def _run(argv, capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


def test_sarif_of_check_is_valid_and_complete(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("SHARDCHECK_DOCS_URL", "https://example.org/shardcheck/blob/main/docs/rules")
    helper = tmp_path / "helper.sh"
    helper.write_text("echo hello\n")  # no launch: skipped, as check skips it
    missing = tmp_path / "missing.sh"
    code, out = _run(
        ["check", "--format", "sarif", *PAIR, str(CASES / "qwen3_235b_256k_etp_unset.sh"), str(helper), str(missing)],
        capsys,
    )
    assert code == 1  # the exit status is the check's, whatever the format
    log = json.loads(out)
    errors = sorted(_validator().iter_errors(log), key=str)
    assert not errors, "\n".join(e.message for e in errors[:5])
    run = log["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    fold = rules["MCORE-PS-EXPERT-FOLD"]
    assert fold["helpUri"] == "https://example.org/shardcheck/blob/main/docs/rules/MCORE-PS-EXPERT-FOLD.md"
    docs = Path(__file__).resolve().parents[1] / "docs" / "rules" / "MCORE-PS-EXPERT-FOLD.md"
    assert fold["help"]["markdown"] == docs.read_text()  # the explain text, as docs/rules/ holds it
    results = run["results"]
    etp = next(r for r in results if r["ruleId"] == "MCORE-PS-EXPERT-FOLD")
    region = etp["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 26 and region["snippet"]["text"] == "train_ep=16"
    assert etp["level"] == "error" and "expert_tensor_parallel_size=1" in etp["properties"]["fix"]
    assert etp["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("qwen3_235b_256k_etp_unset.sh")
    assert run["tool"]["driver"]["rules"][etp["ruleIndex"]]["id"] == "MCORE-PS-EXPERT-FOLD"
    locality = next(r for r in results if r["ruleId"] == "MCORE-PS-LOCALITY")
    assert locality["level"] == "warning"
    # the missing file: its INPUT-UNREADABLE result, and the run did not fully succeed; the helper: nothing
    unreadable = [r for r in results if r["ruleId"] == "INPUT-UNREADABLE"]
    assert len(unreadable) == 1 and unreadable[0]["level"] == "error"
    assert unreadable[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("missing.sh")
    assert run["invocations"][0]["executionSuccessful"] is False
    assert not any("helper.sh" in r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results)


def test_sarif_of_diff_marks_new_and_unchanged(capsys):
    code, out = _run(
        [
            "diff",
            "--format",
            "sarif",
            str(CASES / "qwen3_235b_256k_after.sh"),
            str(CASES / "qwen3_235b_256k_etp_unset.sh"),
        ],
        capsys,
    )
    assert code == 1
    log = json.loads(out)
    assert not list(_validator().iter_errors(log))
    states = {r["ruleId"]: r["baselineState"] for r in log["runs"][0]["results"]}
    assert states["MCORE-PS-EXPERT-FOLD"] == "new" and states["VERL-CFG-UNKNOWN-KEY"] == "unchanged"


def test_sarif_validation_can_fail():
    """The schema check is not vacuous: a log without a tool, or with a bad level, is rejected."""
    v = _validator()
    assert list(v.iter_errors({"version": "2.1.0", "runs": [{"results": []}]}))
    bad_level = {
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"message": {"text": "m"}, "level": "fatal"}]}],
    }
    assert list(v.iter_errors(bad_level))
    relative_help = {
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "x", "rules": [{"id": "R", "helpUri": "docs/rules/R.md"}]}}}],
    }
    assert list(v.iter_errors(relative_help))  # helpUri must be absolute: hence SHARDCHECK_DOCS_URL


def test_github_commands(capsys):
    code, out = _run(["check", "--format", "github", str(CASES / "qwen3_235b_256k_etp_unset.sh")], capsys)
    assert code == 1
    lines = out.splitlines()
    assert any(
        line.startswith(f"::error file={CASES}/qwen3_235b_256k_etp_unset.sh,line=26,title=MCORE-PS-EXPERT-FOLD::")
        for line in lines
    ), lines
    assert any(line.startswith("::warning ") for line in lines)
    assert all(line.startswith("::") and "\n" not in line for line in lines)


def test_github_escaping():
    it = Item("a,b.sh", "R-1", "info", "50% done\nnext: line", "dir:x/a,b.sh", 3, fix="do\r\nthis")
    [line] = render_github([it]).splitlines()
    # a value's own newline is text (``\\n``); only the line between the message and its fix is the annotation's
    assert line == ("::notice file=dir%3Ax/a%2Cb.sh,line=3,title=R-1::50%25 done\\nnext: line%0Afix: do\\r\\nthis")


def test_junit(capsys, tmp_path):
    bad = tmp_path / "missing.sh"
    code, out = _run(
        [
            "check",
            "--format",
            "junit",
            str(CASES / "qwen3_235b_256k_etp_unset.sh"),
            str(bad),
            str(CASES / "qwen3_235b_256k_before.sh"),
        ],
        capsys,
    )
    assert code == 1
    root = ET.fromstring(out.split("\n", 1)[1])
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    failure = cases[str(CASES / "qwen3_235b_256k_etp_unset.sh")].find("failure")
    assert "MCORE-PS-EXPERT-FOLD" in failure.get("message") and "fix:" in failure.text
    assert cases[str(bad)].find("error") is not None
    assert "MCORE-PS-LOCALITY" in cases[str(CASES / "qwen3_235b_256k_before.sh")].find("system-out").text


def test_diff_junit_and_github_carry_the_summary(capsys):
    code, out = _run(["diff", "--format", "junit", *PAIR], capsys)
    assert code == 1
    root = ET.fromstring(out.split("\n", 1)[1])
    [case] = root.iter("testcase")
    assert case.find("failure") is not None  # the after side still has the grad_offload error
    assert "EP groups now stay inside a node" in case.find("system-out").text
    _code, out = _run(["diff", "--format", "github", *PAIR], capsys)
    assert out.splitlines()[-1].endswith("findings: 0 new, 1 resolved, 1 kept")
