"""The terminal report: framework, cluster, model, layout with origins, findings, verdict."""

from __future__ import annotations

from shardcheck.api import Result, summarize_layout
from shardcheck.job import FsdpLayout, Job, MegatronLayout
from shardcheck.origin import Origin, Traced


def _where(origin: Origin) -> str:
    """Where a value came from, for people: the script line (and what it says), or the default."""
    line = origin.first_script_line()
    if origin.kind == "derived":
        return origin.text or ""
    parts: list[str] = []
    if origin.kind == "default":
        parts.append(origin.text or "default")
        if line is not None:
            parts.append(f"← line {line.line}: {line.text}" if line.text else f"← line {line.line}")
        return " ".join(parts)
    if origin.kind == "env":
        return origin.describe()
    if line is not None:
        elsewhere = any(o.location and o.path != line.path for o in _walk(origin))  # a sourced file
        text = f"{line.path}:{line.line}" if elsewhere else f"line {line.line}"
        if line.text:
            text += f": {line.text}"
        if line.kind == "script" and line.text and "environment" in line.text:
            return text
        hops = [o for o in origin.via if o.location and o.location != line.location]
        if hops:
            text += f" (via line {', '.join(str(h.line) for h in hops[:2])})"
        envs = [o for o in _walk(origin) if o.kind == "env"]
        if envs:
            text += f" ({envs[0].describe()})"
        return text
    return origin.describe()


def _walk(origin: Origin):
    yield origin
    for step in origin.via:
        yield from _walk(step)


def _value(t: Traced) -> str:
    if not t.known:
        return "?"
    return "-" if t.value is None else str(t.value)


def _stages(stages: list[int] | None) -> str:
    if not stages:
        return "?"
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


def _layout_lines(job: Job, layout: MegatronLayout) -> list[str]:
    s = summarize_layout(job, layout)
    world = job.cluster.world
    lines = []
    rows = [("TP", layout.tp), ("PP", layout.pp), ("CP", layout.cp), ("EP", layout.ep), ("ETP", layout.etp),
            ("VPP", layout.vpp)]
    for name, t in rows:
        lines.append(f"    {name:<4}{_value(t):>6}   {_where(t.origin) if t.known else t.unknown}")

    def num(x):
        return "?" if x is None else str(x)

    lines.append(f"    {'DP':<4}{num(s['dp']):>6}   = world {num(s['world'])} / (TP {num(s['tp'])} · PP {num(s['pp'])} · "
                 f"CP {num(s['cp'])})")
    lines.append(f"    {'EDP':<4}{num(s['edp']):>6}   = world {num(s['world'])} / (ETP {num(s['etp'])} · EP {num(s['ep'])} · "
                 f"PP {num(s['pp'])})")
    split_from = ""
    if layout.first_stage_layers.known and layout.first_stage_layers.value is not None:
        split_from = f"   first stage {_where(layout.first_stage_layers.origin)}"
    lines.append(f"    layers per stage: {_stages(s['layers_per_stage'])}{split_from}")
    if all(s[k] for k in ("tp", "cp", "dp", "ep", "etp", "edp", "pp")) and s["ep"] > 1:
        tcd = s["tp"] * s["cp"] * s["dp"]
        lines.append(
            f"    expert grid: EP {s['ep']} · ETP {s['etp']} · EDP {s['edp']} · PP {s['pp']} = {world.value}; "
            f"per pipeline stage the experts fold over TP·CP·DP = {s['tp']}·{s['cp']}·{s['dp']} = {tcd} ranks "
            f"(MoE parallel folding, megatron-core ≥ 0.10), so EP is bounded by TP·CP·DP = {tcd}, not by DP = {s['dp']}"
        )
    return lines


def _rollout_line(ro) -> str:
    """A rollout on GPUs of its own (slime): its engines, each of TP GPUs."""
    gpus, tp = ro.gpus, ro.tp
    if not (gpus.known and tp.known) or not gpus.value:
        return f"{_value(ro.engine)} on {_value(gpus)} GPUs, {_value(tp)} GPUs per engine"
    extra = ", ".join(part for part in (
        f"DP {_value(ro.dp)}" + (" (DP attention)" if ro.dp_in_engine else ""),
        f"EP {_value(ro.ep)}" if ro.ep is not None else "") if part)
    return (f"{_value(ro.engine)}: {gpus.value // tp.value} engine{'s' * (gpus.value // tp.value != 1)} of "
            f"{tp.value} GPUs ({extra}) on {gpus.value} GPUs   {_where(tp.origin)}")


def _rollout_lines(job: Job) -> list[str]:
    """The rollout engine's layout: TP, DP, EP, PP and the replicas it makes of the trainer's ranks."""
    r = job.rollout
    if r is None or job.framework != "verl":
        return []
    ep = job.value("actor_rollout_ref.rollout.expert_parallel_size")
    sizes = [("TP", r.tp), ("DP", r.dp), ("EP", ep), ("PP", r.pp)]
    text = ", ".join(f"{n} {_value(t)}" for n, t in sizes)
    world = job.cluster.world
    if all(t.known and isinstance(t.value, int) for t in (r.tp, r.dp, r.pp, world)):
        size = r.tp.value * r.dp.value * r.pp.value
        count = f"{world.value // size}" if world.value % size == 0 else f"{world.value / size:.2f} (does not tile)"
        text += f"; {count} replica{'s' * (count != '1')} of {size} devices"
    return [f"  rollout    {_value(r.engine)}: {text}"]


def _line_of(origin: Origin) -> str:
    """`` ← line N: text`` for a derived value written on a script line, else nothing."""
    line = origin.first_script_line()
    return f" ← line {line.line}: {line.text}" if origin.kind == "derived" and line is not None else ""


def _fsdp_lines(job: Job, layout: FsdpLayout) -> list[str]:
    """One FSDP engine: strategy, Ulysses SP, DP, the shard/replicate split, dtype and offload."""
    world = job.cluster.world
    shard, replicate = layout.shard(world), layout.replicate(world)
    offload = [name for name, t in (("params", layout.param_offload), ("optimizer", layout.optimizer_offload),
                                    ("offload_policy", layout.offload_policy)) if t.known and t.value]
    head = (f"  training layout ({layout.role}, {_value(layout.strategy)}): SP {_value(layout.sp)}, "
            f"DP {_value(layout.dp(world))}, shard over {_value(shard)} × {_value(replicate)} replica(s), "
            f"model_dtype {_value(layout.model_dtype)}, offload {', '.join(offload) or 'none'}")
    return [
        head,
        f"    SP        {_where(layout.sp.origin)}{_line_of(layout.sp.origin)}",
        f"    fsdp_size {_value(layout.fsdp_size)} ({_where(layout.fsdp_size.origin)})",
    ]


def render_text(results: list[Result]) -> str:
    out: list[str] = []
    for r in results:
        out.append(r.path)
        if r.error is not None:
            out.append(f"  error: {r.error}")
            out.append("")
            continue
        job = r.job
        out.append(f"  framework  {job.framework} {job.framework_version} ({job.entry}, config {job.config_name}; "
                   f"defaults from {job.config_source})")
        if job.version_reason:
            out.append(f"    version   {job.version_reason}")
        if job.layouts and job.megatron_core_reason:
            out.append(f"    layout    rules of {job.megatron_core_reason}")
        c = job.cluster
        out.append(f"  cluster    {_value(c.nnodes)} nodes × {_value(c.devices_per_node)} devices"
                   f" ({_value(c.device)}) = {_value(c.world)}")
        out.append(f"    nodes     {_where(c.nnodes.origin) if c.nnodes.known else c.nnodes.unknown}")
        out.append(f"    devices   {_where(c.devices_per_node.origin) if c.devices_per_node.known else c.devices_per_node.unknown}")
        if job.model is not None:
            m = job.model
            moe = f", {m.num_experts} experts (top-{m.num_experts_per_tok})" if m.is_moe else ""
            out.append(f"  model      {m.name} ({m.source}): {m.num_hidden_layers} layers, {m.num_attention_heads} heads, "
                       f"{m.num_key_value_heads} KV heads{moe}")
        else:
            out.append(f"  model      not found: {job.model_problem}")
        out.append(f"  strategy   {_value(job.strategy)}")
        actor = job.layout("actor")
        ref = job.layout("ref")
        if actor is not None:
            if ref is None:
                note = ("ref not built: use_kl_loss and use_kl_in_reward are off"
                        if job.framework == "verl" and job.ref_used.value is False else "no ref")
            elif ref.sizes() == actor.sizes():
                note = "the ref engine has the same sizes"
            else:
                note = "the ref engine differs, see below"
            out.append(f"  training layout (actor; {note})")
            out.extend(_layout_lines(job, actor))
            if ref is not None and ref.sizes() != actor.sizes():
                out.append("  training layout (ref; built first, its sizes create the process groups)")
                out.extend(_layout_lines(job, ref))
        if job.rollout is not None and job.rollout.gpus is not None:
            out.append(f"  rollout    {_rollout_line(job.rollout)}")
        out.extend(_rollout_lines(job))
        for lay in job.fsdp_layouts:
            out.extend(_fsdp_lines(job, lay))
        if r.skipped:
            out.append(f"  skipped (no model): {', '.join(r.skipped)}")
        out.append("  findings" if r.findings else "  findings: none")
        for f in r.findings:
            loc = f"{f.path}:{f.line}" if f.path and f.line else r.path
            out.append(f"    {loc}: {f.rule} {f.severity}: {f.message}")
            if f.fix:
                out.append(f"      fix: {f.fix}")
        errors = sum(f.severity == "error" for f in r.findings)
        warnings = sum(f.severity == "warning" for f in r.findings)
        unknown = sum(f.rule == "VALUE-UNKNOWN" for f in r.findings)
        verdict = {True: "valid", False: "will not start",
                   None: f"undecided: {unknown} value{'s' * (unknown != 1)} a rule needs unknown"}[r.valid]
        if r.valid is None and errors:
            verdict = f"will not start as read; {verdict}"
        if r.valid is False and r.layout_valid:
            verdict += "; the FSDP layout itself is valid" if job.fsdp_layouts else "; the Megatron-Core layout itself is valid"
        out.append(f"  verdict: {verdict} ({errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)})")
        out.append("")
    return "\n".join(out)
