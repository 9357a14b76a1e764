"""The ``shardcheck`` command: a thin ``main(argv) -> int`` over the Python API."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import ClassVar

from shardcheck.cli_review import CI_FORMATS, render_check, run_diff, run_report
from shardcheck.cli_review import add_parsers as add_review_parsers

EXAMPLE = Path(__file__).with_name("examples") / "qwen3_235b_256k.sh"


def _env_pairs(values: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in values:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            raise SystemExit(f"shardcheck: --env {item!r}: expected NAME=VALUE")
        env[name] = value
    return env


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30,
          "t": 1 << 40, "tib": 1 << 40, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def _size(text: str) -> int:
    """``--host-memory 512GiB`` / ``2TiB`` / ``1000GB`` → bytes (no unit: GiB)."""
    number = text.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = text[len(number):].lower() or "gib"
    try:
        return int(float(number) * _UNITS[unit])
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size such as 512GiB, 2TiB or 1000GB") from None


def _memory_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", metavar="NAME", help="device preset for the memory estimate (h200, a100-80, 910c, ...; "
                   "default: H100-SXM-80GB for trainer.device=cuda, Ascend-910B for npu)")
    p.add_argument("--host-memory", type=_size, metavar="SIZE", help="RAM per node, for MEM-HOST (e.g. 2TiB)")
    p.add_argument("--sample-tokens", type=_sample_tokens, metavar="MEAN[,MAX]",
                   help="dynamic batch size: size the update at this mean (and longest) sample length instead of "
                        "the token budget")


def _sample_tokens(text: str) -> tuple[int, int | None]:
    """``--sample-tokens 3000`` / ``3000,16000`` → (mean, max)."""
    parts = text.split(",")
    try:
        values = [int(x) for x in parts]
    except ValueError:
        values = []
    if len(parts) > 2 or not values or min(values) < 1 or (len(values) == 2 and values[1] < values[0]):
        raise argparse.ArgumentTypeError(f"{text!r}: expected MEAN or MEAN,MAX tokens (whole numbers, MAX ≥ MEAN)")
    return values[0], values[1] if len(values) == 2 else None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardcheck",
        description="Judge a large-model training launch before it runs: layout, sizes, and what to change.",
    )
    from shardcheck import __version__

    parser.add_argument("--version", action="version", version=f"shardcheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="judge launch scripts (verl, Megatron-LM, slime)")
    check.add_argument("paths", nargs="*", help="launch scripts; a directory is searched for *.sh files, - reads "
                       f"standard input (default: the built-in example {EXAMPLE.name})")
    check.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                       help="a value the script reads from its environment (repeatable)")
    check.add_argument("--model-config", metavar="FILE", help="the model's HF config.json (overrides presets)")
    check.add_argument("--format", "--output-format", dest="format", choices=("text", "json", *CI_FORMATS),
                       default="text")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are errors (not for bad input)")
    check.add_argument("--select", action="append", metavar="IDS",
                       help="report only these rule ids or prefixes, comma-separated (replaces the settings' select)")
    check.add_argument("--ignore", action="append", metavar="IDS",
                       help="do not report these rule ids or prefixes (replaces the settings' ignore)")
    check.add_argument("--fail-on", choices=("error", "warning", "info"),
                       help="the lowest severity that makes the exit status 1 (default: error, or the settings')")
    check.add_argument("-q", "--quiet", action="store_true", help="print the findings only, one per line")
    check.add_argument("--statistics", action="store_true", help="print how often each rule fired, not the findings")
    check.add_argument("--stdin-filename", metavar="PATH",
                       help="the name (and folder, for settings and `source`) of the script read from -")
    check.add_argument("--verify", action="store_true",
                       help="also run the real megatron-core on the layout and model and compare (needs shardcheck[verify])")
    _memory_options(check)
    memory = sub.add_parser("memory", help="what each device holds, per pipeline stage and phase")
    memory.add_argument("paths", nargs="*", help=f"launch scripts (default: the built-in example {EXAMPLE.name})")
    memory.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    memory.add_argument("--model-config", metavar="FILE", help="the model's HF config.json (overrides presets)")
    memory.add_argument("--format", choices=("text", "json"), default="text")
    memory.add_argument("--explain", action="store_true", help="say what each term is and where its formula comes from")
    _memory_options(memory)
    mesh = sub.add_parser("mesh", help="show which ranks form each parallel group, and on which node")
    mesh.add_argument("path", nargs="?", help="a launch script (or give the sizes below)")
    mesh.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    mesh.add_argument("--world", type=int)
    mesh.add_argument("--devices-per-node", type=int)
    for size in ("tp", "pp", "cp", "ep"):
        mesh.add_argument(f"--{size}", type=int, default=1)
    mesh.add_argument("--etp", type=int, default=None, help="expert tensor parallel size (default: = TP)")
    mesh.add_argument("--vpp", type=int, default=None)
    mesh.add_argument("--order", default="tp-cp-ep-dp-pp")
    mesh.add_argument("--rank", type=int, help="only the groups that hold this rank")
    mesh.add_argument("--format", choices=("text", "json"), default="text")
    mesh.add_argument("--verify", action="store_true",
                      help="also initialise the real megatron-core and compare its groups (needs shardcheck[verify])")
    rules = sub.add_parser("rules", help="list every rule")
    rules.add_argument("--format", choices=("text", "json"), default="text")
    explain = sub.add_parser("explain", help="print a rule's documentation")
    explain.add_argument("rule_id")
    add_review_parsers(sub, _memory_options, _env_pairs)  # diff, report
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `shardcheck check run.sh -- a=b c=d`: the words after `--` are the script's positional parameters
    script_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    args = _parser().parse_args(argv)
    args.script_args = tuple(script_args)
    if args.command == "check":
        return _check(args)
    if args.command == "mesh":
        return _mesh(args)
    if args.command == "memory":
        return _memory(args)
    if args.command in ("diff", "report"):
        return run_diff(args) if args.command == "diff" else run_report(args)
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


def _example_display() -> str:
    """The built-in example's real path, relative to the working directory when it lies below it."""
    import os

    try:
        return os.path.relpath(EXAMPLE)
    except ValueError:
        return str(EXAMPLE)


def expand_paths(paths: list[str]) -> list[str]:
    """Command-line paths to inputs: a directory becomes its ``*.sh`` / ``*.bash`` files (recursively,
    sorted, hidden folders left out); a file, ``-`` or a missing path stays as given."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if p != "-" and path.is_dir():
            found = sorted(f for ext in ("*.sh", "*.bash") for f in path.rglob(ext)
                           if f.is_file() and not any(part.startswith(".") for part in f.relative_to(path).parts))
            out.extend(str(f) for f in found) if found else out.append(p)
        else:
            out.append(p)
    return out


def _check(args) -> int:
    from shardcheck.api import check
    from shardcheck.settings import load_settings

    env = _env_pairs(args.env)
    builtin = not args.paths
    paths = expand_paths(args.paths) if args.paths else [str(EXAMPLE)]
    if paths.count("-") > 1:
        print("shardcheck: - (standard input) can be given once", file=sys.stderr)
        return 2
    out = _Output(sys.stdout, args.format == "text" and not args.statistics)
    progress = _Progress(len(paths))
    results = []
    overrides = {"select": args.select, "ignore": args.ignore, "fail_on": args.fail_on}
    try:
        for p in paths:
            progress.advance(p)
            kwargs = {"model_config": args.model_config, "device": args.device, "host_memory": args.host_memory,
                      "sample_tokens": args.sample_tokens}
            if p == "-":
                name = Path(args.stdin_filename) if args.stdin_filename else Path.cwd() / "-"
                text = sys.stdin.buffer.read()
                display = args.stdin_filename or "-"
                where = name
            else:
                text, display, where = None, _example_display() if builtin else p, Path(p)
            settings = _settings_for(where, load_settings, overrides)
            r = check(where, env, display=display, text=text, settings=settings, args=args.script_args,
                      **kwargs)
            results.append(r)
            if out.streaming:
                progress.pause()
                out.lines(_result_lines(r, args.quiet, builtin))
    finally:
        progress.stop()
    reports = _verify(results) if args.verify else None
    if isinstance(reports, int):
        return reports
    if args.format in CI_FORMATS:
        print(render_check(args.format, results))
    elif args.format == "json":
        import json

        from shardcheck.report.json_report import render_json

        doc = json.loads(render_json(results))
        if reports is not None:
            for entry, r in zip(doc["results"], results):
                entry["verify"] = reports[id(r)].to_dict() if id(r) in reports else None
        print(json.dumps(doc, indent=2))
    else:
        from shardcheck.report.text import statistics_lines, summary_line

        if args.statistics:
            out.lines(statistics_lines(results))
        if reports is not None:
            for r in results:
                if id(r) in reports:
                    print(f"{r.path}: {reports[id(r)].text()}" if len(results) > 1 else reports[id(r)].text())
        if not args.quiet:
            out.lines([summary_line(results)])
    if reports is not None and not all(rep.agrees for rep in reports.values()):
        return 3
    return _exit_status(results, args.exit_zero)


def _settings_for(where: Path, load, overrides: dict):
    """The settings of the script's project with the command line's values in their place; a broken
    settings file is left to ``check`` to report."""
    from shardcheck.errors import SettingsError

    try:
        settings = load(where.resolve().parent)
    except SettingsError:
        return None
    return settings.overridden(**overrides)


def _exit_status(results, exit_zero: bool) -> int:
    """As ruff: 2 when no input could be read (or settings are unusable), 1 for a finding at fail-on, else 0."""
    codes = [r.exit_code for r in results]
    if all(c == 2 for c in codes) or any(r.error_kind == "usage" for r in results):
        return 2
    code = 1 if any(c != 0 for c in codes) else 0
    return 0 if exit_zero else code


def _result_lines(r, quiet: bool, builtin: bool):
    from shardcheck.report.text import result_lines

    lines = result_lines(r, quiet=quiet, builtin=builtin)
    if not quiet and r.job is not None:
        lines.append([])
    return lines


class _Output:
    """Styled lines to a stream: coloured with rich on a terminal (or FORCE_COLOR), plain otherwise or with
    NO_COLOR (https://no-color.org). rich is imported only when colour is on, so plain runs start fast."""

    STYLES: ClassVar[dict[str, str]] = {"error": "bold red", "warning": "yellow", "info": "cyan", "rule": "bold", "path": "bold",
              "fix": "green", "dim": "dim", "good": "bold green", "bad": "bold red", "heading": "bold"}

    def __init__(self, stream, streaming: bool) -> None:
        self.stream = stream
        self.streaming = streaming
        self.console = None
        if use_colour(stream):
            from rich.console import Console

            self.console = Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True,
                                   emoji=False, markup=False)

    def lines(self, lines) -> None:
        if self.console is None:
            for line in lines:
                print("".join(text for text, _ in line), file=self.stream, flush=True)
            return
        from rich.text import Text

        for line in lines:
            self.console.print(Text.assemble(*((t, self.STYLES.get(style, "")) for t, style in line)))


def use_colour(stream) -> bool:
    """Colour on a terminal, off in a pipe; NO_COLOR (any non-empty value) turns it off, FORCE_COLOR on."""
    import os

    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


class _Progress:
    """A progress bar on stderr for a batch that has taken more than a second, on a terminal only; it
    steps aside while a result is printed (results stream to stdout per file)."""

    def __init__(self, total: int) -> None:
        import time

        self.total = total
        self.done = -1
        self.start = time.monotonic()
        self.bar = None
        self.task = None
        self.enabled = total > 1 and sys.stderr.isatty() and not _no_progress()

    def advance(self, name: str) -> None:
        import time

        self.done += 1
        if not self.enabled:
            return
        if self.bar is None and time.monotonic() - self.start > 1.0:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            console = Console(file=sys.stderr, no_color=not use_colour(sys.stderr))
            self.bar = Progress(TextColumn("judging"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                                console=console, transient=True, redirect_stdout=False, redirect_stderr=False)
            self.task = self.bar.add_task("", total=self.total, completed=self.done)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, description=name)
            self.bar.start()

    def pause(self) -> None:
        if self.bar is not None:
            self.bar.stop()

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _no_progress() -> bool:
    import os

    return os.environ.get("TERM") == "dumb"


def _memory(args) -> int:
    from shardcheck.api import memory
    from shardcheck.report.memory_report import render_memory_json, render_memory_text

    env = _env_pairs(args.env)
    paths = args.paths or [str(EXAMPLE)]
    results = [memory(p, env, model_config=args.model_config, device=args.device, host_memory=args.host_memory,
                      sample_tokens=args.sample_tokens,
                      display=p if args.paths else f"{_example_display()} (built-in example)") for p in paths]
    print(render_memory_json(results) if args.format == "json" else render_memory_text(results, explain=args.explain))
    return max(r.exit_code for r in results)


def _verify(results) -> dict | int:
    """--verify: one megatron-core worker run for every result with a job; {id(result): VerifyReport}, or exit 2."""
    from shardcheck.verify import VerifyError, verify_available, verify_jobs

    hint = verify_available()
    if hint is not None:
        print(f"shardcheck: {hint}", file=sys.stderr)
        return 2
    judged = [r for r in results if r.job is not None]
    try:
        reports = verify_jobs([r.job for r in judged], [r.findings for r in judged])
    except VerifyError as exc:
        print(f"shardcheck: --verify: {exc}", file=sys.stderr)
        return 2
    return {id(r): rep for r, rep in zip(judged, reports)}


def _mesh(args) -> int:
    from shardcheck.api import mesh, resolve_script
    from shardcheck.errors import InputError
    from shardcheck.frameworks.megatron.direct import job_from_sizes
    from shardcheck.report.mesh_report import render_mesh_json, render_mesh_text

    if args.path:
        try:
            job = resolve_script(args.path, _env_pairs(args.env))
        except InputError as exc:
            print(f"error: {exc}")
            return 2
        shown = args.path
    elif args.world:
        job = job_from_sizes(world=args.world, devices_per_node=args.devices_per_node, tp=args.tp, pp=args.pp,
                             cp=args.cp, ep=args.ep, etp=args.etp, vpp=args.vpp, order=args.order)
        shown = "<sizes>"
    else:
        print("shardcheck mesh: give a launch script or --world (and the sizes)", file=sys.stderr)
        return 2
    result = mesh(job, shown)
    if args.rank is not None and result.grid is not None and not 0 <= args.rank < result.grid.world:
        print(f"shardcheck mesh: --rank {args.rank} is outside 0..{result.grid.world - 1}", file=sys.stderr)
        return 2
    report = None
    if args.verify:
        from shardcheck.verify import VerifyError, verify_available, verify_job

        hint = verify_available()
        if hint is not None:
            print(f"shardcheck: {hint}", file=sys.stderr)
            return 2
        try:
            report = verify_job(job)
        except VerifyError as exc:
            print(f"shardcheck: --verify: {exc}", file=sys.stderr)
            return 2
    if args.format == "json":
        import json

        doc = json.loads(render_mesh_json(result, args.rank))
        if report is not None:
            doc["verify"] = report.to_dict()
        print(json.dumps(doc, indent=2))
    else:
        print(render_mesh_text(result, args.rank))
        if report is not None:
            print(report.text())
    if report is not None and not report.agrees:
        return 3
    return result.exit_code


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
