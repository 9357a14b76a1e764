"""Every start-up check of megatron-core's ``TransformerConfig.__post_init__`` and Megatron-LM's ``validate_args``,
read with ``ast`` (each ``assert`` and each ``raise``, with its condition and its message), and the coverage list
built from them (docs/coverage.md).

The references (read as text, never imported):
- ``TransformerConfig.__post_init__``: megatron/core/transformer/transformer_config.py of the megatron-core
  minors in ``REFERENCES`` (unpacked wheels under ``$MEGATRON_CORE_VERSIONS_DIR/<minor>/``,
  tools/fetch_reference_wheels.py): the newest supported minor and the one verl 0.9.1's images install;
- ``validate_args``: megatron/training/arguments.py of Megatron-LM at ``MEGATRON_LM_TAG`` (a git directory
  of NVIDIA/Megatron-LM, ``--megatron-lm-git``, or ``$MEGATRON_LM_GIT``).

The mapping, one entry per check (tools/data/megatron_checks.json, keyed by function, condition and
message): the shardcheck rule id that judges it, or why none does (``status``: ``covered``, ``not-coverable``,
``not-yet``). tests/test_megatron_coverage.py fails when a reference check has no entry, an entry names a rule
that does not exist, or docs/coverage.md is not what ``render`` writes.

    python tools/megatron_checks.py --update    # re-extract (new checks get status not-yet), rewrite the doc
    python tools/megatron_checks.py             # rewrite docs/coverage.md from the mapping only
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPING = ROOT / "tools" / "data" / "megatron_checks.json"
DOC = ROOT / "docs" / "coverage.md"
# megatron-core minors whose TransformerConfig is listed: the newest supported, and verl 0.9.1's (its 0.9 line's
# images install core_v0.18.0: frameworks/verl/versions.py VERL_MEGATRON_CORE).
REFERENCES = ("0.19", "0.18")
MEGATRON_LM_TAG = "core_v0.19.0"
TC_PATH = "megatron/core/transformer/transformer_config.py"
ARGS_PATH = "megatron/training/arguments.py"
STATUSES = ("covered", "not-coverable", "not-yet")


@dataclass(frozen=True)
class Check:
    function: str  # "TransformerConfig.__post_init__" | "validate_args"
    kind: str  # "assert" | "raise"
    condition: str  # the assert's test, or the innermost enclosing `if` test of a raise ("" when none)
    message: str  # the message as written (f-strings unparsed), "" for a bare assert / raise
    line: int

    @property
    def key(self) -> str:
        return f"{self.function} | {self.condition} | {self.message}"


def _message(node: ast.AST | None) -> str:
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Call) and node.args:  # raise ValueError("...") / ValueError(f"...")
        return _message(node.args[0])
    if isinstance(node, ast.Call | ast.Name | ast.Attribute):
        return ast.unparse(node)
    return ast.unparse(node)


def _checks_in(func: ast.FunctionDef, name: str) -> list[Check]:
    out: list[Check] = []

    def visit(node: ast.AST, conditions: tuple[str, ...]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef) and node is not func:
            return  # nested helpers run later, if at all
        if isinstance(node, ast.Assert):
            out.append(Check(name, "assert", ast.unparse(node.test), _message(node.msg), node.lineno))
        elif isinstance(node, ast.Raise):
            out.append(Check(name, "raise", conditions[-1] if conditions else "", _message(node.exc), node.lineno))
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            for child in node.body:
                visit(child, (*conditions, test))
            for child in node.orelse:
                visit(child, (*conditions, f"not ({test})"))
            return
        for child in ast.iter_child_nodes(node):
            visit(child, conditions)

    visit(func, ())
    return out


def extract(source: str, qualname: str) -> list[Check]:
    """The checks of function ``qualname`` (``Class.method`` or ``function``) in ``source``."""
    tree = ast.parse(source)
    owner, _, name = qualname.rpartition(".")
    scope = tree.body
    if owner:
        scope = next(n.body for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner)
    func = next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)
    return _checks_in(func, qualname)


def transformer_config_checks(wheels: Path, minor: str) -> list[Check]:
    text = (wheels / minor / TC_PATH).read_text(encoding="utf-8")
    return extract(text, "TransformerConfig.__post_init__")


def validate_args_checks(git_dir: Path, tag: str = MEGATRON_LM_TAG) -> list[Check]:
    text = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{tag}:{ARGS_PATH}"], check=True, capture_output=True, text=True
    ).stdout
    return extract(text, "validate_args")


def reference_checks(wheels: Path | None, git_dir: Path | None) -> dict[str, dict]:
    """Every check of the references, by key, with where it is (the sources it appears in)."""
    found: dict[str, dict] = {}
    sources: list[tuple[str, list[Check]]] = []
    if wheels is not None:
        sources += [(f"megatron-core {m}", transformer_config_checks(wheels, m)) for m in REFERENCES]
    if git_dir is not None:
        sources.append((f"Megatron-LM {MEGATRON_LM_TAG}", validate_args_checks(git_dir)))
    for where, checks in sources:
        for c in checks:
            entry = found.setdefault(
                c.key,
                {"function": c.function, "kind": c.kind, "condition": c.condition, "message": c.message, "in": {}},
            )
            entry["in"].setdefault(where, c.line)
    return found


def load_mapping() -> dict:
    return json.loads(MAPPING.read_text(encoding="utf-8"))


def render(mapping: dict) -> str:
    """docs/coverage.md from the mapping."""
    checks = mapping["checks"]
    lines = [
        "# Which megatron-core / Megatron-LM start-up checks shardcheck judges",
        "",
        "Generated by `python tools/megatron_checks.py` from `tools/data/megatron_checks.json`; do not edit by hand",
        "(tests/test_megatron_coverage.py fails when it drifts, when a check of the references is missing from the",
        "mapping, or when a mapped rule id does not exist).",
        "",
        "References: `TransformerConfig.__post_init__` (megatron/core/transformer/transformer_config.py) of "
        + ", ".join(f"megatron-core {m}" for m in REFERENCES)
        + f" (0.18: the one verl 0.9.1's images install); `validate_args` (megatron/training/arguments.py) of "
        f"Megatron-LM {MEGATRON_LM_TAG}. Each `assert` and each `raise` is one check (a raise's condition is its "
        "innermost enclosing `if`). Not in these tables: the checks Megatron-LM makes after `validate_args` while it "
        "builds the optimizer's schedule (megatron/training/training.py `get_optimizer_param_scheduler`, "
        "megatron/core/optimizer_param_scheduler.py `OptimizerParamScheduler.__init__`), judged by MLM-TRAIN-LENGTH, "
        "MLM-LR-NEEDED, MLM-LR-STEPS, MLM-LR-RANGE, MLM-WD-INCR and MLM-SCHED-OVERRIDE.",
        "",
        "Statuses: **covered** — the rule named judges it before the launch; **not-coverable** — a launch cannot "
        "reach it, or it depends on what only the run knows (the installed software, the device, the data); "
        "**not-yet** — reachable from a launch and static, but no rule judges it yet.",
        "",
    ]
    functions = ("TransformerConfig.__post_init__", "validate_args")
    lines += ["| function | checks | covered | not-coverable | not-yet |", "|---|---|---|---|---|"]
    for fn in (*functions, None):
        sel = [c for c in checks if fn is None or c["function"] == fn]
        counts = [sum(c["status"] == s for c in sel) for s in STATUSES]
        label = fn or "**all**"
        lines.append(f"| {label} | {len(sel)} | " + " | ".join(map(str, counts)) + " |")
    reasons: dict[tuple[str, str], int] = {}
    for c in checks:
        if c["status"] != "covered":
            reasons[(c["status"], c["reason"])] = reasons.get((c["status"], c["reason"]), 0) + 1
    lines += [
        "",
        "Why not covered (the feature named is one shardcheck does not model; the reasons of the not-yet checks were",
        "first given by the words of their condition and message, the covered ones mapped by hand):",
        "",
        "| status | reason | checks |",
        "|---|---|---|",
    ]
    for (status, reason), n in sorted(reasons.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
        lines.append(f"| {status} | {_cell(reason)} | {n} |")
    for fn in functions:
        lines += ["", f"## {fn}", "", "| where (line) | check | status | rule or reason |", "|---|---|---|---|"]
        for c in sorted((c for c in checks if c["function"] == fn), key=lambda c: min(c["in"].values())):
            where = ", ".join(f"{k.split()[-1]}:{v}" for k, v in c["in"].items())
            text = c["message"] or "(bare)"
            check = f"`{_cell(c['condition'] or '—')}` → {_cell(text)}" if c["kind"] == "raise" else None
            check = check or f"assert `{_cell(c['condition'])}`" + (f": {_cell(c['message'])}" if c["message"] else "")
            what = f"`{c['rule']}`" if c.get("rule") else _cell(c.get("reason", ""))
            lines.append(f"| {where} | {check} | {c['status']} | {what} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > 220:
        text = text[:217] + "…"
    return text.replace("|", "\\|").replace("`", "'")


def update(mapping: dict, found: dict[str, dict]) -> dict:
    """The mapping with the references' checks: known keys keep their status; new ones are not-yet; keys no
    reference has any more are dropped."""
    old = {c["key"]: c for c in mapping.get("checks", [])}
    checks = []
    for key, entry in found.items():
        prev = old.get(key, {})
        row = {"key": key, **entry, "status": prev.get("status", "not-yet")}
        for field in ("rule", "reason"):
            if prev.get(field):
                row[field] = prev[field]
        if "rule" not in row and "reason" not in row:
            row["reason"] = "not reviewed yet"
        checks.append(row)
    return {**mapping, "checks": checks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="re-extract the checks from the references")
    parser.add_argument("--wheels", default=os.environ.get("MEGATRON_CORE_VERSIONS_DIR"))
    parser.add_argument("--megatron-lm-git", default=os.environ.get("MEGATRON_LM_GIT"))
    args = parser.parse_args()
    mapping = load_mapping() if MAPPING.exists() else {"checks": []}
    if args.update:
        if not args.wheels or not args.megatron_lm_git:
            print("--update needs --wheels (or MEGATRON_CORE_VERSIONS_DIR) and --megatron-lm-git", file=sys.stderr)
            return 2
        mapping = update(mapping, reference_checks(Path(args.wheels), Path(args.megatron_lm_git)))
        MAPPING.parent.mkdir(parents=True, exist_ok=True)
        MAPPING.write_text(json.dumps(mapping, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    DOC.write_text(render(mapping), encoding="utf-8")
    print(f"{len(mapping['checks'])} checks; wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
