"""The versioned JSON report (``--format json``), documented in the README."""

from __future__ import annotations

import json

from shardcheck.api import Result

JSON_VERSION = 1


def result_to_dict(r: Result) -> dict:
    job = r.job
    doc: dict = {"path": r.path, "framework": job.framework if job else None, "valid": r.valid,
                 "layout_valid": r.layout_valid}
    if r.error is not None:
        doc["error"] = r.error
    doc["layout"] = r.layout_summary("actor")
    if job is not None:
        ref = job.layout("ref")
        actor = job.layout("actor")
        if ref is not None and actor is not None and ref.sizes() != actor.sizes():
            doc["ref_layout"] = r.layout_summary("ref")
        fsdp_ref = job.fsdp_layout("ref")
        if fsdp_ref is not None and r.layout_summary("ref") != doc["layout"]:
            doc["ref_layout"] = r.layout_summary("ref")
        if job.fsdp_layout("critic") is not None:
            doc["critic_layout"] = r.layout_summary("critic")
        doc["framework_version"] = job.framework_version
        doc["version_source"] = job.version_source
        doc["accepted_versions"] = list(job.accepted_versions)
        doc["megatron_core_version"] = job.megatron_core_version if job.layouts else None
        m = job.model
        doc["model"] = None if m is None else {
            "name": m.name,
            "source": m.source,
            "num_hidden_layers": m.num_hidden_layers,
            "num_attention_heads": m.num_attention_heads,
            "num_key_value_heads": m.num_key_value_heads,
            "num_experts": m.num_experts,
        }
    else:
        doc["model"] = None
    doc["findings"] = [
        {"rule": f.rule, "severity": f.severity, "message": f.message, "path": f.path, "line": f.line, "fix": f.fix,
         "conditional": f.conditional}
        for f in r.findings
    ]
    doc["skipped"] = list(r.skipped)
    return doc


def render_json(results: list[Result]) -> str:
    return json.dumps({"version": JSON_VERSION, "results": [result_to_dict(r) for r in results]}, indent=2)
