"""The one way shardcheck runs git: with every program a repository's configuration can name turned off.

A repository's ``.git/config`` and ``.gitattributes`` belong to whoever wrote the repository, and git runs
commands they name: ``core.fsmonitor`` (on any command that reads the index, such as ``git diff HEAD``),
``diff.external`` and ``diff.<driver>.command`` (external diffs), ``diff.<driver>.textconv``,
``filter.<driver>.clean`` / ``smudge`` / ``process`` (when a work-tree file is hashed), hooks and the pager.
shardcheck only lists trees, reads blobs and names changed files, so each of these is switched off for every
call (git-config(1), gitattributes(5), git-diff(1) ``--no-ext-diff`` / ``--no-textconv``; git 2.39):

- ``core.fsmonitor=false``, ``core.hooksPath=/dev/null``, ``core.pager=cat``, ``diff.external=`` given as
  command-line configuration, which outranks the repository's;
- each ``filter.<driver>`` the configuration names gets empty ``clean`` / ``smudge`` / ``process`` commands
  and ``required=false`` (a driver's name cannot be wildcarded, so the names are listed first with
  ``git config --get-regexp``, which reads configuration and runs nothing); git runs no filter whose
  command is empty (convert.c ``apply_filter``);
- ``diff`` always gets ``--no-ext-diff --no-textconv``;
- the environment: ``GIT_PAGER=cat``, ``GIT_CONFIG_NOSYSTEM=1``, ``GIT_ATTR_NOSYSTEM=1``,
  ``GIT_TERMINAL_PROMPT=0``, ``GIT_OPTIONAL_LOCKS=0`` (no index refresh written), and the caller's
  ``GIT_EXTERNAL_DIFF`` dropped.

Blobs are read with ``cat-file --batch`` (no ``--filters``, no ``--textconv``): the bytes as stored.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from shardcheck.errors import InputError

_FIXED = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("diff.external", ""),
)
_ENV = {
    "GIT_PAGER": "cat",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
}
_DROPPED = ("GIT_EXTERNAL_DIFF",)
_FILTER_KEYS = ("clean", "smudge", "process")


def _environment(settings: list[tuple[str, str]]) -> dict[str, str]:
    """The caller's environment with ``_ENV`` and ``settings`` as command-line configuration. They travel as
    GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n (git-config(1), ENVIRONMENT; git 2.31+), which keep
    key and value apart: a driver's name may hold an ``=``, which ``-c key=value`` would split at."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED and not k.startswith("GIT_CONFIG_KEY_")}
    env = {k: v for k, v in env.items() if not k.startswith("GIT_CONFIG_VALUE_") and k != "GIT_CONFIG_COUNT"}
    env.update(_ENV)
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for n, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env


def _exec(repo: Path, settings: list[tuple[str, str]], args: list[str], input: bytes | None):
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            input=input if input is not None else b"",
            capture_output=True,
            check=False,
            env=_environment(settings),
        )
    except FileNotFoundError:
        raise InputError("git: not found on PATH; install git to compare revisions") from None


def _filter_settings(repo: Path) -> list[tuple[str, str]]:
    """Settings that empty every filter driver the configuration visible from ``repo`` names."""
    done = _exec(repo, list(_FIXED), ["config", "-z", "--name-only", "--get-regexp", r"^filter\."], None)
    drivers: set[str] = set()
    for name in done.stdout.decode(errors="surrogateescape").split("\0"):
        section, _, rest = name.partition(".")
        driver, _, _key = rest.rpartition(".")
        if section.lower() == "filter" and driver:
            drivers.add(driver)
    out: list[tuple[str, str]] = []
    for driver in sorted(drivers):
        out += [(f"filter.{driver}.{key}", "") for key in _FILTER_KEYS]
        out.append((f"filter.{driver}.required", "false"))
    return out


def run_git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    """git's standard output for ``git -C repo ARGS`` with the repository's programs disabled (see the module's
    docstring); InputError with git's last line of complaint when it fails."""
    settings = [*_FIXED, *_filter_settings(repo)]
    argv = list(args)
    if argv and argv[0] == "diff":
        argv[1:1] = ["--no-ext-diff", "--no-textconv"]
    done = _exec(repo, settings, argv, input)
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise InputError(f"git {' '.join(args[:3])}: {message[-1] if message else 'failed'}")
    return done.stdout
