"""The review commands under ``shardcheck``: ``diff`` and ``report``, and the CI formats of ``check``
(SARIF, GitHub workflow commands, JUnit). cli.py adds their parsers and hands them the parsed arguments."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shardcheck.errors import UsageError
from shardcheck.report import escape

CI_FORMATS = ("sarif", "github", "junit")
DIFF_FORMATS = ("text", "json", "markdown", *CI_FORMATS, "html")
ENV_HELP = "a value the script reads from its environment (repeatable)"


def add_parsers(sub, memory_options, limit_options, env_pairs) -> None:
    """The ``diff`` and ``report`` subcommands (``memory_options``: cli's --device / --host-memory;
    ``limit_options``: its --time-limit / --memory-limit, the per-input guard of ``check``)."""
    diff = sub.add_parser(
        "diff",
        help="what a change to launch scripts changes: verdict, layout, placement, memory",
        description="shardcheck diff BEFORE AFTER, or shardcheck diff --git [REV | A..B] [PATH ...]: "
        "without --git two scripts on disk; with it, scripts as git holds them (REV "
        "against the work tree, default HEAD; A..B between two revisions; only the "
        "given paths, else every changed *.sh that holds a launch)",
    )
    diff.add_argument("paths", nargs="*", help="BEFORE AFTER, or with --git the scripts to compare")
    diff.add_argument(
        "--git",
        nargs="?",
        const="HEAD",
        default=None,
        metavar="REV",
        help="read the before side from git (REV, default HEAD; A..B for two revisions)",
    )
    diff.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help=ENV_HELP)
    diff.add_argument("--model-config", metavar="FILE", help="the model's HF config.json (overrides presets)")
    diff.add_argument("--format", choices=DIFF_FORMATS, default="text")
    diff.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of standard output")
    diff.add_argument("--exit-zero", action="store_true", help="exit 0 even when the after side has errors")
    diff.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="worker processes for the checks (default: one per CPU, at most 8, for 8 or more sides)",
    )
    memory_options(diff)
    limit_options(diff)
    report = sub.add_parser("report", help="a self-contained HTML report of launch scripts")
    report.add_argument("paths", nargs="*", help="launch scripts (default: the built-in example)")
    report.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help=ENV_HELP)
    report.add_argument("--model-config", metavar="FILE", help="the model's HF config.json (overrides presets)")
    report.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default="shardcheck-report.html",
        help="the HTML file to write (default: shardcheck-report.html)",
    )
    report.add_argument("--exit-zero", action="store_true", help="exit 0 even when a script has errors")
    memory_options(report)
    limit_options(report)
    diff.set_defaults(review_env=env_pairs)
    report.set_defaults(review_env=env_pairs)


def say(message: str) -> None:
    """A message on stderr as one line of text (report/escape.py): a value in it cannot start a line."""
    print(escape.text(message), file=sys.stderr)


def _emit(text: str, output: str | None, command: str = "diff") -> None:
    """The report on standard output, or in the ``-o`` file; a file that cannot be written (a missing folder,
    a directory, a full disk) is a usage error: one line."""
    if not output:
        print(text)
        return
    try:
        Path(output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        said = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"shardcheck {command}: -o {output}: cannot be written ({said})") from None


def render_check(fmt: str, results) -> str:
    """``check --format sarif|github|junit``."""
    from shardcheck.report.findings_source import check_items

    items = check_items(results)
    scripts = [r.path for r in results]
    verdicts = {r.path: r.verdict for r in results}  # the one verdict (verdict.py), as the text and JSON say it
    if fmt == "sarif":
        from shardcheck.report.sarif import render_sarif

        return render_sarif(items, scripts=scripts, command="check", verdicts=verdicts)
    if fmt == "github":
        from shardcheck.report.github import render_github, verdict_lines

        return "\n".join(line for line in (render_github(items), *verdict_lines(verdicts)) if line)
    from shardcheck.report.junit import render_junit

    return render_junit(items, scripts, verdicts=verdicts)


def run_diff(args: argparse.Namespace) -> int:
    from shardcheck.errors import InputError
    from shardcheck.review.diff import DiffOptions, diff_files, diff_git

    options = DiffOptions(
        env=args.review_env(args.env),
        model_config=args.model_config,
        device=args.device,
        host_memory=args.host_memory,
        jobs=args.jobs,
        time_limit=args.time_limit,
        memory_limit=args.memory_limit,
    )
    try:
        if args.device is not None:
            from shardcheck.memory.devices import find_device

            find_device(args.device)
        if args.git is not None:
            rev, paths = args.git, list(args.paths)
            if Path(rev).exists() and rev != "HEAD":  # `diff --git run.sh`: a path, the revision HEAD
                rev, paths = "HEAD", [rev, *paths]
            diffs = diff_git(rev, paths, options)
        elif len(args.paths) == 2:
            diffs = diff_files(args.paths[0], args.paths[1], options)
        else:
            raise UsageError("shardcheck diff: give BEFORE AFTER (two scripts), or --git [REV] [PATH ...]")
    except UsageError:
        raise
    except InputError as exc:
        raise UsageError(f"shardcheck diff: {exc}") from None
    _emit(render_diff(args.format, diffs), args.output, "diff")
    code = max((d.exit_code for d in diffs), default=0)
    return 0 if args.exit_zero and code == 1 else code


def render_diff(fmt: str, diffs) -> str:
    if fmt == "json":
        from shardcheck.report.diff_report import render_diff_json

        return render_diff_json(diffs)
    if fmt == "markdown":
        from shardcheck.report.markdown import render_diff_markdown

        return render_diff_markdown(diffs)
    if fmt == "html":
        from shardcheck.report.html import render_diff_html

        return render_diff_html(diffs)
    if fmt in CI_FORMATS:
        from shardcheck.report.findings_source import diff_items

        items = diff_items(diffs)
        scripts = [d.path for d in diffs if not d.skipped and d.after.result is not None]
        if fmt == "sarif":
            from shardcheck.report.sarif import render_sarif

            return render_sarif(items, scripts=scripts, command="diff")
        if fmt == "github":
            from shardcheck.report.github import render_github

            return render_github(items, [(d.path, d.summary) for d in diffs if not d.skipped])
        from shardcheck.report.junit import render_junit

        return render_junit(items, scripts, suite="shardcheck diff", summaries={d.path: d.summary for d in diffs})
    from shardcheck.report.diff_report import render_diff_text

    return render_diff_text(diffs)


def run_report(args: argparse.Namespace) -> int:
    from shardcheck.errors import InputError
    from shardcheck.report.html import render_check_html
    from shardcheck.review.diff import judge

    env = args.review_env(args.env)
    try:
        if args.device is not None:
            from shardcheck.memory.devices import find_device

            find_device(args.device)
    except InputError as exc:
        raise UsageError(f"shardcheck report: {exc}") from None
    sides = [
        judge(
            p,
            p,
            p,
            env=env,
            model_config=args.model_config,
            device=args.device,
            host_memory=args.host_memory,
            time_limit=args.time_limit,
            memory_limit=args.memory_limit,
        )
        for p in args.paths
    ]
    _emit(render_check_html(sides), args.output, "report")
    print(f"wrote {escape.text(args.output)}")
    code = max(s.result.exit_code for s in sides)
    return 0 if args.exit_zero and code == 1 else code
