"""``shardcheck diff --format markdown``: a pull-request comment or a GitHub job summary."""

from __future__ import annotations

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
    return text.replace("|", "\\|").replace("\n", " ")


def _finding(f) -> str:
    loc = f"`{f.path}:{f.line}`" if f.path and f.line else ""
    return f"{loc} **{f.rule}** {f.severity}: {_cell(f.message)}" + (f" — fix: {_cell(f.fix)}" if f.fix else "")


def render_diff_markdown(diffs: list[ScriptDiff]) -> str:
    out = ["## shardcheck: launch scripts changed", ""]
    shown = [d for d in diffs if not d.skipped]
    if not shown:
        return "\n".join(out + ["No launch scripts changed.", ""])
    out += ["| script | before | after | summary |", "|---|---|---|---|"]
    for d in shown:
        wb, wa = verdict_word(d.before.result), verdict_word(d.after.result)
        out.append(f"| `{_cell(d.path)}` | {ICONS.get(wb, '')} {wb} | {ICONS.get(wa, '')} {wa} | {_cell(d.summary)} |")
    out.append("")
    for d in shown:
        out += [f"### `{d.path}` ({d.before.label} → {d.after.label})", "", f"**{d.summary}**", ""]
        for side in (d.before, d.after):
            if side.result is not None and side.result.error is not None:
                out += [f"- {side.label}: {_cell(side.result.error)}"]
        rows = layout_rows(d)
        if rows:
            out += ["| | before | after |", "|---|---:|---:|"]
            for label, vb, va, changed in rows:
                out.append(f"| {label} | {vb} | {'**' + va + '**' if changed else va} |")
            out.append("")
        prows = placement_rows(d)
        if prows:
            n = (d.after.placement or d.before.placement)["devices_per_node"]
            out += [f"Placement on nodes of {n} devices:", "", "| group | before | after |", "|---|---|---|"]
            for label, vb, va, changed in prows:
                out.append(f"| {label} | {vb} | {'**' + va + '**' if changed else va} |")
            out.append("")
        for side in (d.before, d.after):
            head, mrows = memory_rows(side.memory)
            if not head:
                if side.result is not None and side.result.job is not None:
                    out += [f"Memory {side.label}: no training estimate ({_cell(no_estimate_reason(side.memory))})", ""]
                continue
            m = side.memory
            out += [
                (
                    f"<details><summary>memory {side.label}: per device, GiB ({m['device']}, "
                    f"{m['capacity_bytes'] / (1 << 30):.0f} GiB)</summary>"
                ),
                "",
                "| " + " | ".join(head) + " |",
                "|" + "---:|" * len(head),
            ]
            out += ["| " + " | ".join(r) + " |" for r in mrows]
            ro = rollout_memory_text(m)
            if ro:
                out += ["", ro]
            out += ["", "</details>", ""]
        out.append(f"Findings: {len(d.new)} new, {len(d.resolved)} resolved, {len(d.kept)} kept")
        out.append("")
        for word, items in (("new", d.new), ("resolved", d.resolved), ("kept", d.kept)):
            for f in items:
                out.append(f"- {word}: {_finding(f)}")
        out.append("")
    return "\n".join(out)
