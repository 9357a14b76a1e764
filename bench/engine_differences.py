"""Which example scripts build engines (ref, critic) whose settings differ from the actor's, and how.

    python bench/engine_differences.py DIR [DIR ...] [--rules ID,ID]

Every ``*.sh`` under each DIR is checked (``api.check``, the verl version each script's own keys choose); for
each script with a Megatron ref or critic engine the differing settings are printed (``MegatronLayout.
differences``), then counts: scripts judged, scripts with a second engine, scripts whose engines differ, and
how many scripts each rule named in ``--rules`` fires on (a list to check by hand).
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

from shardcheck.api import check


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--rules", default="", help="rule ids to count firings of, comma-separated")
    args = parser.parse_args()
    wanted = [r for r in args.rules.split(",") if r]
    judged = engines = differing = 0
    fired: dict[str, list[str]] = collections.defaultdict(list)
    by_setting: collections.Counter[str] = collections.Counter()
    for folder in args.dirs:
        for path in sorted(Path(folder).rglob("*.sh")):
            result = check(path)
            job = result.job
            if job is None:
                continue
            judged += 1
            for rule in wanted:
                if any(f.rule == rule for f in result.findings):
                    fired[rule].append(str(path))
            actor = job.layout("actor")
            others = [lay for lay in job.layouts if lay.role != "actor"]
            if actor is None or not others:
                continue
            engines += 1
            lines = []
            for other in others:
                for name, mine, theirs in actor.differences(other):
                    by_setting[f"{other.role}: {name}"] += 1
                    show = [t.value if t is not None else "(absent)" for t in (mine, theirs)]
                    lines.append(f"    {other.role}: {name} actor={show[0]!r} {other.role}={show[1]!r}")
            if lines:
                differing += 1
                print(path)
                print("\n".join(lines))
    print(f"\n{judged} scripts judged; {engines} build a Megatron ref or critic; {differing} of those differ")
    for setting, count in by_setting.most_common():
        print(f"  {count:4d}  {setting}")
    for rule in wanted:
        print(f"{rule}: fires on {len(fired[rule])}")
        for path in fired[rule]:
            print(f"    {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
