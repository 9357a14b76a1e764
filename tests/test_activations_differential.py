"""shardcheck's MoE activation terms (memory/activations.py) against what megatron-core's own MoE layer keeps for
backward: one TransformerLayer of the local spec run on CPU under saved-tensor hooks (tests/oracle/
moe_saved_tensors.py, in a subprocess). Skips without torch and megatron-core.

What the local spec shares with the Transformer Engine spec the performance presets use, and is compared: the
router (its input, the norm's output; fp32 logits), the token permutation, the experts' fc1 input, fc1 output
(the SwiGLU's input), activation output (fc2's input), and that nothing keeps the experts' output for the
combine (megatron-core >= 0.12 applies the routing probabilities in the activation). What differs and is not
compared by size: the local norms keep fp32 copies of their input where TE's RMSNorm keeps the bf16 input and an
fp32 rsigma; the local core attention is unfused (the s-wide softmax) where TE runs fused/flash attention; the
local ``SequentialMLP`` splits per expert where TE's grouped GEMM keeps one tensor (same bytes).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from shardcheck.frameworks.memory_settings import Kernels
from shardcheck.memory.activations import Parallel, attention_bytes, moe_bytes
from shardcheck.models.architecture import Architecture

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("megatron.core") is None,
    reason="needs torch and megatron-core",
)

ORACLE = Path(__file__).parent / "oracle" / "moe_saved_tensors.py"
# Qwen3-MoE-shaped (GQA, QK norm, SwiGLU experts, top-k of many), small enough for a CPU: the index tensors
# shardcheck leaves out (top-k indices and scores, the routing map) stay under 3 % of the MoE block
CASE = {"hidden": 512, "heads": 4, "kv_heads": 2, "head_dim": 64, "experts": 8, "topk": 2, "moe_ffn": 128}
SEQ, MBS = 128, 2


def _arch() -> Architecture:
    c = CASE
    return Architecture(
        model_type="qwen3_moe",
        num_layers=1,
        hidden=c["hidden"],
        ffn=4 * c["hidden"],
        heads=c["heads"],
        kv_heads=c["kv_heads"],
        head_dim=c["head_dim"],
        vocab=1024,
        tied=False,
        qk_layernorm=True,
        qkv_bias=False,
        experts=c["experts"],
        topk=c["topk"],
        moe_ffn=c["moe_ffn"],
        moe_layers=frozenset({0}),
    )


@pytest.fixture(scope="module", params=["alltoall", "allgather"])
def measured(request) -> dict:
    case = {**CASE, "seq": SEQ, "mbs": MBS, "dispatcher": request.param}
    run = subprocess.run(
        [sys.executable, str(ORACLE), json.dumps(case)], capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_moe_block_bytes_match_megatron_core(measured):
    arch, tokens = _arch(), SEQ * MBS
    # moe_bytes counts the pre-MLP norm's input too; the oracle's ``mlp`` group starts at the router
    predicted = moe_bytes(arch, tokens, Parallel(), Kernels()) - tokens * 2 * arch.hidden
    assert predicted == pytest.approx(measured["mlp"], rel=0.03), (predicted, measured["mlp"])
    # megatron-core < 0.12 kept the experts' output for the probability-weighted unpermutation: 2h more a routed token
    older = moe_bytes(arch, tokens, Parallel(), Kernels(moe_probs_at_combine=True)) - tokens * 2 * arch.hidden
    assert older - predicted == tokens * arch.topk * 2 * arch.hidden


def test_qk_norms_keep_their_inputs(measured):
    """The Q and K norms keep at least their bf16 inputs (2·(a + kv)·d a token) apart from what the core
    attention keeps (the local norms keep fp32 copies: more); shardcheck counts the bf16 inputs."""
    arch, tokens = _arch(), SEQ * MBS
    qk = 2 * (arch.heads + arch.kv_heads) * arch.head_dim
    assert measured["qk_norm"] >= tokens * qk
    without = replace(arch, qk_layernorm=False)
    assert attention_bytes(arch, tokens, SEQ, Parallel()) - attention_bytes(without, tokens, SEQ, Parallel()) == (
        tokens * qk
    )
