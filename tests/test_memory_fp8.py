"""Transformer Engine FP8 compute in the memory estimate (memory/activations.py ``fp8_layer_delta``,
memory/estimate.py ``fp8_kernels``; docs/validation.md "FP8 compute")."""

from __future__ import annotations

from pathlib import Path

from shardcheck.api import resolve_script
from shardcheck.memory.estimate import estimate

DATA = Path(__file__).parent / "data" / "memory_validation"
BF16 = (DATA / "moe__gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed.sh").read_text()
FP8 = "--bf16 \\\n    --fp8-format hybrid --fp8-recipe {recipe} "


def _last_stage(text: str, tmp_path: Path, device: str = "h100") -> tuple[dict, object]:
    path = tmp_path / "run.sh"
    path.write_text(text)
    est = estimate(resolve_script(path, megatron_core_version="0.19"), device)
    assert est.train is not None, est.problems
    last = max(r for s in est.train.stages for r in s.ranks)
    stage = next(s for s in est.train.stages if last in s.ranks)
    return stage.bytes, stage.params


def _with(recipe: str, extra: str = "") -> str:
    assert "--bf16 \\\n" in BF16
    return BF16.replace("--bf16 \\\n", FP8.format(recipe=recipe) + extra + "\\\n")


def test_fp8_weight_copies_by_recipe_and_device(tmp_path):
    bf16, params = _last_stage(BF16, tmp_path)
    linear = params.dense + params.expert
    hopper, _ = _last_stage(_with("tensorwise"), tmp_path)
    blackwell, _ = _last_stage(_with("tensorwise"), tmp_path, "b200")
    mxfp8, _ = _last_stage(_with("mxfp8"), tmp_path, "b200")
    bf16_b200, _ = _last_stage(BF16, tmp_path, "b200")
    # a cached FP8 workspace per linear weight: data + transpose on Hopper, data only on Blackwell
    assert hopper["weights"] - bf16["weights"] == int(linear * 2)
    assert blackwell["weights"] - bf16_b200["weights"] == int(linear * 1)
    assert mxfp8["weights"] - bf16_b200["weights"] == int(linear * 2 * (1 + 1 / 32))
    # --fp8-param-gather: the 1-byte parameter plus its transpose on Hopper
    gathered, _ = _last_stage(_with("tensorwise", "--fp8-param-gather "), tmp_path)
    assert gathered["weights"] - bf16["weights"] == int((params.total) * 1) - int(params.total * 2) + int(linear)


def test_fp8_saves_linear_inputs_at_one_byte(tmp_path):
    bf16, _ = _last_stage(BF16, tmp_path)
    tensorwise, _ = _last_stage(_with("tensorwise"), tmp_path)
    delayed, _ = _last_stage(_with("delayed"), tmp_path)
    blockwise, _ = _last_stage(_with("blockwise"), tmp_path)
    assert tensorwise["activations"] < bf16["activations"]
    # delayed scaling keeps linear_proj's and the shared experts' fc1 FP8 copies beside the bf16 tensors; with the
    # unfused attention of this launch linear_proj's copy replaces the bf16 one (saving), the shared fc1's adds
    assert delayed["activations"] != tensorwise["activations"]
    # blockwise carries an fp32 scale per 128 elements of every saved FP8 input
    assert tensorwise["activations"] < blockwise["activations"] < bf16["activations"]


def test_unknown_fp8_recipe_is_reported(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(_with("custom"))
    est = estimate(resolve_script(path, megatron_core_version="0.19"), "h100")
    assert est.train is None
    assert any("fp8 recipe 'custom'" in p and "not modelled" in p for p in est.problems), est.problems


def test_verl_reads_fp8_and_fp8_param_from_the_transformer_config(tmp_path):
    from test_rules import FITS, M, script

    def weights(extra: str) -> tuple[int, object]:
        path = tmp_path / "verl.sh"
        path.write_text(script(f"{FITS} {extra}", nodes=4))
        s = estimate(resolve_script(path), "h200").train.stages[0]
        return s.bytes["weights"], s.params

    otc = f"+{M}.override_transformer_config"
    bf16, p = weights("")
    fp8, _ = weights(f"{otc}.fp8=hybrid {otc}.fp8_recipe=tensorwise")
    fp8_param, _ = weights(f"{otc}.fp8=hybrid {otc}.fp8_recipe=tensorwise {otc}.fp8_param=True")
    linear = p.dense + p.expert
    assert fp8 - bf16 == int(linear * 2)  # the cached FP8 weight and its transpose (H200)
    assert fp8_param == p.total + int(linear)  # FP8 parameters and their transposes
