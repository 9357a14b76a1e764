"""The GitHub Action (action.yml): its logic, tools/github_action.py, run locally on a fixture repository
the way the composite action runs it on a pull request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from review_fixtures import case_repo, have_git

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "github_action.py"

pytestmark = pytest.mark.skipif(not have_git(), reason="git is not installed")


def _run(repo: Path, tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess, str, dict]:
    summary, output = tmp / "summary.md", tmp / "output.txt"
    summary.write_text("")
    output.write_text("")
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(output)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=repo, capture_output=True, text=True, env=env, check=False
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return done, summary.read_text(), outputs


def test_action_on_a_pull_request(tmp_path):
    repo, base, head = case_repo(tmp_path / "repo")
    sarif = tmp_path / "shardcheck.sarif"
    done, summary, outputs = _run(repo, tmp_path, "--base", base, "--head", head, "--sarif", str(sarif))
    assert done.returncode == 1, done.stderr  # the after side still has the grad_offload error
    # annotations on the after side's lines, and the summary line
    assert "::error file=scripts/run.sh,line=61,title=VERL-CFG-UNKNOWN-KEY::" in done.stdout
    assert "EP groups now stay inside a node" in done.stdout
    # the job summary: the Markdown report of the changed launch script (notes.sh changed, holds no launch)
    assert summary.startswith("## shardcheck: launch scripts changed")
    assert "`scripts/run.sh`" in summary and "notes.sh" not in summary
    assert "| actor EP | 32 | **16** |" in summary
    # SARIF for code scanning, with the after side's findings marked new / unchanged
    log = json.loads(sarif.read_text())
    [result] = log["runs"][0]["results"]
    assert result["ruleId"] == "VERL-CFG-UNKNOWN-KEY" and result["baselineState"] == "unchanged"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "scripts/run.sh"
    assert outputs["exit-code"] == "1" and outputs["scripts"] == "scripts/run.sh"
    assert outputs["sarif-written"] == "true" and outputs["summary"].startswith("scripts/run.sh: after: will not start")
    # --no-fail (the composite action's own step) exits 0 and leaves the verdict to the last step
    done, _, outputs = _run(repo, tmp_path, "--base", base, "--head", head, "--no-fail")
    assert done.returncode == 0 and outputs["exit-code"] == "1"


def test_action_with_nothing_to_review_and_with_a_bad_base(tmp_path):
    repo, _base, head = case_repo(tmp_path / "repo")
    (repo / "README.md").write_text("only docs\n")
    done, summary, outputs = _run(repo, tmp_path, "--base", head, "--head", head)
    assert done.returncode == 0 and "No launch scripts changed." in summary and outputs["exit-code"] == "0"
    done, summary, outputs = _run(repo, tmp_path, "--base", "0" * 40, "--head", head)
    assert done.returncode == 2 and done.stdout.startswith("::error title=shardcheck::")
    assert outputs["exit-code"] == "2"


def test_action_yml_runs_the_script():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    runs = " ".join(s.get("run", "") for s in steps)
    assert "tools/github_action.py" in runs and "--sarif" in runs and "pip install" in runs
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif") for s in steps)
    assert set(action["outputs"]) >= {"exit-code", "summary", "sarif"}
