"""The pre-commit hook (.pre-commit-hooks.yaml) through ``pre-commit try-repo`` on a fixture repository.

try-repo clones this repository (with its uncommitted changes) and ``language: python`` installs it into
a fresh virtualenv from PyPI's packages (tree-sitter, tree-sitter-bash, hydra-core): the first run takes
a minute. It skips when pre-commit is not installed (the test extra has it) or when this checkout is not
a git repository; a failed install (no package index reachable) is reported as a skip with pip's reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from review_fixtures import AFTER, CASES, GIT_ENV, commit_all, have_git, init_repo

ROOT = Path(__file__).resolve().parents[1]


def _pre_commit() -> list[str]:
    if shutil.which("pre-commit"):
        return ["pre-commit"]
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed (the test extra has it)")
    return [sys.executable, "-m", "pre_commit"]


@pytest.fixture(scope="module")
def fixture_repo(tmp_path_factory):
    if not have_git() or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of shardcheck")
    repo = init_repo(tmp_path_factory.mktemp("precommit") / "jobs")
    (repo / "good.sh").write_text(
        AFTER.read_text().replace(
            "actor_rollout_ref.actor.megatron.grad_offload=", "actor_rollout_ref.actor.megatron.param_offload="
        )
    )
    (repo / "bad.sh").write_text((CASES / "qwen3_235b_256k_etp_unset.sh").read_text())
    (repo / "helpers.sh").write_text("#!/bin/bash\n# sourced by the launchers\nexport LOG_DIR=/tmp/logs\n")
    (repo / "notes.txt").write_text("not a shell file\n")
    commit_all(repo, "fixture")
    return repo


def _try_repo(repo: Path, *files: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(repo.parent / "cache"), "PRE_COMMIT_COLOR": "never"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [*_pre_commit(), "try-repo", str(ROOT), "shardcheck", "--verbose", "--files", *files],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    if "An unexpected error has occurred" in done.stdout + done.stderr and "pip" in done.stdout + done.stderr:
        log = repo.parent / "cache" / "pre-commit.log"
        reason = log.read_text()[-600:] if log.exists() else (done.stdout + done.stderr)[-600:]
        pytest.skip(f"pre-commit could not install the hook's environment: {reason}")
    return done


def test_hook_passes_good_scripts_and_skips_files_without_a_launch(fixture_repo):
    done = _try_repo(fixture_repo, "good.sh", "helpers.sh", "notes.txt")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Passed" in out and "good.sh" in out and "helpers.sh" in out  # the hook ran on both shell files


def test_hook_fails_a_script_that_will_not_start(fixture_repo):
    done = _try_repo(fixture_repo, "bad.sh", "helpers.sh")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "Failed" in out and "MCORE-PS-EXPERT-FOLD" in out
