"""Proven fixes (plan/fixes.py): every fix ``check`` prints for an error is re-judged by every rule on the script
re-read with the fix's lines; a fix that does not hold is marked; the nearest valid layouts are named when no
single key makes the job valid. Each verdict is checked here by re-reading the script independently."""

from __future__ import annotations

import json
from dataclasses import replace

from launches import verl_qwen3_moe

from shardcheck.api import check, resolve_script
from shardcheck.plan.fixes import fix_alternatives, prove_fixes
from shardcheck.rules.registry import run_rules


def _script(tmp_path, name="run.sh", **sizes):
    path = tmp_path / name
    path.write_text(verl_qwen3_moe(**sizes))
    return path


def _errors(path, lines) -> set[str]:
    job = resolve_script(path, extra_args=tuple(w for line in lines for w in line.split()))
    return {f.rule for f in run_rules(job)[0] if f.severity == "error"}


def test_fix_texts_name_override_lines():
    assert fix_alternatives("a.b.c=1", "verl") == [("a.b.c=1",)]
    assert fix_alternatives("+x.enable_dp_attention=True, or y.data_parallel_size=1", "verl") == [
        ("+x.enable_dp_attention=True",),
        ("y.data_parallel_size=1",),
    ]
    assert fix_alternatives("TP must divide 32: 1, 2, 4, 8", "verl") == []
    assert fix_alternatives("remove a.b.ppo_micro_batch_size", "verl") == []
    assert fix_alternatives("--seq-length 4096", "megatron-lm") == [("--seq-length 4096",)]
    assert fix_alternatives("--global-batch-size 64 (a multiple of 8)", "megatron-lm") == [("--global-batch-size 64",)]
    assert fix_alternatives("add --kv-channels HEAD_DIM", "megatron-lm") == []
    assert fix_alternatives("--sglang-pp-size in 1, 2, 4", "slime") == []
    assert fix_alternatives("add --group-query-attention", "megatron-lm") == [("--group-query-attention",)]


def test_single_key_fixes_are_proven_by_rereading(tmp_path):
    """TP 3 on 8 devices and 32 heads: the fix text lists values; the proof names one key that removes the
    error and adds none — and re-reading the script with that line says the same."""
    path = _script(tmp_path, tp=3)
    result = prove_fixes(check(path))
    before = _errors(path, ())
    fixed = [f for f in result.findings if f.rule == "MCORE-TC-HEADS-TP"]
    assert fixed and fixed[0].fix_check in ("valid", "proven") and fixed[0].fix_lines
    after = _errors(path, fixed[0].fix_lines)
    assert "MCORE-TC-HEADS-TP" not in after and after <= before
    # TP 4 fixes the heads too, but leaves EP 4 · ETP 4 not dividing 8; TP 2 leaves no error and is preferred
    assert fixed[0].fix_lines == ("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",)
    assert fixed[0].fix_check == "valid" and not after


def test_a_fix_that_makes_the_job_valid_says_so(tmp_path):
    path = _script(tmp_path, ep=3)
    result = prove_fixes(check(path))
    errors = [f for f in result.findings if f.severity == "error"]
    assert errors and all(f.fix_check == "valid" for f in errors)
    for f in errors:
        assert not _errors(path, f.fix_lines), f.fix_lines
    assert result.nearest == []  # a single key makes it valid: no nearest layouts needed


def test_nearest_valid_layouts_when_no_single_key_does(tmp_path):
    """Actor TP 3 and rollout TP 3: each single key fixes some errors, none all; the nearest layouts change
    both, and each is valid when the script is re-read with its overrides."""
    path = _script(tmp_path, tp=3, rtp=3)
    result = prove_fixes(check(path))
    assert all(f.fix_check != "valid" for f in result.findings)
    assert result.nearest
    counts = [n["changed_keys"] for n in result.nearest]
    assert counts == sorted(counts) and counts[0] >= 2
    for n in result.nearest:
        job = replace(
            resolve_script(path, extra_args=tuple(w for line in n["overrides"] for w in line.split())),
            device_choice="H100-SXM-80GB",
        )
        assert not [f for f in run_rules(job)[0] if f.severity == "error"], n["overrides"]


def test_a_disproved_text_fix_is_marked(tmp_path):
    """A fix text whose lines leave the error is marked, never printed as proven."""
    from shardcheck.rules.base import Finding

    path = _script(tmp_path, tp=3)
    result = check(path)
    wrong = Finding(
        "MCORE-TC-HEADS-TP",
        "error",
        "TP 3",
        None,
        fix="actor_rollout_ref.actor.megatron.tensor_model_parallel_size=6",
    )
    result.findings = [wrong]
    proven = prove_fixes(result)
    f = proven.findings[0]
    assert f.fix_source != "text"
    if f.fix_check in ("valid", "proven"):
        assert "do not" in f.fix_note and f.fix_lines != (
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=6",
        )
    else:
        assert f.fix_check == "disproved"


def test_valid_scripts_cost_no_proof(tmp_path):
    path = _script(tmp_path)
    result = check(path)
    calls = []
    result.reread = lambda words: calls.append(words)
    prove_fixes(result)
    assert calls == [] and result.nearest == []


def test_cli_json_carries_the_lines(tmp_path, capsys):
    from shardcheck.cli import main

    path = _script(tmp_path, tp=3)
    assert main(["check", str(path), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    finding = next(f for f in doc["results"][0]["findings"] if f["rule"] == "MCORE-TC-HEADS-TP")
    assert finding["fix_check"] in ("valid", "proven") and finding["fix_lines"]
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "proven fix: actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2" in out
    assert main(["check", str(path), "--no-fix-proof"]) == 1
    assert "proven" not in capsys.readouterr().out
