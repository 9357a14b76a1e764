"""Git fixture repositories for the review tests (diff --git, the Action's script, pre-commit)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CASES = Path(__file__).parent / "data" / "cases"
BEFORE = CASES / "qwen3_235b_256k_before.sh"
AFTER = CASES / "qwen3_235b_256k_after.sh"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env={**os.environ, **GIT_ENV}, check=True
    )
    return done.stdout.strip()


def have_git() -> bool:
    return shutil.which("git") is not None


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return path


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def case_repo(root: Path) -> tuple[Path, str, str]:
    """A repository whose scripts/run.sh goes from the 256K case's before layout to its after layout, with
    a sourced env file (its NPUS_PER_NODE) that differs too, and a README that is not a launch."""
    repo = init_repo(root)
    (repo / "scripts").mkdir()
    text = BEFORE.read_text()
    (repo / "scripts" / "run.sh").write_text(text)
    (repo / "scripts" / "notes.sh").write_text("#!/bin/bash\necho no launch here\n")
    (repo / "README.md").write_text("fixture\n")
    first = commit_all(repo, "before")
    (repo / "scripts" / "run.sh").write_text(AFTER.read_text())
    (repo / "scripts" / "notes.sh").write_text("#!/bin/bash\necho still no launch\n")
    second = commit_all(repo, "after")
    return repo, first, second
