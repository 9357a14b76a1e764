"""``shardcheck diff`` as text and as JSON (version 1, documented in the README)."""

from __future__ import annotations

import json

from shardcheck.report import escape
from shardcheck.report.json_report import finding_to_dict, result_to_dict
from shardcheck.review.diff import LABELS, LAYOUT_FIELDS, ROLLOUT_FIELDS, ScriptDiff, verdict_word

DIFF_JSON_VERSION = 1  # of the diff document; its check results are those of `check --format json` (its version)
MEMORY_TERMS = (
    "weights",
    "grads",
    "optimizer",
    "gathered",
    "activations",
    "logits",
    "ref_weights",
    "critic_state",
    "workspace",
    "overhead",
)
CLUSTER_FIELDS = ("world", "nnodes", "devices_per_node")
ROLLOUT_TERMS = ("weights", "kv_cache", "reserve", "training_resident")


def diff_to_dict(d: ScriptDiff) -> dict:
    b, a = d.before, d.after
    return {
        "path": d.path,
        "before_label": b.label,
        "after_label": a.label,
        "skipped": d.skipped,
        "summary": d.summary,
        "before": result_to_dict(b.result) if b.result is not None else None,
        "after": result_to_dict(a.result) if a.result is not None else None,
        "changes": [{"what": c.what, "before": c.before, "after": c.after} for c in d.changes],
        "findings": {
            "new": [finding_to_dict(f) for f in d.new],
            "resolved": [finding_to_dict(f) for f in d.resolved],
            "kept": [finding_to_dict(f) for f in d.kept],
        },
        "layouts": {"before": b.layouts, "after": a.layouts},
        "placement": {"before": b.placement, "after": a.placement},
        "rollout": {"before": b.rollout, "after": a.rollout},
        "memory": {
            "before": _stages(b.memory),
            "after": _stages(a.memory),
            "device": {"before": _device(b.memory), "after": _device(a.memory)},
            "rollout": {"before": (b.memory or {}).get("rollout"), "after": (a.memory or {}).get("rollout")},
        },
    }


def _stages(memory: dict | None) -> list:
    return memory["stages"] if memory else []


def _device(memory: dict | None) -> dict | None:
    if not memory:
        return None
    return {"name": memory["device"], "capacity_bytes": memory["capacity_bytes"], "note": memory["device_note"]}


def render_diff_json(diffs: list[ScriptDiff]) -> str:
    from shardcheck.report.json_report import JSON_VERSION

    return escape.json_text(
        json.dumps(
            {"version": DIFF_JSON_VERSION, "check_version": JSON_VERSION, "diffs": [diff_to_dict(d) for d in diffs]},
            indent=2,
            ensure_ascii=False,
        )
    )


def value_text(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return stages_text(v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def stages_text(stages: list) -> str:
    """``[5, 6, 6, 6, 5]`` → ``5, 6 ×3, 5``."""
    out: list[str] = []
    i = 0
    while i < len(stages):
        j = i
        while j + 1 < len(stages) and stages[j + 1] == stages[i]:
            j += 1
        count = j - i + 1
        out.append(f"{stages[i]} ×{count}" if count > 2 else ", ".join([str(stages[i])] * count))
        i = j + 1
    return ", ".join(out)


def layout_rows(d: ScriptDiff) -> list[tuple[str, str, str, bool]]:
    """(label, before, after, changed) for every engine's sizes and the rollout, in report order."""
    rows: list[tuple[str, str, str, bool]] = []
    for role in dict.fromkeys([*d.before.layouts, *d.after.layouts]):
        lb, la = d.before.layouts.get(role) or {}, d.after.layouts.get(role) or {}
        strategy = la.get("strategy") or lb.get("strategy")
        for name in LAYOUT_FIELDS:
            if name == "strategy" or (lb.get(name) is None and la.get(name) is None):
                continue
            if name in CLUSTER_FIELDS and rows and role != "actor":
                continue  # one cluster, shown once
            label = LABELS.get(name, name) if name in CLUSTER_FIELDS else f"{role} {LABELS.get(name, name)}"
            rows.append((label, value_text(lb.get(name)), value_text(la.get(name)), lb.get(name) != la.get(name)))
        if strategy and lb.get("strategy") != la.get("strategy"):
            rows.append((f"{role} engine", value_text(lb.get("strategy")), value_text(la.get("strategy")), True))
    ob, oa = d.before.rollout or {}, d.after.rollout or {}
    for name in ROLLOUT_FIELDS:
        if ob.get(name) is None and oa.get(name) is None:
            continue
        rows.append(
            (
                f"rollout {LABELS.get(name, name)}" if name != "engine" else "rollout engine",
                value_text(ob.get(name)),
                value_text(oa.get(name)),
                ob.get(name) != oa.get(name),
            )
        )
    return rows


def placement_rows(d: ScriptDiff) -> list[tuple[str, str, str, bool]]:
    pb = d.before.placement or {}
    pa = d.after.placement or {}
    rows = []
    for kind in dict.fromkeys([*pb.get("groups", {}), *pa.get("groups", {})]):
        gb, ga = pb.get("groups", {}).get(kind), pa.get("groups", {}).get(kind)
        tb, ta = _groups_text(gb, pb), _groups_text(ga, pa)
        rows.append((LABELS.get(kind, kind.upper()), tb, ta, (gb or {}).get("crossing") != (ga or {}).get("crossing")))
    return rows


def _groups_text(g: dict | None, placement: dict) -> str:
    if g is None:
        return "-"
    if g["size"] <= 1:
        return "size 1"
    if not g["crossing"]:
        return f"{g['size']}: all inside a node"
    return f"{g['size']}: {g['crossing']} of {g['groups']} cross nodes"


def memory_rows(memory: dict | None) -> tuple[list[str], list[list[str]]]:
    """A header and one row per training stage class: GiB per term, total, % of the device."""
    if not memory or not memory["stages"]:
        return [], []
    seen = [t for s in memory["stages"] for t in s["bytes"]]
    terms = [t for t in [*MEMORY_TERMS, *dict.fromkeys(seen)] if any(s["bytes"].get(t) for s in memory["stages"])]
    terms = list(dict.fromkeys(terms))
    head = ["stage", "layers", *terms, "allocated", "total", "of device"]
    rows = [
        [
            s["label"],
            str(s["layers"]),
            *(_gib(s["bytes"].get(t)) for t in terms),
            f"{s['allocated_gib']:.2f}",
            f"{s['total_gib']:.2f}",
            f"{s['percent']:.0f}%",
        ]
        for s in memory["stages"]
    ]
    return head, rows


def no_estimate_reason(memory: dict | None) -> str:
    if memory and memory.get("problems"):
        return "; ".join(memory["problems"])
    return "the layout is not valid or not known"


def rollout_memory_text(memory: dict | None) -> str | None:
    """The rollout phase on one device: weights, KV cache, reserve, training state left there; total and %."""
    ro = (memory or {}).get("rollout")
    if ro is None:
        return None
    parts = ", ".join(f"{k.replace('_', ' ')} {_gib(v)}" for k, v in ro["bytes"].items() if v)
    return f"rollout ({ro['engine']}): {parts}; total {ro['total_gib']:.2f} GiB ({ro['percent']:.0f}%)"


def _gib(n) -> str:
    return "-" if not n else f"{n / (1 << 30):.2f}"


def _table(head: list[str], rows: list[list[str]], indent: str) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    out = [indent + "  ".join(c.rjust(w) for c, w in zip(head, widths))]
    for r in rows:
        out.append(indent + "  ".join(c.rjust(w) for c, w in zip(r, widths)))
    return out


def _finding_line(f) -> str:
    loc = f"{f.path}:{f.line}" if f.path and f.line else (f.path or "")
    return f"{loc}: {f.rule} {f.severity}: {f.message}"


def render_diff_text(diffs: list[ScriptDiff]) -> str:
    out: list[str] = []
    if not diffs:
        return "no launch scripts changed"
    for d in diffs:
        out.append(f"{escape.file_name(d.path)}  ({d.before.label} → {d.after.label})")
        if d.skipped:
            out.append("  not a launch script on either side; skipped")
            out.append("")
            continue
        out.append(f"  verdict    {verdict_word(d.before.result)} → {verdict_word(d.after.result)}")
        for side in (d.before, d.after):
            if side.result is not None and side.result.error is not None:
                out.append(f"    {side.label}: {side.result.error}")
        rows = layout_rows(d)
        if rows:
            width = max(len(r[0]) for r in rows)
            wb = max(len(r[1]) for r in rows)
            out.append(f"  layout     {'':<{width - 9}}{'before':>{wb}}    after")
            for label, vb, va, changed in rows:
                out.append(f"    {label:<{width}}  {vb:>{wb}}  {'→' if changed else ' '} {va}")
        prows = placement_rows(d)
        if prows:
            n = (d.after.placement or d.before.placement)["devices_per_node"]
            out.append(f"  placement  (nodes of {n} devices; groups of the engine that builds them)")
            width = max(len(r[0]) for r in prows)
            wb = max(len(r[1]) for r in prows)
            for label, vb, va, changed in prows:
                out.append(f"    {label:<{width}}  {vb:>{wb}}  {'→' if changed else ' '} {va}")
        for side in (d.before, d.after):
            head, mrows = memory_rows(side.memory)
            if not head:
                if side.result is not None and side.result.job is not None:
                    out.append(f"  memory {side.label}: no training estimate ({no_estimate_reason(side.memory)})")
                continue
            m = side.memory
            out.append(
                f"  memory {side.label} (per device, GiB; {m['device']}, {m['capacity_bytes'] / (1 << 30):.0f} GiB)"
            )
            out.extend(_table(head, mrows, "    "))
            ro = rollout_memory_text(m)
            if ro:
                out.append(f"    {ro}")
        out.append(f"  findings   {len(d.new)} new, {len(d.resolved)} resolved, {len(d.kept)} kept")
        for word, items in (("new", d.new), ("resolved", d.resolved), ("kept", d.kept)):
            for f in items:
                out.append(f"    {word:<8} {_finding_line(f)}")
                if f.fix and word != "resolved":
                    out.append(f"             fix: {f.fix}")
        out.append(f"  summary    {d.summary}")
        out.append("")
    return escape.text_lines(out).rstrip() + "\n"
