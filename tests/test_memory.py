"""The memory estimate: exact parameter counts, the paper's activation formulas, KV cache, the report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_rules import FITS, A, M, script

from shardcheck.api import check, memory, resolve_script
from shardcheck.cli import main
from shardcheck.frameworks.megatron.pipeline import split_layers, stage_layer_indices
from shardcheck.memory.activations import (
    Kernels,
    Parallel,
    Recompute,
    attention_bytes,
    korthikanti_layer_bytes,
    layer_bytes,
)
from shardcheck.memory.devices import GIB, device_for, find_device
from shardcheck.memory.estimate import estimate, kv_bytes_per_token
from shardcheck.memory.params import Sharding, stage_params
from shardcheck.models.architecture import NotModelled, architecture
from shardcheck.models.facts import load_model

CASE = str(Path(__file__).parent / "data" / "cases" / "qwen3_235b_256k_after.sh")


def arch_of(name: str, layers: int | None = None):
    model, problem = load_model(f"/models/{name}", False)
    assert problem is None
    arch = architecture(model)
    if layers is not None:  # the first layers only, to keep a meta-device build small
        arch = dataclasses.replace(
            arch, num_layers=layers, moe_layers=frozenset(i for i in arch.moe_layers if i < layers)
        )
    return arch


def counts(arch, *, tp, pp, ep, etp, stage, vpp=None, first=None, last=None, te=False):
    split = split_layers(arch.num_layers, pp, first=first, last=last, vpp=vpp)
    layers = stage_layer_indices(split, arch.num_layers, vpp=vpp)[stage]
    return stage_params(arch, layers, stage, Sharding(tp, ep, etp, pp, transformer_engine=te)).as_dict()


# ---- exact parameter counts, against megatron-core's GPTModel (test extra) ----

DENSE_LAYOUTS = [  # (model, layers or None, tp, pp, vpp, first, last)
    ("Qwen3-0.6B", None, 1, 1, None, None, None),
    ("Qwen3-0.6B", None, 2, 2, None, None, None),
    ("Qwen3-0.6B", None, 4, 4, 7, None, None),
    ("Qwen3-8B", None, 8, 4, None, None, None),
    ("Qwen3-8B", None, 2, 4, None, 8, 8),
    ("Qwen3-8B", None, 4, 3, None, 10, None),
    ("Qwen2.5-7B", None, 4, 2, None, None, None),
    ("Qwen2.5-7B", None, 2, 4, 7, None, None),
    ("Llama-3.1-8B", None, 8, 2, None, None, None),
    ("Llama-3.1-8B", None, 1, 4, 2, None, None),
    ("Llama-3.1-70B", 16, 8, 4, None, None, None),
    ("Qwen2.5-72B", 16, 8, 2, None, 6, None),
]
MOE_LAYOUTS = [  # (model, layers or None, tp, pp, ep, etp, vpp, first, last)
    ("Qwen3-235B-A22B", None, 2, 16, 16, 1, None, 5, 5),  # the 256K example's layout
    ("Qwen3-235B-A22B", None, 4, 8, 32, 1, None, 11, 11),  # its layout before the change
    ("Qwen3-235B-A22B", None, 4, 2, 8, 2, None, None, None),
    ("Qwen3-30B-A3B", None, 2, 4, 8, 1, None, None, None),
    ("Qwen3-30B-A3B", None, 1, 4, 4, 1, 3, None, None),
    ("Qwen3-30B-A3B", None, 4, 2, 2, 4, None, 20, None),
    ("Mixtral-8x7B", None, 2, 4, 8, 1, None, None, None),
    ("Mixtral-8x7B", None, 8, 2, 1, 8, None, None, None),
    ("DeepSeek-V3", 16, 8, 4, 64, 1, None, None, None),
    ("DeepSeek-V3", 12, 4, 3, 32, 2, None, 2, None),
    ("GLM-4.5-Air", 8, 2, 4, 8, 1, None, None, None),
    ("Kimi-K2-Instruct", 8, 8, 2, 64, 1, None, None, None),
    ("gpt-oss-20b", 4, 2, 2, 4, 1, None, None, None),  # biases everywhere, attention sinks
    ("gpt-oss-120b", 4, 4, 2, 8, 1, None, None, None),  # bias in MoE: megatron-core asks ETP 1
]


def _stages(pp: int) -> list[int]:
    return sorted({0, pp // 2, pp - 1})  # first, a middle and the last stage


@pytest.mark.parametrize("case", DENSE_LAYOUTS, ids=lambda c: "-".join(map(str, c)))
def test_dense_counts_equal_megatron(case):
    pytest.importorskip("megatron.core")
    from oracle.gpt_params import megatron_stage_params

    name, layers, tp, pp, vpp, first, last = case
    arch = arch_of(name, layers)
    for stage in _stages(pp):
        mine = counts(arch, tp=tp, pp=pp, ep=1, etp=tp, stage=stage, vpp=vpp, first=first, last=last)
        assert mine == megatron_stage_params(
            arch, tp=tp, pp=pp, ep=1, etp=tp, stage=stage, vpp=vpp, first=first, last=last
        ), (name, stage)


@pytest.mark.parametrize("case", MOE_LAYOUTS, ids=lambda c: "-".join(map(str, c)))
def test_moe_counts_equal_megatron(case):
    pytest.importorskip("megatron.core")
    from oracle.gpt_params import megatron_stage_params

    name, layers, tp, pp, ep, etp, vpp, first, last = case
    arch = arch_of(name, layers)
    for stage in _stages(pp):
        mine = counts(arch, tp=tp, pp=pp, ep=ep, etp=etp, stage=stage, vpp=vpp, first=first, last=last)
        assert mine == megatron_stage_params(
            arch, tp=tp, pp=pp, ep=ep, etp=etp, stage=stage, vpp=vpp, first=first, last=last
        ), (name, stage)


def test_256k_middle_stage_holds_about_1_1_billion():
    arch = arch_of("Qwen3-235B-A22B-Instruct-2507")
    middle = counts(arch, tp=2, pp=16, ep=16, etp=1, stage=7, first=5, last=5)
    # 6 layers: 8 of 128 experts each (3 · 4096 · 1536 per expert), attention and norms over TP 2
    assert middle["expert"] == 6 * 8 * 3 * 4096 * 1536
    assert middle["total"] == 1_123_075_584


def test_mla_down_projections_are_replicated_with_transformer_engine():
    arch = arch_of("DeepSeek-V3", 4)
    local = counts(arch, tp=8, pp=1, ep=64, etp=1, stage=0)
    te = counts(arch, tp=8, pp=1, ep=64, etp=1, stage=0, te=True)
    m = arch.mla
    down = (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim) * arch.hidden
    assert te["dense"] - local["dense"] == 4 * (down - down // 8)


def test_megatron_lm_pads_the_vocab_and_verl_does_not():
    arch = dataclasses.replace(arch_of("Qwen3-0.6B"), vocab=151_000)
    plain = stage_params(arch, (), 0, Sharding(4, 1, 4, 1))
    padded = stage_params(arch, (), 0, Sharding(4, 1, 4, 1, vocab_divisible_by=128))
    assert (
        plain.embedding == 151_000 // 4 * 1024 and padded.embedding == 151_040 // 4 * 1024
    )  # the next multiple of 128 · TP 4 = 512


def test_architectures_without_exact_counts_are_unknown():
    model, _ = load_model("/models/Qwen3-8B", False)
    other = dataclasses.replace(model, config={**model.config, "model_type": "jamba"})
    with pytest.raises(NotModelled, match="jamba"):
        architecture(other)


def test_layer_indices_follow_megatrons_offsets():
    split = split_layers(8, 2, vpp=2)
    assert stage_layer_indices(split, 8, vpp=2) == ((0, 1, 4, 5), (2, 3, 6, 7))
    split = split_layers(10, 3, first=2, last=4)
    assert stage_layer_indices(split, 10) == ((0, 1), (2, 3, 4, 5), (6, 7, 8, 9))


# ---- activations: Korthikanti et al. 2022 ----

GPT3 = dict(s=2048, h=12288, a=96)  # GPT-3 175B (the paper's Table 3)
MTNLG = dict(s=2048, h=20480, a=128)  # MT-NLG 530B


def test_paper_attention_term_for_gpt3_and_mt_nlg():
    # §5: 5as/h is 80 for GPT-3 and 64 for MT-NLG, so selective recomputation saves 70% and 65%.
    for model, term, saving in ((GPT3, 80, 0.70), (MTNLG, 64, 0.65)):
        full = korthikanti_layer_bytes(model["s"], 1, model["h"], model["a"], t=8, sequence_parallel=True)
        selective = korthikanti_layer_bytes(
            model["s"], 1, model["h"], model["a"], t=8, sequence_parallel=True, selective=True
        )
        assert 5 * model["a"] * model["s"] / model["h"] == term
        assert round(1 - selective / full, 2) == saving


def test_paper_tensor_parallel_without_sequence_parallel():
    s, h, a = GPT3["s"], GPT3["h"], GPT3["a"]
    assert korthikanti_layer_bytes(s, 1, h, a, t=8) == s * h * (10 + 24 / 8 + 5 * a * s / (h * 8))
    assert korthikanti_layer_bytes(s, 1, h, a) == s * h * (34 + 5 * a * s / h)


@pytest.mark.parametrize("tp,sp", [(1, False), (8, False), (8, True)])
def test_term_by_term_formula_reduces_to_the_paper(tp, sp):
    """A GPT layer (MHA, 4h GeLU MLP, dropout, unfused attention) in the generalised formula = eqs. 1-3."""
    s, h, a = GPT3["s"], GPT3["h"], GPT3["a"]
    gpt = dataclasses.replace(
        arch_of("Qwen3-8B"), hidden=h, heads=a, kv_heads=a, head_dim=h // a, ffn=4 * h, gated=False, qk_layernorm=False
    )  # GPT-3 has no Q/K layer norm
    p = Parallel(tp=tp, sequence_parallel=sp)
    paper = Kernels(flash=False, hidden_dropout=True, attention_dropout=True)
    assert layer_bytes(gpt, 0, s, s, p, Recompute(), paper) == pytest.approx(
        korthikanti_layer_bytes(s, 1, h, a, t=tp, sequence_parallel=sp)
    )
    # each difference from the paper's layer moves the figure: flash attention drops the 5as/h term,
    # no dropout drops the masks, a gated MLP keeps a twice as wide activation input
    assert layer_bytes(gpt, 0, s, s, p, Recompute(), Kernels(flash=True, hidden_dropout=True)) == pytest.approx(
        korthikanti_layer_bytes(s, 1, h, a, t=tp, sequence_parallel=sp, selective=True) + s * 4 * a / tp
    )
    masks = 2 * s * h / (tp if sp or tp == 1 else 1)
    assert layer_bytes(gpt, 0, s, s, p, Recompute(), Kernels(False, False, True)) == pytest.approx(
        korthikanti_layer_bytes(s, 1, h, a, t=tp, sequence_parallel=sp) - masks
    )
    swiglu = dataclasses.replace(gpt, gated=True)
    assert layer_bytes(swiglu, 0, s, s, p, Recompute(), paper) - layer_bytes(
        gpt, 0, s, s, p, Recompute(), paper
    ) == pytest.approx(2 * s * 4 * h / tp)


def test_attention_output_is_every_query_head_wide_under_gqa():
    """The proj input (attention output) is heads·head_dim wide, not kv_heads·head_dim (issue 13, item 2)."""
    # 32 query heads, 8 KV heads, head_dim 128; without the Q/K norms (whose inputs are counted apart)
    arch = dataclasses.replace(arch_of("Qwen3-8B"), qk_layernorm=False)
    mha = dataclasses.replace(arch, kv_heads=arch.heads)
    p = Parallel()
    gqa_bytes, mha_bytes = attention_bytes(arch, 1, 1, p), attention_bytes(mha, 1, 1, p)
    # MHA adds K and V of 24 more heads (2 · 2 · 24 · 128 bytes); the output is the same 32 heads
    assert mha_bytes - gqa_bytes == 2 * 2 * (arch.heads - arch.kv_heads) * arch.head_dim
    assert gqa_bytes == 2 * 4096 + 2 * 4096 + 2 * 32 * 128 + 2 * 2 * 8 * 128 + 2 * 32 * 128 + 4 * 32


# ---- rollout KV cache ----


def test_kv_cache_of_the_256k_example():
    arch = arch_of("Qwen3-235B-A22B-Instruct-2507")
    per_token, replicated = kv_bytes_per_token(arch, 4)
    assert per_token == 48_128 and not replicated  # 2 · 94 layers · 1 KV head · 128 · 2 bytes
    assert per_token * 262_144 / GIB == pytest.approx(11.75)


def test_kv_heads_are_replicated_beyond_their_count():
    arch = arch_of("Qwen3-235B-A22B-Instruct-2507")  # 4 KV heads
    assert kv_bytes_per_token(arch, 8) == (48_128, True)


def test_mla_caches_the_latent():
    arch = arch_of("DeepSeek-V3")
    assert kv_bytes_per_token(arch, 8) == (61 * (512 + 64) * 2, True)


# ---- the estimate ----


def _job(tmp_path, text):
    path = tmp_path / "run.sh"
    path.write_text(text)
    return resolve_script(path)


def test_the_256k_example_fits_and_serves_its_requests():
    est = estimate(resolve_script(CASE), "h200")
    assert est.problems == []
    middle = next(s for s in est.train.stages if s.stage == 7)
    assert middle.params.total == 1_123_075_584 and middle.layers == 6
    assert all(s.total < est.device.memory_bytes for s in est.train.stages)
    assert est.rollout.tp == 4 and est.rollout.dp == 32 and est.rollout.ep == 128 and est.rollout.replicas == 2
    assert est.rollout.kv_bytes_per_token == 48_128
    assert est.rollout.max_concurrent_full_requests >= est.rollout.requests_per_engine


def test_npu_without_a_variant_gets_a_note_and_a_default():
    est = estimate(resolve_script(CASE))
    assert est.device.name == "Ascend-910B" and "trainer.device=npu" in est.device.note


def test_device_names_match_fragments():
    assert find_device("h200").name == "H200-SXM-141GB"
    assert find_device("a100-80").name == "A100-80GB-SXM"
    assert device_for(None, "cuda").note is not None


def test_terms_add_up(tmp_path):
    est = estimate(_job(tmp_path, script(FITS, nodes=4)), "h200")
    for s in est.train.stages:
        b = s.bytes
        assert b["allocated"] == sum(
            b[k]
            for k in ("weights", "grads", "optimizer", "gathered", "activations", "logits", "ref_weights", "workspace")
        )
        assert b["weights"] == 2 * s.params.total and b["grads"] == 4 * s.params.total
        # the device peak: static terms as they are, fragmentation on the rest, the outside allowance
        static = b["weights"] + b["grads"] + b["optimizer"] + b["ref_weights"]
        assert b["total"] == int(static + (b["allocated"] - static) / 0.85 + GIB // 2)


def test_distributed_optimizer_shards_the_state(tmp_path):
    on = estimate(_job(tmp_path, script(FITS, nodes=4)), "h200").train.stages[0]
    off = estimate(_job(tmp_path, script(f"{FITS} {M}.use_distributed_optimizer=False", nodes=4)), "h200").train.stages[
        0
    ]
    # DP = 32 / PP 4 = 8 shards the dense state; EDP = 32 / (EP 8 · PP 4) = 1 leaves the experts whole
    dense = on.params.total - on.params.expert
    assert off.bytes["optimizer"] == 12 * on.params.total
    assert on.bytes["optimizer"] == pytest.approx(12 * dense / 8 + 12 * on.params.expert, abs=1)


def test_recompute_and_fused_kernels_shrink_their_terms(tmp_path):
    base = estimate(_job(tmp_path, script(FITS, nodes=4)), "h200").train.stages
    full = estimate(
        _job(
            tmp_path,
            script(
                f"{FITS} +{M}.override_transformer_config.recompute_granularity=full "
                f"+{M}.override_transformer_config.recompute_method=uniform "
                f"+{M}.override_transformer_config.recompute_num_layers=1",
                nodes=4,
            ),
        ),
        "h200",
    ).train.stages
    long = f"{FITS} data.max_prompt_length=1024 data.max_response_length=15360"
    unfused = estimate(_job(tmp_path, script(long, nodes=4)), "h200").train.stages
    fused = estimate(
        _job(tmp_path, script(f"{long} actor_rollout_ref.model.use_fused_kernels=True", nodes=4)), "h200"
    ).train.stages
    assert full[0].bytes["activations"] < base[0].bytes["activations"] / 3
    assert fused[-1].bytes["logits"] < unfused[-1].bytes["logits"] / 2  # one 4096-token chunk of 16,384 tokens


def test_offload_moves_state_to_the_host(tmp_path):
    est = estimate(_job(tmp_path, script(f"{FITS} {M}.param_offload=True {M}.optimizer_offload=True", nodes=4)), "h200")
    worst = max(est.train.stages, key=lambda s: s.total)
    assert (
        est.host.offloaded_bytes_per_device == worst.bytes["weights"] + worst.bytes["grads"] + worst.bytes["optimizer"]
    )
    assert est.host.bytes_per_node == 8 * est.host.offloaded_bytes_per_device
    assert est.rollout.training_resident_bytes == 0
    kept = estimate(_job(tmp_path, script(FITS, nodes=4)), "h200")
    assert kept.host.offloaded_bytes_per_device == 0 and kept.rollout.training_resident_bytes > 0


def test_more_pipeline_stages_hold_more_micro_batches_first(tmp_path):
    est = estimate(_job(tmp_path, script(FITS, nodes=4)), "h200")
    held = {s.stage: s.micro_batches_in_flight for s in est.train.stages}
    assert held[0] == 4 and held[3] == 1  # 1F1B: PP − stage


def test_unknown_values_are_reported_not_guessed(tmp_path):
    est = estimate(_job(tmp_path, script(f"{A}.ppo_micro_batch_size_per_gpu=$MBS")), "h200")
    assert est.train is None and any("ppo_micro_batch_size_per_gpu" in p for p in est.problems)


def test_memory_json(capsys):
    assert main(["memory", CASE, "--device", "h200", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    r = doc["results"][0]
    assert doc["version"] == 1 and r["device"]["name"] == "H200-SXM-141GB"
    stage = r["train"]["stages"][0]
    assert set(stage["params"]) == {"embedding", "dense", "expert", "output", "total"}
    assert {"weights", "grads", "optimizer", "activations", "logits", "workspace", "total"} <= set(stage["bytes"])
    assert r["rollout"]["kv_bytes_per_token"] == 48_128 and r["rollout"]["replicas"] == 2


def test_memory_text_and_explain(capsys):
    assert main(["memory", CASE, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "Ascend-910B" in out and "48,128 bytes per token" in out and "Korthikanti" in out


def test_unknown_device_is_one_line_of_bad_input(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(script())
    result = memory(path, device="tpu-v9")
    assert result.exit_code == 2 and "not a known device" in result.error


MEGATRON_LM_STYLE = [  # Megatron-LM's own defaults: LayerNorm, biases on every linear layer, GeLU
    ("Qwen3-8B", 8, dict(gated=False, norm_bias=True, linear_bias=True), 2, 2, 1, 2),
    ("Qwen3-8B", 8, dict(norm_bias=True, linear_bias=True, qk_layernorm=False), 4, 2, 1, 4),
    ("Qwen3-30B-A3B", 8, dict(gated=False, norm_bias=True, linear_bias=True), 2, 2, 4, 1),
    ("Qwen3-30B-A3B", 8, dict(shared_ffn=1536, shared_gate=True), 2, 4, 8, 1),  # megatron: no bias with shared
    ("Qwen3-8B", 8, dict(gated=False, norm_bias=True, linear_bias=True, position_embeddings=4096), 2, 2, 1, 2),
    ("Qwen3-8B", 8, dict(position_embeddings=32768, tied=True), 4, 1, 1, 4),  # learned absolute positions
    ("DeepSeek-V3", 4, dict(qk_layernorm=False), 4, 2, 8, 1),  # MLA without the latent norms
]


@pytest.mark.parametrize("case", MEGATRON_LM_STYLE, ids=lambda c: f"{c[0]}-{c[3]}-{c[4]}-{c[5]}")
def test_megatron_lm_style_layers_equal_megatron(case):
    pytest.importorskip("megatron.core")
    from oracle.gpt_params import megatron_stage_params

    name, layers, changes, tp, pp, ep, etp = case
    arch = dataclasses.replace(arch_of(name, layers), **changes)
    for stage in _stages(pp):
        mine = counts(arch, tp=tp, pp=pp, ep=ep, etp=etp, stage=stage)
        assert mine == megatron_stage_params(arch, tp=tp, pp=pp, ep=ep, etp=etp, stage=stage), (name, stage)


def test_sglang_engine_spans_the_replica(tmp_path):
    ro = "actor_rollout_ref.rollout"
    base = f"{FITS} {ro}.name=sglang {ro}.tensor_model_parallel_size=2 {ro}.data_parallel_size=2"
    plain = estimate(_job(tmp_path, script(base, nodes=4)), "h200").rollout
    attn = estimate(
        _job(tmp_path, script(f"{base} +{ro}.engine_kwargs.sglang.enable_dp_attention=True", nodes=4)), "h200"
    ).rollout
    assert (plain.tp, plain.dp) == (4, 1) and (attn.tp, attn.dp) == (2, 2)
    assert plain.reserve_bytes == 0  # mem_fraction_static holds weights and KV only
    assert plain.kv_bytes_per_token * 2 == attn.kv_bytes_per_token  # 4 KV heads over 4 vs over 2 ranks


# ---- FSDP (verl's FSDP / FSDP2 engine) ----


def fsdp(overrides: str = "", *, gpus: int = 8, model: str = "Qwen2.5-14B") -> str:
    words = (
        "data.max_prompt_length=2048 data.max_response_length=14336 "
        f"{A}.use_dynamic_bsz=True {A}.ppo_max_token_len_per_gpu=16384 {A}.ulysses_sequence_parallel_size=2 "
        "actor_rollout_ref.rollout.tensor_model_parallel_size=4 " + overrides
    )
    return script(words, model=model, gpus=gpus, config="--config-name=ppo_trainer")


def test_fsdp_shards_the_whole_model(tmp_path):
    est = estimate(_job(tmp_path, fsdp()), "h100")
    arch = arch_of("Qwen2.5-14B")
    whole = stage_params(arch, tuple(range(arch.num_layers)), 0, Sharding(1, 1, 1, 1))
    [stage] = est.train.stages
    assert stage.params.total == sum(-(-n // 8) for n in (whole.embedding, whole.dense, whole.expert, whole.output))
    b = stage.bytes
    # model_dtype fp32: the parameters are the master weights; fp32 grads; AdamW's two fp32 moments
    assert b["weights"] == 4 * stage.params.total and b["grads"] == b["weights"] and b["optimizer"] == 2 * b["weights"]
    assert b["allocated"] == sum(
        b[k] for k in ("weights", "grads", "optimizer", "gathered", "activations", "logits", "ref_weights", "workspace")
    )
    assert b["total"] > b["allocated"]
    assert est.train.tokens_per_micro_batch == 16384 * 2  # the token budget · Ulysses SP


def test_fsdp_size_and_offload_policy(tmp_path):
    full = estimate(_job(tmp_path, fsdp()), "h100").train.stages[0]
    hybrid = estimate(_job(tmp_path, fsdp(f"{A}.fsdp_config.fsdp_size=4")), "h100").train.stages[0]
    assert hybrid.params.total == pytest.approx(2 * full.params.total, rel=1e-6)
    policy = estimate(_job(tmp_path, fsdp(f"{A}.strategy=fsdp2 {A}.fsdp_config.offload_policy=True")), "h100")
    b = policy.train.stages[0].bytes
    assert b["weights"] == b["grads"] == b["optimizer"] == 0 and b["optimizer_host"] > 0


def test_fsdp_checkpointing_and_offload_terms(tmp_path):
    on = estimate(_job(tmp_path, fsdp()), "h100").train.stages[0]
    off = estimate(_job(tmp_path, fsdp("actor_rollout_ref.model.enable_gradient_checkpointing=False")), "h100")
    assert off.train.stages[0].bytes["activations"] > 5 * on.bytes["activations"]
    moved = estimate(
        _job(tmp_path, fsdp(f"{A}.fsdp_config.param_offload=True {A}.fsdp_config.optimizer_offload=True")), "h100"
    )
    assert moved.host.offloaded_bytes_per_device == on.bytes["weights"] + on.bytes["grads"] + on.bytes["optimizer"]
    assert any("fsdp_config.param_offload" in t for t in moved.host.terms)
    assert moved.rollout.training_resident_bytes == 0


def test_fsdp_training_oom_names_fsdp_keys(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(fsdp(f"{A}.fsdp_config.fsdp_size=1", model="Qwen3-32B"))
    result = check(path, device="a100-40")
    [oom] = [f for f in result.findings if f.rule == "MEM-TRAIN-OOM"]
    assert oom.severity == "error" and "fsdp_config.fsdp_size" in oom.fix


def test_a_quantized_checkpoint_makes_the_kv_verdict_an_estimate(tmp_path):
    """DeepSeek-V3 ships fp8 weights: vLLM may load fewer bytes than bf16, so no certain error."""
    ro = "actor_rollout_ref.rollout"
    layout = (
        f"{M}.tensor_model_parallel_size=8 {M}.pipeline_model_parallel_size=16 {M}.expert_model_parallel_size=32 "
        f"{M}.expert_tensor_parallel_size=1 +{M}.override_transformer_config.num_layers_in_first_pipeline_stage=3 "
        f"+{M}.override_transformer_config.num_layers_in_last_pipeline_stage=2 "
        f"{ro}.tensor_model_parallel_size=16 {ro}.gpu_memory_utilization=0.5 {ro}.max_model_len=163840"
    )
    path = tmp_path / "run.sh"
    path.write_text(script(layout, model="DeepSeek-V3", nodes=64))
    est = estimate(resolve_script(path), "h100")
    assert est.rollout is not None and not est.rollout.weights_exact
    found = [f for f in check(path, device="h100").findings if f.rule == "MEM-ROLLOUT-KV"]
    assert found and all(f.severity == "warning" for f in found)


def test_a_colocated_critic_keeps_its_state_on_the_device(tmp_path):
    gae = f"{FITS} algorithm.adv_estimator=gae critic.model.path=/models/Qwen3-30B-A3B"
    est = estimate(_job(tmp_path, script(gae, nodes=4)), "h200")
    first = est.train.stages[0]
    b = first.bytes
    assert first.params.output == 0  # stage 0 of PP 4: no output layer, so the critic's share is the whole stage
    assert b["critic_state"] == b["weights"] + b["grads"] + b["optimizer"]
    assert b["allocated"] == sum(
        b[k]
        for k in (
            "weights",
            "grads",
            "optimizer",
            "gathered",
            "activations",
            "logits",
            "ref_weights",
            "critic_state",
            "workspace",
        )
    )
    off = estimate(
        _job(
            tmp_path,
            script(f"{gae} critic.megatron.param_offload=True critic.megatron.optimizer_offload=True", nodes=4),
        ),
        "h200",
    )
    assert off.train.stages[0].bytes["critic_state"] == 0
    other = estimate(
        _job(tmp_path, script(f"{FITS} algorithm.adv_estimator=gae critic.model.path=/models/Qwen3-8B", nodes=4)),
        "h200",
    )
    assert "critic_state" not in other.train.stages[0].bytes and any("critic" in p for p in other.problems)
    grpo = estimate(_job(tmp_path, script(f"{FITS} algorithm.adv_estimator=grpo", nodes=4)), "h200")
    assert "critic_state" not in grpo.train.stages[0].bytes and not any("critic" in p for p in grpo.problems)


def test_moe_combine_input_is_kept_only_before_core_0_12(tmp_path):
    """megatron-core < 0.12 weights the experts' outputs in the unpermutation and keeps them for backward; from
    0.12 the activation applies the probabilities (memory/activations.py): 2h bytes a routed token, per layer and
    micro batch in flight, on the older versions only."""
    path = tmp_path / "moe.sh"
    path.write_text(
        "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 --ffn-hidden-size 4096 "
        "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
        "--global-batch-size 8 --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 "
        "--disable-bias-linear --swiglu --vocab-size 32000 --bf16 --hidden-dropout 0 --attention-dropout 0 "
        "--train-iters 10 --lr 1e-4\n"
    )
    acts = {
        v: estimate(resolve_script(path, megatron_core_version=v)).train.stages[0].bytes["activations"]
        for v in ("0.11", "0.12", "0.16")
    }
    assert acts["0.12"] == acts["0.16"]
    assert acts["0.11"] - acts["0.16"] == pytest.approx(4 * 2048 * 2 * 2 * 1024, abs=4)  # layers · tokens · k · 2h
