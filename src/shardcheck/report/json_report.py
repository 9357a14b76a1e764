"""The versioned JSON report (``--format json``): documented in docs/json.md, schema in
docs/schema/check-report.schema.json (a test validates every JSON output of the test suite against it).

Version 2 (shardcheck 0.1, this branch): ``status`` per result, INPUT-* findings for skipped and failed
inputs, grouped findings (``covers``, ``group``), ``layout_origins`` per engine and a ``summary``.
"""

from __future__ import annotations

import json

from shardcheck.api import Result
from shardcheck.origin import Traced

JSON_VERSION = 2


def finding_to_dict(f) -> dict:
    doc = {
        "rule": f.rule,
        "severity": f.severity,
        "message": f.message,
        "path": f.path,
        "line": f.line,
        "fix": f.fix,
        "fix_lines": list(f.fix_lines),
        "fix_check": f.fix_check,
        "fix_note": f.fix_note,
        "conditional": f.conditional,
        "covers": list(f.covers),
        "group": [
            {"message": m.message, "path": m.path, "line": m.line, "role": m.role, "scope": m.scope} for m in f.members
        ],
    }
    return doc


def origin_dict(t: Traced) -> dict:
    """A value and where it came from: the text report's phrase, and the file and line to edit."""
    from shardcheck.report.text import origin_text

    line = t.origin.first_script_line()
    return {
        "value": t.value if t.known else None,
        "known": t.known,
        "unknown": t.unknown,
        "kind": t.origin.kind,
        "path": line.path if line else None,
        "line": line.line if line else None,
        "origin": origin_text(t.origin) if t.known else t.unknown,
    }


def layout_origins(r: Result) -> dict:
    """Per engine (actor, ref, critic, rollout) the origin of every layout value; ``cluster`` for the world."""
    job = r.job
    if job is None:
        return {}
    c = job.cluster
    out: dict = {
        "cluster": {
            "nnodes": origin_dict(c.nnodes),
            "devices_per_node": origin_dict(c.devices_per_node),
            "device": origin_dict(c.device),
            "world": origin_dict(c.world),
        }
    }
    for lay in job.layouts:
        out[lay.role] = {
            name: origin_dict(t)
            for name, t in (
                ("tp", lay.tp),
                ("pp", lay.pp),
                ("cp", lay.cp),
                ("ep", lay.ep),
                ("etp", lay.etp),
                ("etp_setting", lay.etp_setting),
                ("vpp", lay.vpp),
                ("dp", lay.dp(c.world)),
                ("edp", lay.edp(c.world)),
                ("first_stage_layers", lay.first_stage_layers),
                ("last_stage_layers", lay.last_stage_layers),
            )
        }
    for lay in job.fsdp_layouts:
        out[lay.role] = {
            name: origin_dict(t)
            for name, t in (
                ("strategy", lay.strategy),
                ("sp", lay.sp),
                ("fsdp_size", lay.fsdp_size),
                ("dp", lay.dp(c.world)),
                ("shard", lay.shard(c.world)),
                ("replicate", lay.replicate(c.world)),
                ("model_dtype", lay.model_dtype),
                ("param_offload", lay.param_offload),
                ("optimizer_offload", lay.optimizer_offload),
                ("offload_policy", lay.offload_policy),
            )
        }
    ro = job.rollout
    if ro is not None:
        values = [("engine", ro.engine), ("tp", ro.tp), ("dp", ro.dp), ("pp", ro.pp)]
        values += [
            (name, t)
            for name, t in (("ep", ro.ep), ("dp_attention", ro.dp_attention), ("gpus", ro.gpus))
            if t is not None
        ]
        out["rollout"] = {name: origin_dict(t) for name, t in values}
    return out


def result_to_dict(r: Result) -> dict:
    job = r.job
    verdict = r.verdict
    doc: dict = {
        "path": r.path,
        "status": r.status,
        "framework": job.framework if job else None,
        "valid": verdict.valid,
        "verdict": verdict.word,
        "verdict_text": verdict.sentence,
        "not_judged": [n.to_dict() for n in verdict.not_judged],
        "layout_valid": r.layout_valid,
    }
    if r.error is not None:
        doc["error"] = r.error
    doc["settings"] = r.settings.source  # the pyproject.toml (or --config file) whose [tool.shardcheck] applied
    doc["layout"] = r.layout_summary("actor")
    if job is not None:
        actor = job.layout("actor")
        if actor is not None:
            differences = {}
            for e in job.layouts:
                diffs = actor.differences(e) if e is not actor else []
                if diffs:
                    doc[f"{e.role}_layout"] = r.layout_summary(e.role)
                    differences[e.role] = [_difference(name, mine, theirs) for name, mine, theirs in diffs]
            if differences:
                doc["engine_differences"] = differences
        fsdp_ref = job.fsdp_layout("ref")
        if fsdp_ref is not None and r.layout_summary("ref") != doc["layout"]:
            doc["ref_layout"] = r.layout_summary("ref")
        if job.fsdp_layout("critic") is not None:
            doc["critic_layout"] = r.layout_summary("critic")
        doc["step_seconds"] = _step(job)
        doc["framework_version"] = job.framework_version
        doc["version_source"] = job.version_source
        doc["accepted_versions"] = list(job.accepted_versions)
        doc["verl_path"] = (
            None
            if job.verl_path is None
            else {"directory": job.verl_path[0], "matches": job.verl_path[1], "exact": job.verl_path[2]}
        )
        doc["megatron_core_version"] = job.megatron_core_version if job.layouts else None
        doc["rollout_engine_versions"] = (
            {
                "vllm": {"version": job.vllm_version, "reason": job.vllm_reason},
                "sglang": {"version": job.sglang_version, "reason": job.sglang_reason},
            }
            if job.vllm_reason or job.sglang_reason
            else None
        )
        m = job.model
        doc["model"] = (
            None
            if m is None
            else {
                "name": m.name,
                "source": m.source,
                "num_hidden_layers": m.num_hidden_layers,
                "num_attention_heads": m.num_attention_heads,
                "num_key_value_heads": m.num_key_value_heads,
                "num_experts": m.num_experts,
            }
        )
    else:
        doc["model"] = None
    doc["layout_origins"] = layout_origins(r)
    doc["findings"] = [finding_to_dict(f) for f in r.findings]
    if r.nearest:
        doc["nearest"] = r.nearest
    doc["skipped"] = list(r.skipped)
    return doc


def _step(job) -> dict | None:
    """The step-time model's prediction for the script's layout (docs/step_time.md); None when not timed."""
    if job.layout("actor") is None:
        return None
    import math

    from shardcheck.estimate.step_time import predict, seconds_json

    step, _ = predict(job)
    if step is None or not math.isfinite(step.total):  # a phase that cannot run: the text report says which
        return None
    return {
        **seconds_json(step, 3),
        "device": step.device,
        "tflops_per_device": round(step.tflops_per_device, 1),
    }


def _difference(name: str, actor, other) -> dict:
    """One setting in which an engine differs from the actor: both values, and the line that decided it."""

    def shown(t):
        return None if t is None or not t.known else t.value

    line = other.origin.first_script_line() if other is not None else None
    return {
        "setting": name,
        "actor": shown(actor),
        "value": shown(other),
        "line": line.line if line is not None else None,
        "source": other.origin.describe() if other is not None else "absent",
    }


def summary(results: list[Result]) -> dict:
    return {
        "files": len(results),
        "judged": sum(r.status == "judged" for r in results),
        "skipped": sum(r.status == "skipped" for r in results),
        "failed": sum(r.status == "failed" for r in results),
        "errors": sum(f.severity == "error" for r in results for f in r.findings),
        "warnings": sum(f.severity == "warning" for r in results for f in r.findings),
        "infos": sum(f.severity == "info" for r in results for f in r.findings),
    }


def render_json(results: list[Result]) -> str:
    return json.dumps(
        {"version": JSON_VERSION, "results": [result_to_dict(r) for r in results], "summary": summary(results)},
        indent=2,
    )
