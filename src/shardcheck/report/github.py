"""GitHub Actions workflow commands: ``::error file=F,line=L,title=T::message`` per finding.

Escaping (report/escape.py) as the runner parses them (actions/toolkit, packages/core/src/command.ts): in
the message ``%``, CR and LF become ``%25``, ``%0D``, ``%0A``; in property values also ``:`` and ``,``
(``%3A``, ``%2C``). Each value is escaped as text first, so a value's own newline shows as ``\\n`` and
only the line between the message and its fix is a line of the annotation. Lines that are not commands
(``diff``'s summaries) are text whose file name cannot start a command. Severities map to ``error``,
``warning`` and ``notice``. ``check`` adds one ``::notice`` per script
with its verdict (verdict.py).
"""

from __future__ import annotations

from shardcheck.report import escape
from shardcheck.report.findings_source import Item

COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}


def render_github(items: list[Item], summary: list[tuple[str, str]] | None = None) -> str:
    """The commands of ``items``, then one text line per (file name, summary) of ``summary``."""
    lines = []
    for it in items:
        props = []
        if it.path:
            props.append(f"file={escape.github_property(escape.text(it.path))}")
        if it.line:
            props.append(f"line={it.line}")
        title = escape.text(it.rule or "shardcheck: input cannot be used")
        if it.baseline == "new":
            title += " (new)"
        props.append(f"title={escape.github_property(title)}")
        message = escape.text(it.message) + (f"\nfix: {escape.text(it.fix)}" if it.fix else "")
        lines.append(f"::{COMMANDS[it.severity]} {','.join(props)}::{escape.github_data(message)}")
    lines.extend(f"{escape.file_name(path)}: {escape.text(text)}" for path, text in summary or [])
    return "\n".join(lines)


def verdict_lines(verdicts: dict) -> list[str]:
    """One ``::notice`` per script with its verdict (verdict.py), as the text report words it."""
    lines = []
    for script, v in verdicts.items():
        props = f"file={escape.github_property(escape.text(script))},"
        props += f"title={escape.github_property('shardcheck verdict: ' + v.word)}"
        lines.append(f"::notice {props}::{escape.github_data(escape.text(v.sentence))}")
    return lines
