"""GitHub Actions workflow commands: ``::error file=F,line=L,title=T::message`` per finding.

Escaping as the runner parses them (actions/toolkit, packages/core/src/command.ts): in the message
``%``, CR and LF become ``%25``, ``%0D``, ``%0A``; in property values also ``:`` and ``,`` (``%3A``,
``%2C``). Severities map to ``error``, ``warning`` and ``notice``. ``check`` adds one ``::notice`` per script
with its verdict (verdict.py).
"""

from __future__ import annotations

from shardcheck.report.findings_source import Item

COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(items: list[Item], summary: list[str] | None = None) -> str:
    lines = []
    for it in items:
        props = []
        if it.path:
            props.append(f"file={_prop(it.path)}")
        if it.line:
            props.append(f"line={it.line}")
        title = it.rule or "shardcheck: input cannot be used"
        if it.baseline == "new":
            title += " (new)"
        props.append(f"title={_prop(title)}")
        message = it.message + (f"\nfix: {it.fix}" if it.fix else "")
        lines.append(f"::{COMMANDS[it.severity]} {','.join(props)}::{_data(message)}")
    lines.extend(summary or [])
    return "\n".join(lines)


def verdict_lines(verdicts: dict) -> list[str]:
    """One ``::notice`` per script with its verdict (verdict.py), as the text report words it."""
    return [
        f"::notice file={_prop(script)},title={_prop('shardcheck verdict: ' + v.word)}::{_data(v.sentence)}"
        for script, v in verdicts.items()
    ]
