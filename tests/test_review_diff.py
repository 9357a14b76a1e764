"""``shardcheck diff``: two files, and git revisions read from objects (nothing checked out)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from review_fixtures import AFTER, BEFORE, CASES, case_repo, commit_all, git, have_git, init_repo

from shardcheck.cli import main
from shardcheck.review.diff import diff_files, diff_git, match_findings, parse_rev_range

needs_git = pytest.mark.skipif(not have_git(), reason="git is not installed")


def test_the_256k_change_shows_sizes_locality_and_memory():
    [d] = diff_files(str(BEFORE), str(AFTER))
    changes = {c.what: (c.before, c.after) for c in d.changes}
    assert changes["actor.tp"] == (4, 2)
    assert changes["actor.pp"] == (8, 16)
    assert changes["actor.ep"] == (32, 16)
    assert changes["actor.layers_per_stage"] == ([11] + [12] * 6 + [11], [5] + [6] * 14 + [5])
    # DP 1 and EDP 1 on both sides: unchanged, so not a change, and present in both layouts
    assert "actor.dp" not in changes and "actor.edp" not in changes
    for side in (d.before, d.after):
        assert (side.layouts["actor"]["dp"], side.layouts["actor"]["edp"]) == (1, 1)
    # locality: EP 32 crossed 16-device nodes, EP 16 does not
    assert d.before.placement["groups"]["ep"] == {"size": 32, "groups": 8, "crossing": 8}
    assert d.after.placement["groups"]["ep"] == {"size": 16, "groups": 16, "crossing": 0}
    assert changes["placement.ep"][1] == "EP 16: inside nodes of 16"
    assert "EP groups now stay inside a node" in d.summary
    # memory per stage on both sides: 8 stages before, 16 after, each with its terms and % of the device
    assert [s["layers"] for s in d.before.memory["stages"]] == [11] + [12] * 6 + [11]
    assert len(d.after.memory["stages"]) == 16
    for side in (d.before, d.after):
        for s in side.memory["stages"]:
            assert sum(s["bytes"].values()) == s["total_bytes"] > 0
            assert s["percent"] == round(100 * s["total_bytes"] / side.memory["capacity_bytes"], 1)
    assert d.after.memory["rollout"]["engine"] == "vllm"
    # findings: the locality warning is resolved, the unknown key (grad_offload) kept
    assert [f.rule for f in d.resolved] == ["MCORE-PS-LOCALITY"]
    assert [f.rule for f in d.kept] == ["VERL-CFG-UNKNOWN-KEY"] and d.new == []
    assert d.summary.startswith(
        "after: will not start (VERL-CFG-UNKNOWN-KEY); the Megatron-Core layout itself is "
        "valid with megatron-core ≥ 0.10"
    )


def test_summary_names_a_valid_after_side_and_a_new_error(tmp_path):
    fixed = tmp_path / "fixed.sh"
    fixed.write_text(
        AFTER.read_text().replace(
            "actor_rollout_ref.actor.megatron.grad_offload=${all_offload}",
            "actor_rollout_ref.actor.megatron.param_offload=${all_offload}",
        )
    )
    [d] = diff_files(str(BEFORE), str(fixed))
    assert d.summary.startswith("after: valid on verl 0.9.1 with megatron-core ≥ 0.10;"), d.summary
    assert [f.rule for f in d.resolved] == ["MCORE-PS-LOCALITY", "VERL-CFG-UNKNOWN-KEY"] or sorted(
        f.rule for f in d.resolved
    ) == ["MCORE-PS-LOCALITY", "VERL-CFG-UNKNOWN-KEY"]
    assert d.exit_code == 0
    [d2] = diff_files(str(AFTER), str(CASES / "qwen3_235b_256k_etp_unset.sh"))
    assert "MCORE-PS-EXPERT-FOLD" in [f.rule for f in d2.new], [f.rule for f in d2.new]
    assert d2.summary.startswith("after: will not start (MCORE-PS-EXPERT-FOLD, VERL-CFG-UNKNOWN-KEY)"), d2.summary
    assert {c.what: (c.before, c.after) for c in d2.changes}["actor.etp"] == (1, 2)
    assert d2.exit_code == 1


def test_findings_match_by_rule_and_role_not_line():
    from shardcheck.rules.registry import Finding

    a = Finding("X", "error", "m1", None)
    b = Finding("X", "error", "m2 (figures changed)", None)
    c = Finding("Y", "warning", "n", None)
    new, resolved, kept = match_findings([a, c], [b])
    assert kept == [b] and resolved == [c] and new == []


def test_rev_ranges():
    assert parse_rev_range(None) == ("HEAD", None)
    assert parse_rev_range("main") == ("main", None)
    assert parse_rev_range("a..b") == ("a", "b")
    assert parse_rev_range("a..") == ("a", "HEAD")


@needs_git
def test_git_range_reads_both_sides_from_objects(tmp_path, monkeypatch):
    repo, first, second = case_repo(tmp_path / "repo")
    # the work tree holds something else entirely: A..B must not read it
    (repo / "scripts" / "run.sh").write_text("#!/bin/bash\necho changed in the work tree\n")
    monkeypatch.chdir(repo)
    diffs = diff_git(f"{first}..{second}")
    assert [d.path for d in diffs] == ["scripts/run.sh"]  # notes.sh changed but holds no launch: left out
    d = diffs[0]
    assert {c.what: (c.before, c.after) for c in d.changes}["actor.ep"] == (32, 16)
    assert d.before.label == first and d.after.label == second
    # findings are named by the path in the repository, not the temporary tree; their lines as committed
    assert all(f.path == "scripts/run.sh" for f in d.kept + d.resolved)
    assert (26, "train_ep=32") in d.before.context[("scripts/run.sh", 26)]
    assert (61, "    actor_rollout_ref.actor.megatron.grad_offload=${all_offload}") in d.after.context[
        ("scripts/run.sh", 61)
    ]


@needs_git
def test_git_default_is_head_against_the_work_tree(tmp_path, monkeypatch):
    repo, _first, _second = case_repo(tmp_path / "repo")
    (repo / "scripts" / "run.sh").write_text(BEFORE.read_text())  # an uncommitted revert
    monkeypatch.chdir(repo / "scripts")
    [d] = diff_git(None)
    assert d.before.label == "HEAD" and d.after.label == "work tree"
    assert {c.what: (c.before, c.after) for c in d.changes}["actor.ep"] == (16, 32)
    # a path limits (and keeps even a non-launch file, reported as such); a directory, its changed launches
    [n] = diff_git("HEAD~1", ["notes.sh"])
    assert n.skipped and n.exit_code == 0
    monkeypatch.chdir(repo)
    assert [d.path for d in diff_git("HEAD", ["scripts"])] == ["scripts/run.sh"]
    assert diff_git("HEAD~1", ["scripts"]) == []  # the work tree holds HEAD~1's script again
    (repo / "empty").mkdir()
    assert diff_git("HEAD", ["empty"]) == []


@needs_git
def test_git_sides_resolve_sourced_files_and_settings_as_committed(tmp_path, monkeypatch):
    """A sourced file and the pyproject.toml above the script are read as each revision holds them."""
    repo = init_repo(tmp_path / "repo")
    (repo / "jobs").mkdir()
    (repo / "jobs" / "common").mkdir()
    (repo / "jobs" / "common" / "layout.sh").write_text("train_ep=32\n")
    text = AFTER.read_text().replace("train_ep=16", 'source "$(dirname "$0")/common/layout.sh"')
    assert "source" in text
    (repo / "jobs" / "run.sh").write_text(text)
    (repo / "pyproject.toml").write_text('[tool.shardcheck]\nignore = ["VERL-CFG-UNKNOWN-KEY"]\n')
    first = commit_all(repo, "ep 32")
    (repo / "jobs" / "common" / "layout.sh").write_text("train_ep=16\n")
    (repo / "pyproject.toml").write_text("[tool.shardcheck]\nignore = []\n")
    second = commit_all(repo, "ep 16")
    monkeypatch.chdir(tmp_path)
    [d] = diff_git(f"{first}..{second}", [str(repo / "jobs" / "run.sh")], cwd=repo)
    assert (d.before.layouts["actor"]["ep"], d.after.layouts["actor"]["ep"]) == (32, 16)
    before_rules = {f.rule for f in d.before.result.findings}
    after_rules = {f.rule for f in d.after.result.findings}
    assert "VERL-CFG-UNKNOWN-KEY" not in before_rules and "VERL-CFG-UNKNOWN-KEY" in after_rules
    # the sourced file's line is named in the repository's terms
    ep = d.before.result.job.layout("actor").ep.origin.first_script_line()
    assert ep.path == "jobs/common/layout.sh" and ep.line == 1


@needs_git
def test_added_and_deleted_scripts(tmp_path, monkeypatch):
    repo = init_repo(tmp_path / "repo")
    (repo / "old.sh").write_text(BEFORE.read_text())
    first = commit_all(repo, "one")
    git(repo, "rm", "-q", "old.sh")
    (repo / "new.sh").write_text(AFTER.read_text())
    second = commit_all(repo, "two")
    monkeypatch.chdir(repo)
    diffs = {d.path: d for d in diff_git(f"{first}..{second}")}
    assert diffs["old.sh"].after.result is None and diffs["old.sh"].summary == "deleted"
    assert diffs["old.sh"].exit_code == 0
    assert diffs["new.sh"].before.result is None and "(new file)" in diffs["new.sh"].summary
    assert diffs["new.sh"].exit_code == 1  # the after side has the grad_offload error


@needs_git
def test_cli_diff_exit_codes_and_bad_input(tmp_path, monkeypatch, capsys):
    repo, first, second = case_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    assert main(["diff", "--git", f"{first}..{second}", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == 1 and [d["path"] for d in doc["diffs"]] == ["scripts/run.sh"]
    entry = doc["diffs"][0]
    assert set(entry) >= {"path", "before", "after", "changes", "findings", "memory"}
    assert set(entry["findings"]) == {"new", "resolved", "kept"}
    # each side is a check result with the fields of `check --format json`: its schema holds for them
    from conftest import validate_report

    from shardcheck.report.json_report import JSON_VERSION

    validate_report(
        {
            "version": JSON_VERSION,
            "results": [entry["before"], entry["after"]],
            "summary": {"files": 2, "judged": 2, "skipped": 0, "failed": 0, "errors": 2, "warnings": 1, "infos": 0},
        }
    )
    assert doc["check_version"] == JSON_VERSION
    assert main(["diff", "--git", f"{first}..{second}", "--exit-zero"]) == 0
    capsys.readouterr()
    assert main(["diff", "--git", "no-such-rev"]) == 2
    assert "no such revision" in capsys.readouterr().err
    assert main(["diff", "--git", "HEAD", "scripts/none.sh"]) == 2
    assert "scripts/none.sh: neither in HEAD nor in work tree" in capsys.readouterr().err
    assert main(["diff", str(BEFORE)]) == 2
    outside = tmp_path / "elsewhere.sh"
    outside.write_text("echo\n")
    assert main(["diff", "--git", "HEAD", str(outside)]) == 2
    assert "outside the repository" in capsys.readouterr().err


def test_cli_diff_of_two_files_via_the_command(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "shardcheck", "diff", str(BEFORE), str(AFTER), "--format", "markdown"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "| actor EP | 32 | **16** |" in done.stdout
    assert "| EP | 32: 8 of 8 cross nodes | **16: all inside a node** |" in done.stdout


@needs_git
def test_many_scripts_are_judged_in_worker_processes(tmp_path, monkeypatch):
    """Eight sides or more go to a process pool; the diffs are the same as judged in-process."""
    from shardcheck.review.diff import DiffOptions

    repo = init_repo(tmp_path / "repo")
    for k in range(4):
        (repo / f"run{k}.sh").write_text(BEFORE.read_text().replace("train_prompt_bsz=4", f"train_prompt_bsz=4 # {k}"))
    first = commit_all(repo, "before")
    for k in range(4):
        (repo / f"run{k}.sh").write_text(AFTER.read_text().replace("train_prompt_bsz=4", f"train_prompt_bsz=4 # {k}"))
    monkeypatch.chdir(repo)
    diffs = diff_git(first, None, DiffOptions(jobs=2))  # 8 sides: the pool
    assert [d.path for d in diffs] == [f"run{k}.sh" for k in range(4)]
    [one] = diff_git(first, ["run2.sh"], DiffOptions(jobs=1))
    assert {d.summary for d in diffs} == {one.summary}
    assert all([f.rule for f in d.kept] == ["VERL-CFG-UNKNOWN-KEY"] for d in diffs)
    assert all(d.before.label == first and d.after.label == "work tree" for d in diffs)
