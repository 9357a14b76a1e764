"""``shardcheck diff --format markdown``: a pull-request comment or a GitHub job summary.

Every value goes through report/escape.py: text as ``escape.markdown`` (no raw HTML, link, image or
mention from a script reaches the comment), file names as ``escape.markdown_code`` spans."""

from __future__ import annotations

from shardcheck.report import escape
from shardcheck.report.diff_report import (
    layout_rows,
    memory_rows,
    no_estimate_reason,
    placement_rows,
    rollout_memory_text,
)
from shardcheck.review.diff import ScriptDiff, verdict_word

ICONS = {
    "valid": "✅",
    "will not start": "❌",
    "undecided": "❔",
    "absent": "∅",
    "not a launch": "·",
    "unusable input": "⚠️",
}


def _cell(text: str) -> str:
    return escape.markdown(text)


def _finding(f) -> str:
    loc = escape.markdown_code(f"{f.path}:{f.line}") if f.path and f.line else ""
    return f"{loc} **{f.rule}** {f.severity}: {_cell(f.message)}" + (f" — fix: {_cell(f.fix)}" if f.fix else "")


def _row(label: str, before: str, after: str, changed: bool) -> str:
    after = _cell(after)
    return f"| {_cell(label)} | {_cell(before)} | {'**' + after + '**' if changed else after} |"


def render_diff_markdown(diffs: list[ScriptDiff]) -> str:
    out = ["## shardcheck: launch scripts changed", ""]
    shown = [d for d in diffs if not d.skipped]
    if not shown:
        return "\n".join(out + ["No launch scripts changed.", ""])
    out += ["| script | before | after | summary |", "|---|---|---|---|"]
    for d in shown:
        wb, wa = verdict_word(d.before.result), verdict_word(d.after.result)
        out.append(
            f"| {escape.markdown_code(d.path, cell=True)} | {ICONS.get(wb, '')} {wb} | "
            f"{ICONS.get(wa, '')} {wa} | {_cell(d.summary)} |"
        )
    out.append("")
    for d in shown:
        labels = f"{_cell(d.before.label)} → {_cell(d.after.label)}"
        out += [f"### {escape.markdown_code(d.path)} ({labels})", "", f"**{_cell(d.summary)}**", ""]
        for side in (d.before, d.after):
            if side.result is not None and side.result.error is not None:
                out += [f"- {_cell(side.label)}: {_cell(side.result.error)}"]
        rows = layout_rows(d)
        if rows:
            out += ["| | before | after |", "|---|---:|---:|"]
            for label, vb, va, changed in rows:
                out.append(_row(label, vb, va, changed))
            out.append("")
        prows = placement_rows(d)
        if prows:
            n = (d.after.placement or d.before.placement)["devices_per_node"]
            out += [f"Placement on nodes of {n} devices:", "", "| group | before | after |", "|---|---|---|"]
            for label, vb, va, changed in prows:
                out.append(_row(label, vb, va, changed))
            out.append("")
        for side in (d.before, d.after):
            head, mrows = memory_rows(side.memory)
            if not head:
                if side.result is not None and side.result.job is not None:
                    out += [
                        f"Memory {_cell(side.label)}: no training estimate ({_cell(no_estimate_reason(side.memory))})",
                        "",
                    ]
                continue
            m = side.memory
            out += [
                (
                    f"<details><summary>memory {_cell(side.label)}: per device, GiB ({_cell(m['device'])}, "
                    f"{m['capacity_bytes'] / (1 << 30):.0f} GiB)</summary>"
                ),
                "",
                "| " + " | ".join(head) + " |",
                "|" + "---:|" * len(head),
            ]
            out += ["| " + " | ".join(r) + " |" for r in mrows]
            ro = rollout_memory_text(m)
            if ro:
                out += ["", _cell(ro)]
            out += ["", "</details>", ""]
        out.append(f"Findings: {len(d.new)} new, {len(d.resolved)} resolved, {len(d.kept)} kept")
        out.append("")
        for word, items in (("new", d.new), ("resolved", d.resolved), ("kept", d.kept)):
            for f in items:
                out.append(f"- {word}: {_finding(f)}")
        out.append("")
    return "\n".join(out)
