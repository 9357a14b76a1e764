"""The ``shardcheck`` command: a thin ``main(argv) -> int`` over the Python API."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXAMPLE = Path(__file__).with_name("examples") / "qwen3_235b_256k.sh"


def _env_pairs(values: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in values:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            raise SystemExit(f"shardcheck: --env {item!r}: expected NAME=VALUE")
        env[name] = value
    return env


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardcheck",
        description="Judge a large-model training launch before it runs: layout, sizes, and what to change.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="judge launch scripts (verl + Megatron-Core)")
    check.add_argument("paths", nargs="*", help=f"launch scripts (default: the built-in example {EXAMPLE.name})")
    check.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                       help="a value the script reads from its environment (repeatable)")
    check.add_argument("--model-config", metavar="FILE", help="the model's HF config.json (overrides presets)")
    check.add_argument("--format", choices=("text", "json"), default="text")
    rules = sub.add_parser("rules", help="list every rule")
    rules.add_argument("--format", choices=("text", "json"), default="text")
    explain = sub.add_parser("explain", help="print a rule's documentation")
    explain.add_argument("rule_id")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check":
        return _check(args)
    if args.command == "rules":
        from shardcheck.rules.docs import render_rule_list

        print(render_rule_list(args.format))
        return 0
    from shardcheck.rules.docs import render_rule_page

    page = render_rule_page(args.rule_id)
    if page is None:
        print(f"shardcheck: no rule {args.rule_id!r}; `shardcheck rules` lists them", file=sys.stderr)
        return 2
    print(page)
    return 0


def _check(args) -> int:
    from shardcheck.api import check

    env = _env_pairs(args.env)
    paths = args.paths or [str(EXAMPLE)]
    results = []
    for p in paths:
        display = "examples/qwen3_235b_256k.sh (built-in example)" if not args.paths else p
        results.append(check(p, env, model_config=args.model_config, display=display))
    if args.format == "json":
        from shardcheck.report.json_report import render_json

        print(render_json(results))
    else:
        from shardcheck.report.text import render_text

        print(render_text(results))
    return max(r.exit_code for r in results)


def entry() -> None:
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    entry()
