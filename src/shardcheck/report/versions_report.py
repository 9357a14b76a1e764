"""``check --versions``: one row per bundled verl version and per run of megatron-core minors."""

from __future__ import annotations

import json

from shardcheck.report import escape


def _verdict(valid: bool | None) -> str:
    return {True: "valid", False: "will not start", None: "undecided"}[valid]


def _versions_text(versions: tuple[str, ...]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]} … {versions[-1]}"


def render_versions_text(matrices) -> str:
    out: list[str] = []
    for m in matrices:
        out.append(escape.file_name(m.path))
        if m.error:
            out.append(f"  error: {m.error}")
            continue
        out.append(f"  plain `check` judges with {m.reason or m.chosen}")
        rows = [r for r in m.rows if r.framework in ("verl", "verl-path")]
        if rows:
            out.append("  verl      keys       verdict          first reason")
        for r in rows:
            keys = "accepted" if r.accepted else "rejected"
            reason = f"{r.first.rule}: {r.first.message}" if r.first else ""
            if r.framework == "verl-path":
                out.append(f"  the verl tree at {r.directory} ({r.versions[0]}):")
            out.append(f"  {r.versions[0]:<9} {keys:<10} {_verdict(r.valid):<16} {reason}".rstrip())
        rows = [r for r in m.rows if r.framework == "megatron-core"]
        if rows:
            out.append(f"  megatron-core (layout rules, under verl {m.megatron_core_verl})")
        for r in rows:
            reason = f"{r.first.rule}: {r.first.message}" if r.first else ""
            verdict = "layout valid" if r.valid else "will not start"
            out.append(f"  {_versions_text(r.versions):<13} {verdict:<16} {reason}".rstrip())
    return escape.text_lines(out)


def _finding(f) -> dict | None:
    if f is None:
        return None
    return {"rule": f.rule, "severity": f.severity, "message": f.message, "path": f.path, "line": f.line}


def render_versions_json(matrices) -> str:
    doc = {"version": 1, "matrices": []}
    for m in matrices:
        doc["matrices"].append(
            {
                "path": m.path,
                "error": m.error,
                "chosen_verl_version": m.chosen,
                "reason": m.reason,
                "megatron_core_under_verl": m.megatron_core_verl,
                "rows": [
                    {
                        "framework": r.framework,
                        "versions": list(r.versions),
                        "accepted": r.accepted,
                        "valid": r.valid,
                        "first_error": _finding(r.first),
                        **({"directory": r.directory} if r.directory is not None else {}),
                    }
                    for r in m.rows
                ],
            }
        )
    return json.dumps(doc, indent=2)
