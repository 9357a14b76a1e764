"""The ``shardcheck`` command: a thin ``main(argv) -> int`` over the Python API.

Exit status: 0 no error, 1 an error finding, 2 unusable input or arguments, 3 ``--verify`` disagrees
with megatron-core, 4 an internal error of shardcheck itself (a bug: one line, the traceback only
with ``--debug``).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import ClassVar

from shardcheck.cli_review import CI_FORMATS, ENV_HELP, render_check, run_diff, run_report, say
from shardcheck.cli_review import add_parsers as add_review_parsers
from shardcheck.errors import UsageError

EXAMPLE = Path(__file__).with_name("examples") / "qwen3_235b_256k.sh"
EXIT_INTERNAL = 4


class _Parser(argparse.ArgumentParser):
    argv: ClassVar[list[str]] = []  # the words being parsed, for "did you mean" (cli_suggest.py)

    def error(self, message: str):  # argparse would print usage and exit 2 itself, never as JSON
        from shardcheck.cli_suggest import hint

        raise UsageError(f"{self.prog}: {message}{hint(self, message, self.argv)}")


def _env_pairs(values: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in values:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            raise UsageError(f"shardcheck: --env {item!r}: expected NAME=VALUE")
        env[name] = value
    return env


def _input_options(p: argparse.ArgumentParser, *, settings: bool = True) -> None:
    p.add_argument(
        "--allow-source",
        action="append",
        default=[],
        metavar="DIR",
        help="let the files a script names (`source FILE`, a model path's config.json, --config-path's YAML) "
        "be read in DIR (default: only world-readable files in the script's own directory tree)",
    )
    if settings:
        p.add_argument(
            "--config",
            metavar="FILE",
            help="settings file ([tool.shardcheck]); default: the nearest "
            "pyproject.toml from the script up to the top of its git work tree",
        )
    p.add_argument("--debug", action="store_true", help="show the traceback of an internal error")


_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}


MAX_SIZE = 1 << 60  # 1 EiB: far above any device or host, and below every OS limit (RLIMIT_AS takes 2^63)


def _size(text: str) -> int:
    """``--host-memory 512GiB`` / ``2TiB`` / ``1000GB`` → bytes (no unit: GiB)."""
    number = text.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = text[len(number) :].lower() or "gib"
    try:
        size = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        size = -1.0
    if not 0 <= size <= MAX_SIZE:  # NaN, infinity (1e400GiB) and sizes no machine has (1e20TiB) too
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a size such as 512GiB, 2TiB or 1000GB (at most {MAX_SIZE >> 60} EiB)"
        )
    return int(size)


def _memory_size(text: str) -> int:
    """``--device-memory`` / ``--host-memory``: a size, and more than nothing."""
    size = _size(text)
    if size == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a memory of 0 bytes; give the memory it has, e.g. 96GiB")
    return size


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1e6:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds, e.g. 20 (0: no limit)")
    return value


def _limit_options(p: argparse.ArgumentParser) -> None:
    from shardcheck.guard import DEFAULT_MEMORY, DEFAULT_SECONDS

    p.add_argument(
        "--time-limit",
        type=_seconds,
        default=DEFAULT_SECONDS,
        metavar="SECONDS",
        help=f"time allowed per input; past it the input is an error (default {DEFAULT_SECONDS:g}; 0: none)",
    )
    p.add_argument(
        "--memory-limit",
        type=_size,
        default=DEFAULT_MEMORY,
        metavar="SIZE",
        help="memory allowed per input beyond what shardcheck holds; past it the input is an error "
        "(default 2GiB; 0: none)",
    )


def _guarded(args, shown: str, fn):
    """``fn()`` under the input's guard (guard.run_input): (its value, None) or (None, the Failure)."""
    from shardcheck.guard import run_input

    return run_input(shown, fn, seconds=args.time_limit, memory=args.memory_limit, debug=args.debug)


def _memory_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device",
        metavar="NAME",
        help="device preset for the memory estimate (h200, a100-80, 910c, ...; "
        "default: H100-SXM-80GB for trainer.device=cuda, Ascend-910B for npu); check also answers the "
        "script's accelerator probes with it ($(python3 -c 'import torch_npu' ...), nvidia-smi -L | wc -l)",
    )
    p.add_argument(
        "--device-memory",
        type=_memory_size,
        metavar="SIZE",
        help="memory of one device, for a card without a preset (e.g. 96GiB); instead of --device",
    )
    p.add_argument("--host-memory", type=_memory_size, metavar="SIZE", help="RAM per node, for MEM-HOST (e.g. 2TiB)")
    p.add_argument(
        "--sample-tokens",
        type=_sample_tokens,
        metavar="MEAN[,MAX]",
        help="dynamic batch size: size the update at this mean (and longest) sample length instead of the token budget",
    )


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


MODEL_CONFIG_HELP = "the model's HF config.json, or its folder holding one (overrides presets)"


def _version_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--verl-version",
        metavar="X",
        help="the verl release to judge against (default: the setting "
        "verl-version, an installed verl, a pin near the script, else the newest release that accepts "
        "every key of the script)",
    )
    p.add_argument(
        "--verl-path",
        metavar="DIR",
        help="a verl checkout, fork or site-packages folder to judge against: its config tree is read as data "
        "(never imported) and its version recognised by content (also the setting verl-path)",
    )
    p.add_argument(
        "--vllm-version",
        metavar="X",
        help="the vLLM version the VLLM-* rules follow (default: the one the verl version pins)",
    )
    p.add_argument(
        "--sglang-version",
        metavar="X",
        help="the SGLang version the SGLANG-* rules follow (default: the one the verl version pins)",
    )
    p.add_argument(
        "--megatron-core-version",
        metavar="X",
        help="the megatron-core minor the layout rules follow "
        "(default: the installed one, else the one the verl release runs with)",
    )


def _version_kwargs(args) -> dict[str, str | None]:
    """The versions given with ``_version_options``, as ``api.check`` takes them."""
    names = ("verl_version", "verl_path", "megatron_core_version", "vllm_version", "sglang_version")
    return {name: getattr(args, name) for name in names}


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="shardcheck",
        description="Judge a large-model training launch before it runs: layout, sizes, and what to change.",
    )
    from shardcheck import __version__

    parser.add_argument("--version", action="version", version=f"shardcheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="judge launch scripts (verl, Megatron-LM, slime)")
    check.add_argument(
        "paths",
        nargs="*",
        help="launch scripts; a directory is searched for *.sh files, - reads "
        f"standard input (default: the built-in example {EXAMPLE.name})",
    )
    check.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=ENV_HELP,
    )
    check.add_argument("--model-config", metavar="PATH", help=MODEL_CONFIG_HELP)
    check.add_argument(
        "--format", "--output-format", dest="format", choices=("text", "json", *CI_FORMATS), default="text"
    )
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are errors (not for bad input)")
    check.add_argument(
        "--select",
        action="append",
        metavar="IDS",
        help="report only these rule ids or prefixes, comma-separated (replaces the settings' select)",
    )
    check.add_argument(
        "--ignore",
        action="append",
        metavar="IDS",
        help="do not report these rule ids or prefixes (replaces the settings' ignore)",
    )
    check.add_argument(
        "--fail-on",
        choices=("error", "warning", "info"),
        help="the lowest severity that makes the exit status 1 (default: error, or the settings')",
    )
    check.add_argument("-q", "--quiet", action="store_true", help="print the findings only, one per line")
    check.add_argument("--statistics", action="store_true", help="print how often each rule fired, not the findings")
    check.add_argument(
        "--no-fix-proof",
        action="store_true",
        help="print the fix texts without re-judging each fix on the fixed script (docs/fixes.md)",
    )
    check.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="the name (and folder, for settings and `source`) of the script read from -",
    )
    check.add_argument(
        "--verify",
        action="store_true",
        help="also run the real megatron-core on the layout and model and compare (needs shardcheck[verify])",
    )
    check.add_argument("--verbose", action="store_true", help="also say which settings file was used")
    check.add_argument(
        "--online",
        action="store_true",
        help="read a model found nowhere on this machine from the Hugging Face Hub (honours HF_ENDPOINT, "
        "HF_TOKEN, HF_HUB_OFFLINE; also the setting online = true)",
    )
    _memory_options(check)
    _input_options(check)
    _limit_options(check)
    _version_options(check)
    check.add_argument(
        "--versions",
        action="store_true",
        help="judge the script against every bundled verl release (and megatron-core minor where the "
        "layout verdict changes): one row each",
    )
    memory = sub.add_parser("memory", help="what each device holds, per pipeline stage and phase")
    memory.add_argument("paths", nargs="*", help=f"launch scripts (default: the built-in example {EXAMPLE.name})")
    memory.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help=ENV_HELP)
    memory.add_argument("--model-config", metavar="PATH", help=MODEL_CONFIG_HELP)
    memory.add_argument("--format", choices=("text", "json"), default="text")
    memory.add_argument("--explain", action="store_true", help="say what each term is and where its formula comes from")
    _memory_options(memory)
    _input_options(memory)
    _limit_options(memory)
    _version_options(memory)
    mesh = sub.add_parser("mesh", help="show which ranks form each parallel group, and on which node")
    mesh.add_argument("path", nargs="?", help=f"a launch script, or the sizes below (default: {EXAMPLE.name})")
    mesh.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help=ENV_HELP)
    mesh.add_argument("--world", type=int, metavar="N", help="ranks in all (instead of a script)")
    mesh.add_argument("--devices-per-node", type=int, metavar="N", help="devices per node (with --world)")
    sizes = {"tp": "tensor", "pp": "pipeline", "cp": "context", "ep": "expert"}
    for size, name in sizes.items():
        mesh.add_argument(f"--{size}", type=int, default=1, metavar="N", help=f"{name} parallel size (default 1)")
    mesh.add_argument("--etp", type=int, default=None, help="expert tensor parallel size (default: = TP)")
    mesh.add_argument("--vpp", type=int, default=None, metavar="N", help="virtual pipeline stages per rank")
    mesh.add_argument("--order", default="tp-cp-ep-dp-pp", help="the rank order, first fastest (default %(default)s)")
    mesh.add_argument("--rank", type=int, help="only the groups that hold this rank")
    mesh.add_argument("--format", choices=("text", "json"), default="text")
    mesh.add_argument(
        "--verify",
        action="store_true",
        help="also initialise the real megatron-core and compare its groups (needs shardcheck[verify])",
    )
    _input_options(mesh, settings=False)
    _limit_options(mesh)
    plan = sub.add_parser("plan", help="the layouts that start, fit and run fastest, with the lines to paste")
    plan.add_argument(
        "path",
        nargs="?",
        help=f"a launch script (or give --model and the cluster; default: the built-in example {EXAMPLE.name})",
    )
    plan.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help=ENV_HELP)
    plan.add_argument("--model-config", metavar="PATH", help=MODEL_CONFIG_HELP)
    plan.add_argument("--model", metavar="NAME|config.json", help="plan a verl GRPO job for this model")
    plan.add_argument("--world", type=int)
    plan.add_argument("--devices-per-node", type=int)
    plan.add_argument("--seq-len", type=int, help="prompt + response tokens (with --model)")
    plan.add_argument("--global-batch", type=int, default=64, help="sequences per step (with --model)")
    plan.add_argument("--framework", default="verl", choices=("verl", "megatron-lm", "slime"))
    plan.add_argument("--device", metavar="NAME", help="device preset (h200, a100-80, 910c, ...)")
    plan.add_argument("--top", type=int, default=5, help="how many layouts to show (default 5)")
    plan.add_argument("--margin", type=float, default=0.10, help="memory kept free, a share of the device (0.10)")
    plan.add_argument("--format", choices=("text", "json"), default="text")
    _input_options(plan, settings=False)
    _limit_options(plan)
    _version_options(plan)
    rules = sub.add_parser("rules", help="list every rule")
    rules.add_argument("--format", choices=("text", "json"), default="text")
    explain = sub.add_parser("explain", help="print a rule's documentation")
    explain.add_argument("rule_id")
    add_review_parsers(sub, _memory_options, _limit_options, _env_pairs)  # diff, report
    return parser


def _wants_json(argv: list[str]) -> bool:
    from itertools import pairwise

    return any(a in ("--format=json", "--output-format=json") for a in argv) or any(
        a in ("--format", "--output-format") and b == "json" for a, b in pairwise(argv)
    )


def _print_error(message: str, as_json: bool, path: str | None = None) -> None:
    """One line on stderr; in JSON mode a JSON document on stdout too, so JSON readers always get JSON."""
    if as_json:
        import json

        print(json.dumps({"version": 1, "path": path, "valid": None, "error": message}, indent=2))
    say(message)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `shardcheck check run.sh -- a=b c=d`: the words after `--` are the script's positional parameters
    script_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    as_json = _wants_json(argv)
    if not argv:  # bare `shardcheck`: its usage, as ruff prints it
        print(_parser().format_help(), end="", file=sys.stderr)
        return 2
    try:
        _Parser.argv = argv
        args = _parser().parse_args(argv)
        args.script_args = tuple(script_args)
        return _dispatch(args)
    except UsageError as exc:
        _print_error(str(exc), as_json)
        return 2
    except (KeyboardInterrupt, BrokenPipeError, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 — the crash contract: one line and a reserved exit status
        from shardcheck.guard import internal_error_line

        _print_error(f"shardcheck: {internal_error_line(exc, debug='--debug' in argv)}", as_json)
        return EXIT_INTERNAL


def _dispatch(args) -> int:
    if getattr(args, "device_memory", None) is not None:
        if args.device:
            raise UsageError("shardcheck: give --device or --device-memory, not both")
        from shardcheck.memory.devices import MEMORY_CHOICE

        args.device = f"{MEMORY_CHOICE}{args.device_memory}"
    elif getattr(args, "device", None) is not None:  # a bad --device is a usage error, before any input is read
        from shardcheck.memory.devices import find_device

        try:
            find_device(args.device)
        except UsageError as exc:
            raise UsageError(f"shardcheck {args.command}: {exc}") from None
    if args.command == "check":
        return _check(args)
    if args.command == "mesh":
        return _mesh(args)
    if args.command == "memory":
        return _memory(args)
    if args.command == "plan":
        return _plan(args)
    if args.command == "report" and not args.paths:  # as check: the built-in example
        args.paths = [str(EXAMPLE)]
    if args.command in ("diff", "report"):
        return run_diff(args) if args.command == "diff" else run_report(args)
    if args.command == "rules":
        from shardcheck.rules.docs import render_rule_list

        print(render_rule_list(args.format))
        return 0
    from shardcheck.rules.docs import render_rule_page

    page = render_rule_page(args.rule_id)
    if page is None:
        from shardcheck.rules.registry import check_id

        status = check_id(args.rule_id, prefix_ok=False)
        if status.kind == "renamed":
            page = render_rule_page(status.target)
            say(f"shardcheck: {args.rule_id} was renamed to {status.target}")
        else:
            said = f" ({status.note})" if status.kind == "removed" else ""
            if status.kind == "unknown" and status.target:
                said = f" (did you mean {status.target}?)"
            raise UsageError(f"shardcheck: no rule {args.rule_id!r}{said}; `shardcheck rules` lists them")
    print(page)
    return 0


def _plan(args) -> int:
    from shardcheck.errors import InputError
    from shardcheck.plan import PlanError, plan_model, plan_script
    from shardcheck.report.plan_report import render_plan_json, render_plan_text

    _usable_versions(args)
    builtin = args.path is None and args.model is None and args.world is None  # nothing given
    if builtin:
        args.path = str(EXAMPLE)  # as check and memory: no path judges the built-in example
    if args.path is None and any(_version_kwargs(args).values()):
        raise UsageError(
            "shardcheck plan: the version options judge a launch script: give one "
            "(shardcheck plan run.sh --verl-version X)"
        )
    if args.path is not None:
        work = functools.partial(
            plan_script,
            args.path,
            _env_pairs(args.env),
            model_config=args.model_config,
            device=args.device,
            top=args.top,
            margin=args.margin,
            allow_source=tuple(args.allow_source),
            display=f"{_example_display()} (built-in example)" if builtin else None,
            **_version_kwargs(args),
        )
    elif args.model and args.world and args.devices_per_node and args.device and args.seq_len:
        work = functools.partial(
            plan_model,
            args.model,
            world=args.world,
            devices_per_node=args.devices_per_node,
            device=args.device,
            seq_len=args.seq_len,
            global_batch=args.global_batch,
            framework=args.framework,
            top=args.top,
            margin=args.margin,
        )
    else:
        raise UsageError(
            "shardcheck plan: give a launch script, or --model, --world, --devices-per-node, --device and --seq-len"
        )
    try:
        result, failure = _guarded(args, args.path or args.model, work)
    except (InputError, PlanError) as exc:
        _print_error(f"shardcheck plan: {exc}", args.format == "json", args.path)
        return 2
    if failure is not None:
        _print_error(f"shardcheck plan: {failure.line}", args.format == "json", args.path)
        return failure.exit_code
    print(render_plan_json(result) if args.format == "json" else render_plan_text(result))
    return 0 if result.plans else 1


def _example_display() -> str:
    """The built-in example's real path, relative to the working directory when it lies below it."""
    import os

    try:
        return os.path.relpath(EXAMPLE)
    except ValueError:
        return str(EXAMPLE)


def expand_paths(paths: list[str], allow: tuple[str, ...] = ()) -> list[str]:
    """Command-line paths to inputs: a directory becomes its ``*.sh`` / ``*.bash`` files (recursively,
    sorted, hidden folders left out, symlinked folders not entered); a file, ``-`` or a missing path stays as
    given. A symlinked script found in a directory is read under the ``source`` policy with the directory as
    the tree (inputs/read_policy.py): one to a file outside it, or to a private one, is left out with one line
    on standard error (name it on the command line to check it)."""
    from shardcheck.inputs.read_policy import ReadPolicy

    out: list[str] = []
    for p in paths:
        path = Path(p)
        if p != "-" and path.is_dir():
            policy = ReadPolicy(path, tuple(Path(d) for d in allow))
            found = []
            for f in sorted(f for ext in ("*.sh", "*.bash") for f in path.rglob(ext)):
                if any(part.startswith(".") for part in f.relative_to(path).parts) or not f.is_file():
                    continue
                why = policy.refusal(f) if f.is_symlink() else None
                if why is not None:
                    print(f"shardcheck: {f}: a symlink, not read: {why}, or name it to check it", file=sys.stderr)
                    continue
                found.append(f)
            out.extend(str(f) for f in found) if found else out.append(p)
        else:
            out.append(p)
    return out


def _proven_check(*args, **kwargs):
    """``api.check``, then each error's fix re-judged on the fixed script (plan/fixes.py)."""
    from shardcheck.api import check

    result = check(*args, **kwargs)
    from shardcheck.plan.fixes import prove_fixes  # after the check: the rules are registered by then

    return prove_fixes(result)


def _check(args) -> int:
    from shardcheck.api import check, unusable_result
    from shardcheck.settings import Settings, load_settings

    env = _env_pairs(args.env)
    given = _config_settings(args)
    builtin = not args.paths
    paths = expand_paths(args.paths, tuple(args.allow_source)) if args.paths else [str(EXAMPLE)]
    if paths.count("-") > 1:
        raise UsageError("shardcheck: - (standard input) can be given once")
    _usable_versions(args)
    if args.versions:
        return _versions(args, env, paths)
    # --env over several files: each result waits for the others, so that a name read by no file is said once
    held = bool(env) and len(paths) > 1
    out = _Output(sys.stdout, args.format == "text" and not args.statistics and not held)
    progress = _Progress(len(paths))
    results = []
    overrides = {"select": args.select, "ignore": args.ignore, "fail_on": args.fail_on}
    _refuse_unknown_selectors(args)
    try:
        for p in paths:
            progress.advance(p)
            kwargs = {
                "model_config": args.model_config,
                "device": args.device,
                "host_memory": args.host_memory,
                "sample_tokens": args.sample_tokens,
                "allow_source": tuple(args.allow_source),
                "online": args.online,
                **_version_kwargs(args),
            }
            if p == "-":
                name = Path(args.stdin_filename) if args.stdin_filename else Path.cwd() / "-"
                text = sys.stdin.buffer.read()
                display = args.stdin_filename or "-"
                where = name
            else:
                text, display, where = None, _example_display() if builtin else p, Path(p)
            judge = _proven_check if not args.no_fix_proof else check

            def judged(where=where, display=display, text=text, kwargs=kwargs):
                # the settings are read under the input's guard too (a settings file of 60,000 ids)
                settings = (
                    given.overridden(**overrides)
                    if given is not None
                    else _settings_for(where, load_settings, overrides)
                )
                return judge(where, env, display=display, text=text, settings=settings, args=args.script_args, **kwargs)

            r, failure = _guarded(args, display, judged)
            if failure is not None:
                r = unusable_result(display, failure.line, failure.result_kind, given or Settings())
            results.append(r)
            if out.streaming:
                progress.pause()
                out.lines(_result_lines(r, args.quiet, builtin, args.verbose))
    finally:
        progress.stop()
    if held:
        env_unused_once(results)
        if args.format == "text" and not args.statistics:
            for r in results:
                out.lines(_result_lines(r, args.quiet, builtin, args.verbose))
    reports = _verify(results) if args.verify else None
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
                    from shardcheck.report.escape import file_name

                    said = reports[id(r)].text()
                    print(f"{file_name(r.path)}: {said}" if len(results) > 1 else said)
        if not args.quiet:
            out.lines([summary_line(results)])
    if reports is not None and not all(rep.agrees for rep in reports.values()):
        return 3
    return _exit_status(results, args.exit_zero)


def env_unused_once(results) -> None:
    """SHELL-ENV-UNUSED over several files: none where some file reads the name; where none does, one finding,
    on the first file, saying so (each file used to warn of every --env it does not read)."""
    from dataclasses import replace

    def unused(f) -> bool:
        return f.rule == "SHELL-ENV-UNUSED" and f.data.get("name") is not None

    judged = [r for r in results if r.job is not None]
    for r in judged:  # a file's unused names were grouped into one finding: one each again
        r.findings[:] = [m for f in r.findings for m in (f.members if unused(f) and f.members else (f,))]
    said: set[str] = set()
    for r in judged:
        kept = []
        for f in r.findings:
            if unused(f):
                name = f.data["name"]
                if name in said or any(
                    not any(unused(g) and g.data["name"] == name for g in o.findings) for o in judged
                ):
                    continue
                said.add(name)
                f = replace(
                    f,
                    message=f"--env {name}: none of the {len(judged)} scripts reads ${name}, so the value "
                    f"changes nothing",
                )
            kept.append(f)
        r.findings[:] = kept


def _refuse_unknown_selectors(args) -> None:
    """--select / --ignore ids that name no rule or prefix: a usage error (exit 2) with "did you mean"."""
    from shardcheck.errors import SettingsError
    from shardcheck.settings import refuse_unknown_ids, split_ids

    for option in ("select", "ignore"):
        try:
            refuse_unknown_ids(split_ids(getattr(args, option) or []), f"--{option}")
        except SettingsError as exc:
            raise UsageError(f"shardcheck: {exc}") from None


def _config_settings(args):
    """The ``--config`` settings (None: each script's own work tree decides)."""
    if not getattr(args, "config", None):
        return None
    from shardcheck.errors import SettingsError
    from shardcheck.settings import load_settings

    try:  # under the per-input guard as well: a settings file is input too
        settings, failure = _guarded(args, args.config, lambda: load_settings(Path("."), Path(args.config)))
    except SettingsError as exc:
        raise UsageError(f"shardcheck: --config: {exc}") from None
    if failure is not None:
        raise UsageError(f"shardcheck: --config: {failure.line}")
    return settings


def _settings_for(where: Path, load, overrides: dict):
    """The settings of the script's project with the command line's values in their place; a broken
    settings file is left to ``check`` to report."""
    from shardcheck.errors import SettingsError
    from shardcheck.settings import script_folder

    try:
        settings = load(script_folder(where))
    except SettingsError:
        return None
    return settings.overridden(**overrides)


def _exit_status(results, exit_zero: bool) -> int:
    """As ruff: 4 after an internal error on any input, 2 when no input could be read (or settings are
    unusable), 1 for a finding at fail-on, else 0."""
    codes = [r.exit_code for r in results]
    if 4 in codes:  # an internal error while judging one input: the others were judged, the status says so
        return 4
    if all(c == 2 for c in codes) or any(r.error_kind == "usage" for r in results):
        return 2
    code = 1 if any(c != 0 for c in codes) else 0
    return 0 if exit_zero else code


def _result_lines(r, quiet: bool, builtin: bool, verbose: bool = False):
    from shardcheck.report.text import result_lines

    lines = result_lines(r, quiet=quiet, builtin=builtin, verbose=verbose)
    if not quiet and r.job is not None:
        lines.append([])
    return lines


class _Output:
    """Styled lines to a stream: coloured with rich on a terminal (or FORCE_COLOR), plain otherwise or with
    NO_COLOR (https://no-color.org). rich is imported only when colour is on, so plain runs start fast."""

    STYLES: ClassVar[dict[str, str]] = {
        "error": "bold red",
        "warning": "yellow",
        "info": "cyan",
        "rule": "bold",
        "path": "bold",
        "fix": "green",
        "dim": "dim",
        "good": "bold green",
        "bad": "bold red",
        "heading": "bold",
    }

    def __init__(self, stream, streaming: bool) -> None:
        self.stream = stream
        self.streaming = streaming
        self.console = None
        if use_colour(stream):
            from rich.console import Console

            self.console = Console(
                file=stream, force_terminal=True, highlight=False, soft_wrap=True, emoji=False, markup=False
            )

    def lines(self, lines) -> None:
        from shardcheck.report.escape import text

        if self.console is None:
            for line in lines:
                print("".join(text(t) for t, _ in line), file=self.stream, flush=True)
            return
        from rich.text import Text

        for line in lines:
            self.console.print(Text.assemble(*((text(t), self.STYLES.get(style, "")) for t, style in line)))


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
            self.bar = Progress(
                TextColumn("judging"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                console=console,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self.task = self.bar.add_task("", total=self.total, completed=self.done)
        if self.bar is not None:
            from shardcheck.report.escape import text

            self.bar.update(self.task, completed=self.done, description=text(name))
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


def _usable_versions(args) -> None:
    """An unknown --verl-version / --megatron-core-version is a usage error: one line naming the bundled ones."""
    bad = _bad_version(args)
    if bad is not None:
        raise UsageError(f"shardcheck: {bad}")


def _bad_version(args) -> str | None:
    """An unknown --verl-version / --megatron-core-version: one line naming the bundled ones (exit 2)."""
    from shardcheck.errors import InputError
    from shardcheck.frameworks.megatron import versions as mcore
    from shardcheck.frameworks.verl import versions as verl

    if getattr(args, "verl_path", None) is not None and args.verl_version is not None:
        return "--verl-version and --verl-path both name the verl to judge against; give one"
    try:
        if getattr(args, "verl_path", None) is not None:
            from shardcheck.frameworks.verl.verl_path import load

            _ = load(args.verl_path).match  # an unusable directory is bad input: one line, exit 2
        if args.verl_version is not None:
            verl.normalize(args.verl_version)
        from shardcheck.frameworks.verl import engine_versions

        for engine in ("vllm", "sglang"):
            if getattr(args, f"{engine}_version", None) is not None:
                engine_versions.normalize(engine, getattr(args, f"{engine}_version"))
        if args.megatron_core_version is not None:
            mcore.normalize(args.megatron_core_version)
    except InputError as exc:
        return str(exc)
    return None


def _versions(args, env: dict[str, str], paths: list[str]) -> int:
    """--versions: one row per bundled verl release (and megatron-core minor where the layout verdict changes)."""
    from shardcheck.api import VersionMatrix, version_matrix
    from shardcheck.report.versions_report import render_versions_json, render_versions_text

    matrices, internal = [], False
    for p in paths:
        display = p if args.paths else _example_display()
        matrix, failure = _guarded(
            args,
            display,
            functools.partial(
                version_matrix,
                p,
                env,
                model_config=args.model_config,
                display=display,
                megatron_core_version=args.megatron_core_version,
                allow_source=tuple(getattr(args, "allow_source", ()) or ()),
                verl_path=getattr(args, "verl_path", None),
            ),
        )
        if failure is not None:
            internal = internal or failure.kind == "internal"
            matrix = VersionMatrix(display, error=failure.line)
        matrices.append(matrix)
    print(render_versions_json(matrices) if args.format == "json" else render_versions_text(matrices))
    return 4 if internal else 2 if any(m.error for m in matrices) else 0


def _memory(args) -> int:
    from shardcheck.api import MemoryResult, memory
    from shardcheck.report.memory_report import render_memory_json, render_memory_text

    _usable_versions(args)
    env = _env_pairs(args.env)
    settings = _config_settings(args)
    paths = args.paths or [str(EXAMPLE)]
    results = []
    for p in paths:
        display = p if args.paths else f"{_example_display()} (built-in example)"
        result, failure = _guarded(
            args,
            display,
            functools.partial(
                memory,
                p,
                env,
                model_config=args.model_config,
                device=args.device,
                host_memory=args.host_memory,
                sample_tokens=args.sample_tokens,
                settings=settings,
                allow_source=tuple(args.allow_source),
                display=display,
                **_version_kwargs(args),
            ),
        )
        results.append(
            result
            if failure is None
            else MemoryResult(display, error=failure.line, internal=failure.kind == "internal")
        )
    print(render_memory_json(results) if args.format == "json" else render_memory_text(results, explain=args.explain))
    return max(r.exit_code for r in results)


def _verify(results) -> dict:
    """--verify: one megatron-core worker run for every result with a job; {id(result): VerifyReport}."""
    from shardcheck.verify import VerifyError, verify_available, verify_jobs

    hint = verify_available()
    if hint is not None:
        raise UsageError(f"shardcheck: {hint}")
    judged = [r for r in results if r.job is not None]
    try:
        reports = verify_jobs([r.job for r in judged], [r.findings for r in judged])
    except VerifyError as exc:
        raise UsageError(f"shardcheck: --verify: {exc}") from None
    return {id(r): rep for r, rep in zip(judged, reports)}


def _mesh_sizes(args) -> None:
    """The sizes given as options: each a whole number ≥ 1 (ETP and VPP may be left out)."""
    given = {
        "--world": args.world,
        "--devices-per-node": args.devices_per_node,
        "--tp": args.tp,
        "--pp": args.pp,
        "--cp": args.cp,
        "--ep": args.ep,
        "--etp": args.etp,
        "--vpp": args.vpp,
    }
    for name, value in given.items():
        if value is not None and value < 1:
            raise UsageError(f"shardcheck mesh: {name} {value}: a parallel size is a whole number ≥ 1")
    if args.rank is not None and args.rank < 0:
        raise UsageError(f"shardcheck mesh: --rank {args.rank}: ranks count from 0")


def _mesh(args) -> int:
    from shardcheck.api import mesh, resolve_script
    from shardcheck.errors import InputError
    from shardcheck.frameworks.megatron.direct import job_from_sizes
    from shardcheck.report.mesh_report import render_mesh_json, render_mesh_text

    if args.path or args.world is None:  # no script and no sizes: the built-in example, as check judges it
        env = _env_pairs(args.env)
        path = args.path or str(EXAMPLE)
        try:
            job, failure = _guarded(
                args, path, lambda: resolve_script(path, env, allow_source=tuple(args.allow_source))
            )
        except InputError as exc:
            _print_error(f"error: {exc}", args.format == "json", args.path)
            return 2
        if failure is not None:
            _print_error(f"error: {failure.line}", args.format == "json", args.path)
            return failure.exit_code
        shown = args.path or _example_display() + (" (built-in example)" if args.format == "text" else "")
    else:
        _mesh_sizes(args)
        job = job_from_sizes(
            world=args.world,
            devices_per_node=args.devices_per_node,
            tp=args.tp,
            pp=args.pp,
            cp=args.cp,
            ep=args.ep,
            etp=args.etp,
            vpp=args.vpp,
            order=args.order,
        )
        shown = "<sizes>"
    result, failure = _guarded(args, shown, lambda: mesh(job, shown))
    if failure is not None:
        _print_error(f"error: {failure.line}", args.format == "json", shown)
        return failure.exit_code
    if args.rank is not None and result.grid is not None and not 0 <= args.rank < result.grid.world:
        raise UsageError(f"shardcheck mesh: --rank {args.rank} is outside 0..{result.grid.world - 1}")
    report = None
    if args.verify:
        from shardcheck.verify import VerifyError, verify_available, verify_job

        hint = verify_available()
        if hint is not None:
            raise UsageError(f"shardcheck: {hint}")
        try:
            report = verify_job(job)
        except VerifyError as exc:
            raise UsageError(f"shardcheck: --verify: {exc}") from None
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
