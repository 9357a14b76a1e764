"""The logic of the GitHub Action (action.yml): compare the launch scripts a pull request changes.

    python tools/github_action.py --base BASE_SHA --head HEAD_SHA [--sarif FILE] [--paths 'a.sh b.sh']

Runs ``shardcheck diff --git BASE..HEAD`` once (the changed ``*.sh`` / ``*.bash`` files that hold a
launch, or only ``--paths``) and writes from that one result: GitHub workflow commands on standard output
(annotations on the changed lines), the SARIF log for code scanning (``--sarif``), the Markdown report
appended to ``$GITHUB_STEP_SUMMARY``, and ``exit-code``, ``scripts``, ``summary`` and ``sarif-written`` to
``$GITHUB_OUTPUT``. Exit status: shardcheck diff's (1: an after side will not start; 2: bad input),
or 0 with ``--no-fail``. Both revisions must be in the clone (actions/checkout with fetch-depth: 0).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")


def main(argv: list[str] | None = None) -> int:
    from shardcheck.cli_review import render_diff
    from shardcheck.errors import InputError
    from shardcheck.review.diff import DiffOptions, diff_git

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default=os.environ.get("SHARDCHECK_BASE") or None, help="the pull request's base commit")
    p.add_argument("--head", default=os.environ.get("SHARDCHECK_HEAD") or "HEAD", help="its head commit")
    p.add_argument("--paths", default="", help="space-separated scripts to compare (default: every changed one)")
    p.add_argument("--sarif", help="write the SARIF log here")
    p.add_argument("--device", default=None, help="device preset for the memory estimate")
    p.add_argument("--no-fail", action="store_true", help="exit 0 even when an after side will not start")
    args = p.parse_args(argv)
    if not args.base:
        print("::error title=shardcheck::no base revision: pass --base (the pull request's base.sha)")
        return 2
    try:
        diffs = diff_git(
            f"{args.base}..{args.head}", args.paths.split() or None, DiffOptions(device=args.device), cwd=Path.cwd()
        )
    except InputError as exc:
        print(f"::error title=shardcheck::{exc}")
        _append(os.environ.get("GITHUB_STEP_SUMMARY"), f"## shardcheck\n\n{exc}\n")
        _append(os.environ.get("GITHUB_OUTPUT"), "exit-code=2")
        return 2
    shown = [d for d in diffs if not d.skipped]
    print(render_diff("github", diffs))
    if args.sarif:
        Path(args.sarif).write_text(render_diff("sarif", diffs) + "\n", encoding="utf-8")
        _append(os.environ.get("GITHUB_OUTPUT"), "sarif-written=true")
    _append(os.environ.get("GITHUB_STEP_SUMMARY"), render_diff("markdown", diffs))
    code = max((d.exit_code for d in diffs), default=0)
    summary = " | ".join(f"{d.path}: {d.summary}" for d in shown) or "no launch scripts changed"
    _append(
        os.environ.get("GITHUB_OUTPUT"),
        f"exit-code={code}\nscripts={' '.join(d.path for d in shown)}\nsummary={summary.replace(chr(10), ' ')}",
    )
    return 0 if args.no_fail else code


if __name__ == "__main__":
    sys.exit(main())
