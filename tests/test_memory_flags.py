"""The memory estimate of Megatron-LM and slime launches, read from their flags."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from shardcheck.api import check
from shardcheck.frameworks.megatron.pipeline import split_layers, stage_layer_indices
from shardcheck.memory.estimate import estimate
from shardcheck.memory.params import Sharding, padded_vocab, stage_params
from shardcheck.models.architecture import NotModelled, architecture
from shardcheck.models.facts import load_model
from shardcheck.models.flag_architecture import moe_layer_pattern

EXAMPLES = Path(__file__).parent.parent / "examples"
SLIME = EXAMPLES / "slime" / "run-qwen3-235B-A22B-8x8.sh"
MLM = EXAMPLES / "megatron_lm_pretrain_gpt.sh"


def variant(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    """A copy of an example (with the model files it sources) with one piece of text replaced."""
    shutil.copytree(source.parent, tmp_path / "ex", dirs_exist_ok=True)
    path = tmp_path / "ex" / source.name
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return path


def est(path: Path, device: str = "h200", env: dict | None = None):
    result = check(path, env, device=device)
    assert result.error is None, result.error
    return estimate(result.job, device), result


def stage(e, index: int):
    return next(s for s in e.train.stages if index in s.ranks)


# ---- the shipped examples give complete estimates ----


def test_slime_example_is_estimated_completely():
    e, result = est(SLIME)
    assert result.job.framework == "slime" and e.problems == []
    assert [s.layers for s in sorted(e.train.stages, key=lambda s: s.ranks[0])] == [24, 24, 24, 22]
    # dynamic batch: --max-tokens-per-gpu 16384 × CP 2 per micro batch; samples up to 2048 + 8192 tokens
    assert e.train.tokens_per_micro_batch == 32768 and e.train.sequence_length == 10240
    r = e.rollout
    assert (r.engine, r.tp, r.dp, r.ep, r.replicas) == ("sglang", 8, 4, 32, 2)
    assert r.reserve_bytes == 0 and r.request_tokens == 10240
    assert r.requests_per_replica == 32  # 8 prompts × 8 samples over 2 engines
    assert r.training_resident_bytes == 0  # the rollout has GPUs of its own (not --colocate)
    b = stage(e, 0).bytes
    # --optimizer-cpu-offload with Megatron's default --optimizer-offload-fraction 1.0: all state on the host
    assert b["optimizer"] == 0 and b["optimizer_host"] > 0
    assert b["grads"] == 2 * b["weights"]  # bf16 weights, fp32 main grads


def test_megatron_lm_example_is_estimated_completely_without_a_rollout():
    e, result = est(MLM)
    assert result.job.framework == "megatron-lm" and e.problems == [] and e.rollout is None
    assert e.train.tokens_per_micro_batch == 8192  # --micro-batch-size 1 × --seq-length 8192
    arch = architecture(result.job.model)
    # Megatron-LM's defaults: LayerNorm, biases, GeLU 4h, tied embeddings, learned absolute positions
    assert (arch.norm_bias, arch.linear_bias, arch.qkv_bias, arch.gated, arch.tied) == (True, True, True, False, True)
    assert arch.ffn == 4 * 2048 and arch.position_embeddings == 32768 and arch.kv_heads == 4
    first = stage(e, 0).params
    assert first.embedding == (padded_vocab(50257, Sharding(2, 4, 1, 4, 128)) // 2 + 32768) * 2048
    assert padded_vocab(50257, Sharding(2, 4, 1, 4, 128)) == 50432  # 128 · TP 2 = 256


# ---- the flags give the preset's counts ----


def test_slime_flag_counts_equal_the_preset_for_the_same_layout():
    e, result = est(SLIME)
    flags_arch = architecture(result.job.model)
    model, _ = load_model("/models/Qwen3-235B-A22B", False)
    preset = architecture(model)
    # the preset comes from the HF config (no padding); Megatron-LM pads --vocab-size to 128 · TP
    sharding = Sharding(tp=4, ep=16, etp=1, pp=4, vocab_divisible_by=128)
    split = split_layers(94, 4, last=22)
    for index, layers in enumerate(stage_layer_indices(split, 94)):
        mine = stage(e, index).params
        assert (
            mine == stage_params(preset, layers, index, sharding) == stage_params(flags_arch, layers, index, sharding)
        )
    unpadded = stage_params(preset, tuple(range(24)), 0, Sharding(4, 16, 1, 4))
    assert stage(e, 0).params.embedding - unpadded.embedding == (152064 - 151936) // 4 * 4096


def test_flag_architecture_equals_megatron(tmp_path):
    pytest.importorskip("megatron.core")
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from oracle.gpt_params import megatron_stage_params

    _, result = est(MLM)
    arch = architecture(result.job.model)
    arch = dataclasses.replace(arch, num_layers=8, moe_layers=frozenset(range(8)), vocab=50432)
    for s in (0, 1):
        split = split_layers(8, 2)
        layers = stage_layer_indices(split, 8)[s]
        mine = stage_params(arch, layers, s, Sharding(2, 4, 1, 2, transformer_engine=False)).as_dict()
        assert mine == megatron_stage_params(arch, tp=2, pp=2, ep=4, etp=1, stage=s)


# ---- flags change the terms ----


def test_distributed_optimizer_shards_adam_over_dp(tmp_path):
    on, _ = est(MLM)
    off, _ = est(variant(tmp_path, MLM, " --use-distributed-optimizer", ""))
    a, b = stage(on, 0), stage(off, 0)
    dense = a.params.embedding + a.params.dense + a.params.output
    # bf16: fp32 main params + two fp32 moments = 12 bytes; DP·CP 2 for dense, EDP 1 for experts
    assert b.bytes["optimizer"] == (dense + a.params.expert) * 12
    assert a.bytes["optimizer"] == int((dense / 2 + a.params.expert) * 12)


def test_offload_fraction_moves_that_share_to_the_host(tmp_path):
    path = variant(
        tmp_path,
        MLM,
        "--bf16",
        "--bf16 --optimizer-cpu-offload --use-precision-aware-optimizer --optimizer-offload-fraction 0.25",
    )
    base, _ = est(MLM)
    e, _ = est(path)
    full = stage(base, 0).bytes["optimizer"]
    assert stage(e, 0).bytes["optimizer"] == int(full * 0.75) or abs(stage(e, 0).bytes["optimizer"] - full * 0.75) < 2
    # the host holds the offloaded share's fp32 copy, its two moments and a pinned fp32 gradient: 16 of 12 bytes
    assert abs(stage(e, 0).bytes["optimizer_host"] - full * 0.25 * 16 / 12) < 2
    assert e.host.offloaded_bytes_per_device > 0


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_offload_without_precision_aware_keeps_the_fp32_master_on_the_device(tmp_path, fraction):
    """HybridDeviceOptimizer steps a host clone of each offloaded fp32 main shard and copies it back: the device
    shard stays, only Adam's two moments (8 of the 12 bytes per parameter) leave."""
    path = variant(tmp_path, MLM, "--bf16", f"--bf16 --optimizer-cpu-offload --optimizer-offload-fraction {fraction}")
    base, _ = est(MLM)
    e, _ = est(path)
    full = stage(base, 0).bytes["optimizer"]
    kept = stage(e, 0).bytes["optimizer"]
    assert abs(kept - full * (4 + (1 - fraction) * 8) / 12) < 2
    assert abs(stage(e, 0).bytes["optimizer_host"] - full * fraction * 16 / 12) < 2


def test_recompute_full_keeps_only_layer_inputs(tmp_path):
    base, _ = est(MLM)
    full, _ = est(
        variant(
            tmp_path,
            MLM,
            "--bf16",
            "--bf16 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
        )
    )
    selective, _ = est(variant(tmp_path / "s", MLM, "--bf16", "--bf16 --recompute-activations"))
    a, f, s = (stage(x, 0).bytes["activations"] for x in (base, full, selective))
    assert f < s < a or f < s <= a
    assert f * 5 < a


def test_selective_recompute_savings_give_back_one_module_at_the_peak(tmp_path):
    """The layer in backward re-creates what a recomputed module dropped, one module after another: the stage
    saves every held layer's dropped bytes less the largest one module brings back (not the sum)."""
    from shardcheck.memory.activations import Parallel, Recompute, layer_bytes

    modules = ("layernorm", "moe_act")
    flags = f"--bf16 --recompute-granularity selective --recompute-modules {' '.join(modules)}"
    base, result = est(MLM)
    sel, _ = est(variant(tmp_path, MLM, "--bf16", flags))
    arch = architecture(result.job.model)
    tokens, seq = base.train.tokens_per_micro_batch, base.train.sequence_length
    layout = result.job.layout("actor")
    p = Parallel(tp=2, sequence_parallel=bool(layout.sequence_parallel.value), cp=1, ep=4, etp=1)
    k = base.train_settings.kernels
    whole = layer_bytes(arch, 0, tokens, seq, p, Recompute(), k)

    def dropped(names) -> float:
        return whole - layer_bytes(arch, 0, tokens, seq, p, Recompute("selective", modules=frozenset(names)), k)

    each = [dropped([m]) for m in modules]
    assert min(each) > 0 and dropped(modules) > max(each)
    a, b = stage(base, 0), stage(sel, 0)
    layers_held = round(a.bytes["activations"] / whole)  # every layer alike, micro batches of both chunks
    assert layers_held > 1
    saved = a.bytes["activations"] - b.bytes["activations"]
    assert abs(saved - (dropped(modules) * layers_held - max(each))) < 0.001 * saved


def test_bf16_halves_weights_and_keeps_fp32_grads(tmp_path):
    bf16, _ = est(MLM)
    fp32, _ = est(variant(tmp_path, MLM, " --bf16", ""))
    a, b = stage(bf16, 0).bytes, stage(fp32, 0).bytes
    assert b["weights"] == 2 * a["weights"] and a["grads"] == b["grads"] == 2 * a["weights"]
    # fp32 training: no separate fp32 main copy, only the two moments
    params = stage(fp32, 0).params
    dense = params.embedding + params.dense + params.output
    assert b["optimizer"] == int((dense / 2 + params.expert) * 8)


def test_swiglu_default_ffn_follows_validate_args(tmp_path):
    _, result = est(variant(tmp_path, MLM, "--kv-channels 128", "--kv-channels 128 --swiglu"))
    arch = architecture(result.job.model)
    assert arch.gated and arch.ffn == int((4 * 2048 * 2 / 3) / 64) * 64 == 5440


# ---- unknown flags are reported, never guessed ----


@pytest.mark.parametrize(
    "old,new,said",
    [
        ("--micro-batch-size 1", "--micro-batch-size $MBS", "--micro-batch-size"),
        ("--vocab-size 50257", "--vocab-size $VOCAB", "vocab size is unknown"),
        ("--vocab-size 50257", "", "vocab size is unknown"),
        ("--num-experts 64", '--num-experts 64 --moe-layer-freq "$(make_pattern)"', "--moe-layer-freq"),
        ("--num-experts 64", "--num-experts 64 --moe-layer-freq \"[__import__('os')]*48\"", "--moe-layer-freq"),
        ("--num-experts 64", "--num-experts 64 --optimizer sgd", "--optimizer sgd"),
    ],
)
def test_unknown_flags_leave_the_estimate_unknown(tmp_path, old, new, said):
    e, _ = est(variant(tmp_path, MLM, old, new))
    assert e.train is None
    assert any(said in p for p in e.problems), e.problems


def test_slime_without_mem_fraction_leaves_the_rollout_unknown(tmp_path):
    e, _ = est(variant(tmp_path, SLIME, "   --sglang-mem-fraction-static 0.7\n", ""))
    assert e.train is not None and e.rollout is None
    assert any("--sglang-mem-fraction-static is not given" in p for p in e.problems)


def test_slime_without_prompt_length_leaves_the_rollout_unknown(tmp_path):
    e, _ = est(variant(tmp_path, SLIME, "--rollout-max-prompt-len 2048 ", ""))
    assert e.rollout is None and any("request length is unknown" in p for p in e.problems)
    assert e.train is not None  # dynamic batches are bounded by --max-tokens-per-gpu × CP


def test_moe_layer_freq_forms():
    assert moe_layer_pattern(2, 6) == frozenset({0, 2, 4})
    assert moe_layer_pattern("([0]*3+[1]*5)", 8) == frozenset(range(3, 8))
    assert moe_layer_pattern("[1,1,0]*2", 6) == frozenset({0, 1, 3, 4})
    for bad in ("[1]*7", "[x]*8", "__import__('os').system('true')", "[1]*8 if True else 0"):
        with pytest.raises((ValueError, SyntaxError)):
            moe_layer_pattern(bad, 8)


def test_mla_without_qk_layernorm_has_no_latent_norms(tmp_path):
    path = variant(
        tmp_path,
        MLM,
        "--kv-channels 128",
        "--kv-channels 128 --multi-latent-attention --q-lora-rank 512 --kv-lora-rank 256",
    )
    _, result = est(path)
    arch = architecture(result.job.model)
    with_norms = dataclasses.replace(arch, qk_layernorm=True)
    s = Sharding(2, 4, 1, 4)
    diff = stage_params(with_norms, (0,), 1, s).dense - stage_params(arch, (0,), 1, s).dense
    assert diff == 2 * (512 + 256)  # LayerNorm weight and bias of the q and kv latents


# ---- the MEM-* rules fire with flag-named fixes ----


def test_train_oom_names_megatron_lm_flags():
    result = check(MLM, device="a100-40")
    (first, *_) = [f for f in result.findings if f.rule == "MEM-TRAIN-OOM"]
    assert "--recompute-granularity full" in first.fix and "actor_rollout_ref" not in first.fix
    assert not [f for f in check(MLM, device="h200").findings if f.rule == "MEM-TRAIN-OOM"]


def test_rollout_kv_names_slime_flags(tmp_path):
    path = variant(tmp_path, SLIME, "--sglang-mem-fraction-static 0.7", "--sglang-mem-fraction-static 0.3")
    (f,) = [f for f in check(path, device="a100-40").findings if f.rule == "MEM-ROLLOUT-KV"]
    assert "SGLang" in f.message and "--sglang-mem-fraction-static" in f.fix
    assert not [f for f in check(SLIME, device="a100-40").findings if f.rule == "MEM-ROLLOUT-KV"]


def test_host_names_the_offload_fraction():
    small = check(SLIME, device="h200", host_memory=100 << 30)
    (f,) = [f for f in small.findings if f.rule == "MEM-HOST"]
    assert "--optimizer-offload-fraction" in f.fix
    assert not [f for f in check(SLIME, device="h200", host_memory=2 << 40).findings if f.rule == "MEM-HOST"]


def test_flag_model_not_counted_is_not_modelled(tmp_path):
    _, result = est(variant(tmp_path, MLM, "--kv-channels 128", "--kv-channels 128 --normalization FooNorm"))
    with pytest.raises(NotModelled):
        architecture(result.job.model)


@pytest.mark.parametrize("script", ["pretrain_mamba.py", "pretrain_hybrid.py"])
def test_hybrid_mamba_launches_are_judged_but_not_sized(tmp_path, script):
    """pretrain_hybrid.py (Megatron-LM main of 2026-08; pretrain_mamba.py wraps it) builds Mamba / attention / MLP
    layers from --hybrid-override-pattern: the layout is judged, the GPT layer count would be wrong and is not."""
    e, result = est(variant(tmp_path, MLM, "pretrain_gpt.py", script))
    assert result.job.framework == "megatron-lm"
    assert e.train is None and any("hybrid Mamba" in p for p in e.problems)
    gpt, _ = est(MLM)
    assert gpt.train is not None
