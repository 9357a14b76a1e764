"""The terminal report: framework, cluster, model, layout with origins, findings, verdict."""

from __future__ import annotations

from shardcheck.api import Result, summarize_layout
from shardcheck.job import FsdpLayout, Job, MegatronLayout
from shardcheck.origin import Origin, Traced
from shardcheck.report import escape


def origin_text(origin: Origin) -> str:
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
    rows = [
        ("TP", layout.tp),
        ("PP", layout.pp),
        ("CP", layout.cp),
        ("EP", layout.ep),
        ("ETP", layout.etp),
        ("VPP", layout.vpp),
    ]
    for name, t in rows:
        lines.append(f"    {name:<4}{_value(t):>6}   {origin_text(t.origin) if t.known else t.unknown}")

    def num(x):
        return "?" if x is None else str(x)

    lines.append(
        f"    {'DP':<4}{num(s['dp']):>6}   = world {num(s['world'])} / (TP {num(s['tp'])} · PP {num(s['pp'])} · "
        f"CP {num(s['cp'])})"
    )
    lines.append(
        f"    {'EDP':<4}{num(s['edp']):>6}   = world {num(s['world'])} / (ETP {num(s['etp'])} · EP {num(s['ep'])} · "
        f"PP {num(s['pp'])})"
    )
    split_from = ""
    if layout.first_stage_layers.known and layout.first_stage_layers.value is not None:
        split_from = f"   first stage {origin_text(layout.first_stage_layers.origin)}"
    lines.append(f"    layers per stage: {_stages(s['layers_per_stage'])}{split_from}")
    if all(s[k] for k in ("tp", "cp", "dp", "ep", "etp", "edp", "pp")) and s["ep"] > 1:
        tcd = s["tp"] * s["cp"] * s["dp"]
        lines.append(
            f"    expert grid: EP {s['ep']} · ETP {s['etp']} · EDP {s['edp']} · PP {s['pp']} = {world.value}; "
            f"per pipeline stage the experts fold over TP·CP·DP = {s['tp']}·{s['cp']}·{s['dp']} = {tcd} ranks "
            f"(MoE parallel folding, megatron-core ≥ 0.10), so EP is bounded by TP·CP·DP = {tcd}, not by DP = {s['dp']}"
        )
    return lines


def _engine_lines(job: Job, actor: MegatronLayout) -> list[str]:
    """The actor's layout, then every other Megatron engine: the same config, or what differs and why."""
    others = [e for e in job.layouts if e is not actor]
    same = [e.role for e in others if not actor.differences(e)]
    owner = job.group_owner
    notes = []
    if same:
        notes.append(
            f"the {' and '.join(same)} engine{'s' * (len(same) > 1)} resolve{'s' * (len(same) == 1)} to the same config"
        )
    if job.framework == "verl" and job.layout("ref") is None and job.ref_used.value is False:
        notes.append("ref not built: use_kl_loss and use_kl_in_reward are off")
    elif job.ref_in_actor is not None and job.ref_in_actor.value and job.ref_used.value:
        notes.append("ref: the actor with its LoRA adapters disabled, no ref engine")
    elif not others:
        notes.append("no ref")
    out = [f"  training layout (actor{'; ' + '; '.join(notes) if notes else ''})"]
    out.extend(_layout_lines(job, actor))
    for e in others:
        diffs = actor.differences(e)
        if not diffs:
            continue
        first = "; built first, its sizes create the process groups" if e is owner else ""
        own = f"its own section {e.key_prefix}" if job.framework == "verl" else "its own settings"
        out.append(
            f"  training layout ({e.role}{first}): {own} differ{'s' * (job.framework == 'verl')} from the actor's"
        )
        replaced = e.transformer_overrides_replaced
        if replaced is not None:
            out.append(
                f"    line {replaced.line}: {replaced.text} replaced the {e.key_prefix}.override_transformer_config "
                "inherited from the actor with a new dict: none of the actor's entries apply"
            )
        for name, mine, theirs in diffs:
            if theirs is None:
                why = f"not inherited (line {replaced.line})" if replaced is not None else "not set"
            elif not theirs.known:
                why = theirs.unknown
            elif replaced is not None and theirs.origin.kind == "default":
                why = f"megatron-core's default; not inherited (line {replaced.line})"
            else:
                why = origin_text(theirs.origin)
            out.append(f"    {name}: actor {_shown(mine)}, {e.role} {_shown(theirs)}   {why}")
        out.extend(_layout_lines(job, e))
    return out


def _shown(t: Traced | None) -> str:
    return "absent" if t is None else _value(t)


def _rollout_line(ro) -> str:
    """A rollout on GPUs of its own (slime): its engines, each of TP GPUs."""
    gpus, tp = ro.gpus, ro.tp
    if not (gpus.known and tp.known) or not gpus.value:
        return f"{_value(ro.engine)} on {_value(gpus)} GPUs, {_value(tp)} GPUs per engine"
    extra = ", ".join(
        part
        for part in (
            f"DP {_value(ro.dp)}" + (" (DP attention)" if ro.dp_in_engine else ""),
            f"EP {_value(ro.ep)}" if ro.ep is not None else "",
        )
        if part
    )
    return (
        f"{_value(ro.engine)}: {gpus.value // tp.value} engine{'s' * (gpus.value // tp.value != 1)} of "
        f"{tp.value} GPUs ({extra}) on {gpus.value} GPUs   {origin_text(tp.origin)}"
    )


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


def _step_lines(job: Job) -> list[str]:
    """The step-time model's prediction for the script's own layout (docs/step_time.md)."""
    if job.layout("actor") is None:
        return []
    from shardcheck.estimate.step_time import describe, predict

    step, why = predict(job)
    if step is None:
        return [f"  step time  not predicted: {why}"]
    return [f"  step time  {describe(step)} — model, docs/step_time.md"]


def _server_lines(job: Job) -> list[str]:
    """The reward model and distillation teachers: their own rollout layout and pool."""
    out = []
    for s in job.servers:
        size, pool = s.replica_size, s.pool
        where = f"its own pool {s.pool_key}.nnodes × n_gpus_per_node" if s.pool_key else "the trainer's pool"
        replicas = ""
        if size.known and pool.known and size.value:
            replicas = f"; {pool.value // size.value} replica(s) of {size.value} devices"
        out.append(
            f"  {s.role:<10} {_value(s.engine)} ({s.key_prefix}): TP {_value(s.tp)}, DP {_value(s.dp)}, "
            f"PP {_value(s.pp)}, EP {_value(s.ep)} on {where} = {_value(pool)}{replicas}"
        )
    return out


def _line_of(origin: Origin) -> str:
    """`` ← line N: text`` for a derived value written on a script line, else nothing."""
    line = origin.first_script_line()
    return f" ← line {line.line}: {line.text}" if origin.kind == "derived" and line is not None else ""


def _fsdp_lines(job: Job, layout: FsdpLayout) -> list[str]:
    """One FSDP engine: strategy, Ulysses SP, DP, the shard/replicate split, dtype and offload."""
    world = job.cluster.world
    shard, replicate = layout.shard(world), layout.replicate(world)
    offload = [
        name
        for name, t in (
            ("params", layout.param_offload),
            ("optimizer", layout.optimizer_offload),
            ("offload_policy", layout.offload_policy),
        )
        if t.known and t.value
    ]
    head = (
        f"  training layout ({layout.role}, {_value(layout.strategy)}): SP {_value(layout.sp)}, "
        f"DP {_value(layout.dp(world))}, shard over {_value(shard)} × {_value(replicate)} replica(s), "
        f"model_dtype {_value(layout.model_dtype)}, offload {', '.join(offload) or 'none'}"
    )
    return [
        head,
        f"    SP        {origin_text(layout.sp.origin)}{_line_of(layout.sp.origin)}",
        f"    fsdp_size {_value(layout.fsdp_size)} ({origin_text(layout.fsdp_size.origin)})",
    ]


# A report line: segments of (text, style); style None is plain. Styles: "path", "error", "warning",
# "info", "rule", "fix", "dim", "good", "bad", "heading". The terminal renderer (cli) colours them.
Line = list[tuple[str, str | None]]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _finding_lines(f, fallback: str) -> list[Line]:
    loc = escape.file_name(f"{f.path}:{f.line}" if f.path and f.line else (f.path or fallback))
    lines: list[Line] = [
        [(f"{loc}: ", "path"), (f.rule, "rule"), (" ", None), (f.severity, f.severity), (f": {f.message}", None)]
    ]
    if f.members:
        from shardcheck.rules.grouping import join_labels

        covers = join_labels(list(f.covers)) if f.covers else ""
        count = f"{len(f.members)} findings of one cause"
        what = f"{covers} ({count})" if covers else count
        lines.append([("  covers: ", "dim"), (what, None)])
    if f.fix:
        lines.append([("  fix: ", "fix"), (f.fix, None)])
    lines.extend(_proof_lines(f))
    return lines


def _proof_lines(f) -> list[Line]:
    """What the fix's proof found (plan/fixes.py): the lines that apply it, or why the fix text's lines do not."""
    if f.fix_check in ("valid", "proven"):
        if f.fix_source == "text":
            return [[("  proven: ", "good"), (f.fix_note or "", None)]]
        return [[("  proven fix: ", "good"), (" ".join(f.fix_lines), None), (f" ({f.fix_note})", "dim")]]
    if f.fix_check == "disproved":
        return [[("  fix check: ", "bad"), (f.fix_note or "", None)]]
    if f.fix_check == "no-single-key":
        return [[("  fix check: ", "dim"), (f.fix_note or "", "dim")]]
    return []


def nearest_lines(r: Result) -> list[Line]:
    """The planner's nearest valid layouts, named when no single key fixes the script."""
    if not r.nearest:
        return []
    out: list[Line] = [
        [
            ("  nearest valid layouts", "heading"),
            (" (no single key fixes every error; each re-read and re-judged)", "dim"),
        ]
    ]
    for i, n in enumerate(r.nearest, 1):
        out.append([(f"    {i}. {n['changed_keys']} changed key(s), {n['step_seconds']:,.1f} s a step", "fix")])
        out.extend([[("         ", None), (line, None)] for line in n["overrides"]])
    return out


def result_lines(r: Result, *, quiet: bool = False, builtin: bool = False, verbose: bool = False) -> list[Line]:
    """The report of one result as styled lines; ``quiet``: the findings alone, one per line (plus fixes);
    ``verbose``: also the settings file used."""
    if quiet or r.job is None:
        out: list[Line] = []

        for f in r.findings:
            if quiet and f.severity == "info" and r.job is None:
                continue  # a skipped file is not worth a line in quiet mode
            out.extend(_finding_lines(f, r.path))
        if r.job is None and not r.findings and r.error:  # the INPUT-* finding was ignored by the settings
            out.append([(f"{escape.file_name(r.path)}: ", "path"), (r.status, "dim")])
        return out
    return [
        [(line, _style_of(line))] if not isinstance(line, list) else line for line in _full_report(r, builtin, verbose)
    ]


def _style_of(line: str) -> str | None:
    return "heading" if line and not line.startswith(" ") else None


def _rollout_engines(job) -> list[str]:
    """The rollout engines the job starts (its rollout and its servers), in the order met."""
    names = [job.rollout.engine] if job.rollout is not None else []
    names += [server.engine for server in job.servers]
    return list(dict.fromkeys(t.value for t in names if t.known and t.value in ("vllm", "sglang")))


def _full_report(r: Result, builtin: bool, verbose: bool = False) -> list:
    out: list = []
    out.append(escape.file_name(r.path) + (" (built-in example)" if builtin else ""))
    if verbose:
        out.append(
            f"  settings   {r.settings.source or r.settings.refused or 'none (no [tool.shardcheck] in the work tree)'}"
        )
    job = r.job
    out.append(
        f"  framework  {job.framework} {job.framework_version} ({job.entry}, config {job.config_name}; "
        f"defaults from {job.config_source})"
    )
    if job.version_reason:
        out.append(f"    version   {job.version_reason}")
    if job.layouts and job.megatron_core_reason:
        out.append(f"    layout    rules of {job.megatron_core_reason}")
    for engine in _rollout_engines(job):
        reason = job.vllm_reason if engine == "vllm" else job.sglang_reason
        if reason:
            out.append(f"    {engine:<9} rules of {reason}")
    c = job.cluster
    nodes = (
        _plural(c.nnodes.value, "node")
        if c.nnodes.known and isinstance(c.nnodes.value, int)
        else f"{_value(c.nnodes)} nodes"
    )
    out.append(f"  cluster    {nodes} × {_value(c.devices_per_node)} devices ({_value(c.device)}) = {_value(c.world)}")
    out.append(f"    nodes     {origin_text(c.nnodes.origin) if c.nnodes.known else c.nnodes.unknown}")
    devices = c.devices_per_node
    out.append(f"    devices   {origin_text(devices.origin) if devices.known else devices.unknown}")
    if job.model is not None:
        m = job.model
        moe = f", {m.num_experts} experts (top-{m.num_experts_per_tok})" if m.is_moe else ""
        out.append(
            f"  model      {m.name} ({m.source}): {m.num_hidden_layers} layers, {m.num_attention_heads} heads, "
            f"{m.num_key_value_heads} KV heads{moe}"
        )
    else:
        out.append(f"  model      not found: {job.model_problem}")
    out.append(f"  strategy   {_value(job.strategy)}")
    actor = job.layout("actor")
    if actor is not None:
        out.extend(_engine_lines(job, actor))
    if job.rollout is not None and job.rollout.gpus is not None:
        out.append(f"  rollout    {_rollout_line(job.rollout)}")
    out.extend(_rollout_lines(job))
    out.extend(_server_lines(job))
    out.extend(_step_lines(job))
    for lay in job.fsdp_layouts:
        out.extend(_fsdp_lines(job, lay))
    if r.skipped:
        out.append(f"  skipped (no model): {', '.join(r.skipped)}")
    out.append("  findings" if r.findings else "  findings: none")
    for f in r.findings:
        out.extend([[("    ", None), *line] for line in _finding_lines(f, r.path)])
    out.extend(nearest_lines(r))
    errors = sum(f.severity == "error" for f in r.findings)
    warnings = sum(f.severity == "warning" for f in r.findings)
    verdict = r.verdict
    style = {True: "good", False: "bad", None: "warning"}[verdict.valid]
    out.append(
        [
            ("  verdict: ", None),
            (verdict.sentence, style),
            (f" ({_plural(errors, 'error')}, {_plural(warnings, 'warning')})", None),
        ]
    )
    return out


def plain(lines: list[Line]) -> str:
    """Styled lines as plain text: every segment escaped (report/escape.py), so each stays one line."""
    return "\n".join("".join(escape.text(t) for t, _ in line) for line in lines)


def render_result(r: Result, *, quiet: bool = False, builtin: bool = False) -> str:
    """One result as plain text (a blank line ends a full report)."""
    text = plain(result_lines(r, quiet=quiet, builtin=builtin))
    return text + "\n" if not quiet and r.job is not None else text


def summary_line(results: list[Result]) -> Line:
    """``3 files: 2 judged, 1 skipped (no launch command), 0 failed; 1 error, 2 warnings``."""
    judged = sum(r.status == "judged" for r in results)
    skipped = sum(r.status == "skipped" for r in results)
    failed = sum(r.status == "failed" for r in results)
    errors = sum(f.severity == "error" for r in results for f in r.findings)
    warnings = sum(f.severity == "warning" for r in results for f in r.findings)
    return [
        (f"{_plural(len(results), 'file')}: {judged} judged, {skipped} skipped (no launch command), ", None),
        (f"{failed} failed", "bad" if failed else None),
        ("; ", None),
        (_plural(errors, "error"), "error" if errors else None),
        (", ", None),
        (_plural(warnings, "warning"), "warning" if warnings else None),
    ]


def statistics_lines(results: list[Result]) -> list[Line]:
    """Findings per rule, most frequent first (``--statistics``), as ruff prints them."""
    from collections import Counter

    from shardcheck.rules.registry import all_rules

    counts = Counter((f.rule, f.severity) for r in results for f in r.findings)
    titles = {rid: rule.title for rid, rule in all_rules().items()}
    width = max((len(rid) for rid, _ in counts), default=0)
    return [
        [
            (f"{n:>5}  ", None),
            (rid.ljust(width), "rule"),
            ("  ", None),
            (sev.ljust(7), sev),
            (f"  {titles.get(rid, '')}", None),
        ]
        for (rid, sev), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0]))
    ]


def render_text(results: list[Result]) -> str:
    """Every result's full report, as plain text (the Python API's view of ``shardcheck check``)."""
    return "\n".join(render_result(r) for r in results)
