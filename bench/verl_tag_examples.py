"""Each verl tag's own examples judged against that tag's own verl: scripts, verdicts, and the errors by rule.

Reads the example scripts of every tag straight from a verl git directory (``git show``; nothing is checked
out or run), writes each to a temporary folder keeping its path under the tag (so relative ``source`` and
model paths stay as in the repository) and judges it with ``check(..., verl_version=<the tag's release>)``.
Scripts without a verl / Megatron-LM / slime launch are counted as skipped.

Usage: python bench/verl_tag_examples.py --git-dir /path/to/verl.git [--tags v0.5.0,v0.9.0] [--errors]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shardcheck import check
from shardcheck.frameworks.verl.versions import catalogue

DEFAULT_TAGS = ("v0.4.0", "v0.4.1", "v0.5.0", "v0.6.0", "v0.6.1", "v0.7.0", "v0.7.1", "v0.8.0", "v0.9.0")


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=True).stdout


def tag_scripts(git_dir: str, tag: str) -> dict[str, str]:
    """The ``examples/**/*.sh`` of ``tag`` that launch verl's PPO trainer, by path."""
    names = [
        n for n in _git(git_dir, "ls-tree", "-r", "--name-only", tag, "examples").splitlines() if n.endswith(".sh")
    ]
    out = {}
    for name in names:
        text = _git(git_dir, "show", f"{tag}:{name}")
        if "main_ppo" in text:
            out[name] = text
    return out


def judge(git_dir: str, tag: str, show_errors: bool) -> dict:
    version = tag.removeprefix("v") if tag != "main" else "main"
    if version not in catalogue().versions:
        return {"tag": tag, "skipped_tag": f"verl {version} is not in the catalogue"}
    scripts = tag_scripts(git_dir, tag)
    counts = collections.Counter()
    rules = collections.Counter()
    errors: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in scripts.items():
            path = Path(tmp) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            result = check(path, display=f"{tag}:{name}", verl_version=version)
            if result.status != "judged":
                counts[result.status] += 1
                continue
            verdict = {True: "valid", False: "will not start", None: "undecided"}[result.valid]
            counts[verdict] += 1
            for f in result.findings:
                if f.severity == "error":
                    rules[f.rule] += 1
                    if show_errors:
                        errors.append(f"    {f.path}:{f.line}: {f.rule}: {f.message[:150]}")
    return {"tag": tag, "scripts": len(scripts), "counts": counts, "rules": rules, "errors": errors}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True, help="a verl git directory (a clone or a bare mirror)")
    parser.add_argument("--tags", default=",".join(DEFAULT_TAGS), help="comma-separated tags (main: the HEAD)")
    parser.add_argument("--errors", action="store_true", help="list every error finding")
    args = parser.parse_args()
    started = time.process_time()
    print(f"{'tag':8} {'scripts':>7} {'valid':>6} {'no start':>8} {'undecided':>9} {'skipped':>7}  errors by rule")
    for tag in args.tags.split(","):
        row = judge(args.git_dir, "HEAD" if tag == "main" else tag, args.errors)
        if "skipped_tag" in row:
            print(f"{tag:8} {row['skipped_tag']}")
            continue
        c = row["counts"]
        by_rule = ", ".join(f"{r} {n}" for r, n in row["rules"].most_common())
        print(
            f"{tag:8} {row['scripts']:>7} {c['valid']:>6} {c['will not start']:>8} {c['undecided']:>9} "
            f"{c['skipped'] + c['failed']:>7}  {by_rule}"
        )
        for line in row["errors"]:
            print(line)
    print(f"CPU {time.process_time() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
