"""``shardcheck plan`` output: a table of the fastest valid layouts with their override lines, or JSON."""

from __future__ import annotations

import json
import math

from shardcheck.memory.devices import GIB
from shardcheck.report import escape


def _layout(plan) -> dict:
    t, m = plan.layout, plan.memory
    return {
        "tp": t.tp,
        "pp": t.pp,
        "cp": t.cp,
        "ep": t.ep,
        "etp": t.etp if t.etp is not None else t.tp,
        "vpp": t.vpp,
        "first": t.first,
        "last": t.last,
        "order": t.order,
        "recompute": m.recompute[0],
        "distributed_optimizer": m.distributed_optimizer,
        "offload": m.offload,
    }


def _rollout(plan) -> dict | None:
    r = plan.rollout
    if r is None:
        return None
    ro = plan.job.rollout
    engine = ro.engine.value if ro is not None and ro.engine.known else None
    world = plan.job.cluster.world.value
    return {"engine": engine, "tp": r.tp, "dp": r.dp, "ep": r.ep, "replicas": world // (r.tp * r.dp) if world else None}


def plan_dict(plan, *, current: bool = False) -> dict:
    from shardcheck.estimate.step_time import seconds_json

    step = plan.step
    out = {
        "layout": _layout(plan),
        "rollout": _rollout(plan),
        "peak_bytes": plan.peak_bytes,
        "step_seconds": seconds_json(step),
        "tflops_per_device": round(step.tflops_per_device, 1),
    }
    if not current:
        out = {
            "rank": plan.rank,
            **out,
            "overrides": list(plan.lines),
            "remove": [{"flag": flag, "where": where} for flag, _, where in plan.removed],
            "changed_keys": len(plan.changes),
        }
    return out


def render_plan_json(result) -> str:
    current = None
    if result.current is not None:
        current = {
            **plan_dict(result.current, current=True),
            "valid": result.current_valid,
            "rank": result.current_rank,
            "faster_layouts": result.rank_floor,
            "errors": [f.rule for f in result.current_errors],
        }
    doc = {
        "version": 1,
        "path": result.job.path,
        "device": result.device.name,
        "margin": result.margin,
        "plans": [plan_dict(p) for p in result.plans],
        "current": current,
        "input_errors": [{"rule": f.rule, "line": f.line, "message": f.message} for f in result.input_errors],
        "searched": dict(result.counts),
        "rollouts_rejected": [{"rule": rule, "message": m} for rule, m in result.rollouts_rejected.items()],
        "untimed_rollouts": [
            {"tp": r.tp, "dp": r.dp, "ep": r.ep, "why": why} for why, r in result.untimed_rollouts.items()
        ],
        "seconds": round(result.seconds, 3),
        "proven": result.proven,
    }
    return json.dumps(doc, indent=1)


def _sizes(plan) -> str:
    t = plan.layout
    text = f"TP {t.tp} PP {t.pp} CP {t.cp} EP {t.ep} ETP {t.etp if t.etp is not None else t.tp}"
    if t.vpp:
        text += f" VPP {t.vpp}"
    if t.first is not None or t.last is not None:
        text += f" first {t.first if t.first is not None else '='} last {t.last if t.last is not None else '='}"
    if t.order != "tp-cp-ep-dp-pp":
        text += f" order {t.order}"
    return text


def _memory(plan) -> str:
    m = plan.memory
    text = f"recompute {m.recompute[0]}"
    if not m.distributed_optimizer:
        text += ", no dist-opt"
    if m.offload:
        text += ", offload"
    return text


def _row(label: str, plan) -> list[str]:
    r = plan.rollout
    ro = f"TP {r.tp} DP {r.dp} EP {r.ep}" if r is not None else "-"
    s = plan.step
    return [
        label,
        _sizes(plan),
        _memory(plan),
        ro,
        f"{plan.peak_bytes / GIB:.1f}",
        f"{s.total:,.1f}",
        f"{s.rollout:,.1f}",
        f"{s.train:,.1f}",
    ]


def _standing(result) -> str:
    """Where the script's own (valid) layout stands, in words."""
    if result.current_rank == 1:
        return "the script's own layout is the fastest the search found"
    if result.current_rank:
        return f"the script's own layout is valid; {result.current_rank - 1} distinct layout(s) are faster"
    return (
        f"the script's own layout is valid and slower than at least {result.rank_floor} distinct layouts "
        "(the search stopped before reaching it)"
    )


PHASES = {
    "rollout": "rollout",
    "sync": "weight sync",
    "old_log_prob": "old log-probs",
    "ref_log_prob": "reference log-probs",
    "update": "update",
    "offload": "offload",
}


def why_faster(best, current, current_valid: bool = True) -> str:
    """Why #1 is faster than the script's own layout, and by how much per phase, in words."""
    a, b = current.step, best.step
    if not all(math.isfinite(s) and s > 0 for s in (a.total, b.total)):
        return "#1's step time cannot be compared with the script's (one of them is not finite)"
    ratio = a.total / b.total
    head = f"#1 takes {b.total:,.1f} s a step against the script's {a.total:,.1f} s " + (
        f"({ratio:.2f}× faster)"
        if ratio >= 1
        else f"({1 / ratio:.2f}× slower: within the model's error, with fewer changes)"
        if current_valid
        else f"({1 / ratio:.2f}× slower, but the script's own layout does not start or fit)"
    )
    names = list(dict.fromkeys([*a.phases, *b.phases]))
    moved = sorted(
        ((a.phases.get(n, 0.0) - b.phases.get(n, 0.0), n) for n in names),
        key=lambda x: -abs(x[0]),
    )
    parts = [
        f"{PHASES.get(n, n.replace('_', ' '))} {a.phases.get(n, 0.0):,.1f} → {b.phases.get(n, 0.0):,.1f} s"
        for d, n in moved
        if abs(d) >= 0.005 * a.total
    ]
    changed = _changed_words(current, best)
    return head + (f"; it changes {changed}" if changed else "") + (": " + ", ".join(parts) if parts else "")


def _changed_words(current, best) -> str:
    def sizes(p) -> dict:
        t, m, r = p.layout, p.memory, p.rollout
        out = {"TP": t.tp, "PP": t.pp, "CP": t.cp, "EP": t.ep, "ETP": t.etp if t.etp is not None else t.tp}
        out.update({"VPP": t.vpp or 1, "recompute": m.recompute[0], "offload": "on" if m.offload else "off"})
        if r is not None:
            out.update({"rollout TP": r.tp, "rollout DP": r.dp, "rollout EP": r.ep})
        return out

    a, b = sizes(current), sizes(best)
    return ", ".join(f"{k} {a[k]} → {b[k]}" for k in b if k in a and a[k] != b[k])


def render_plan_text(result) -> str:
    lines = [
        f"{escape.file_name(result.job.path)}: {result.job.framework} on {result.job.cluster.world.value} × "
        f"{result.device.name} "
        f"(peak ≤ {1 - result.margin:.0%} of {result.device.memory_gib:.0f} GiB)"
    ]
    for f in result.input_errors:
        lines.append(f"  note: line {f.line}: {f.rule} ({f.message}) — no layout changes this; plans ignore it")
    head = ["rank", "layout", "memory", "rollout", "peak GiB", "step s", "rollout s", "train s"]
    rows = [_row(str(p.rank), p) for p in result.plans]
    if result.current is not None:
        label = "script" if result.current_valid else "script ✗"
        rows.append(_row(label, result.current))
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines.append("  " + "  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for r in rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)))
    if result.current is not None and result.current_valid:
        lines.append("  " + _standing(result))
    if not result.current_valid and (result.current is not None or result.current_errors):
        why = ", ".join(sorted({f.rule for f in result.current_errors})) or "its peak exceeds the margin"
        lines.append(f"  the script's own layout does not start or fit: {why}")
        if result.current_errors:
            lines.append(f"    first: {result.current_errors[0].message}")
    if not result.plans and result.rollouts_rejected:
        lines.append("  no rollout layout starts, whatever the training layout: the rollout rules reject each one")
        lines.extend(f"    {rule}: {message}" for rule, message in result.rollouts_rejected.items())
    elif not result.plans:
        lines.append("  no layout in the searched space passes every rule and fits; see docs/plan.md")
    if result.plans and result.current is not None:
        lines.append("  " + why_faster(result.plans[0], result.current, result.current_valid))
    for p in result.plans:
        lines.append(f"\n#{p.rank}: {len(p.changes)} changed key(s)")
        lines.extend(
            f"    delete {flag}{' and its value' if value else ''} ({where})" for flag, value, where in p.removed
        )
        lines.extend(f"    {'append ' if p.removed else ''}{line}" for line in p.lines)
    c = result.counts
    lines.append(
        f"\nsearched {c.get('layouts', 0):,} training layouts and {c.get('rollouts', 0)} rollout layouts; "
        f"{c.get('memory_options', 0):,} layout and memory choices could hold their weights, gradients and optimizer "
        f"state; estimated the memory and step time of {c.get('timed', 0):,} and checked {c.get('judged', 0):,} "
        f"against every rule, in {result.seconds:.1f} s"
        + ("; each plan above was read again with its lines and checked again" if result.proven else "")
    )
    untimed = result.untimed_rollouts
    if untimed:
        lines.append(
            f"left out {c.get('rollouts_untimed', 0)} rollout layout(s) whose rollout time is unknown (never ranked "
            "as free): "
            + "; ".join(
                f"e.g. TP {r.tp} DP {r.dp} EP {r.ep}: {why.removeprefix('rollout: ')}"
                for why, r in list(untimed.items())[:3]
            )
        )
    return escape.text_lines(lines)
