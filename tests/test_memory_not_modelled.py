"""Settings whose memory the estimate does not model are said (MEM-NOT-MODELLED), never judged silently."""

from __future__ import annotations

from test_rules import A, M, script

from shardcheck.api import check
from shardcheck.rules.examples import megatron_lm_launch

OTC = f"{M}.override_transformer_config"


def _run(tmp_path, text):
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = check(path, device="h200")
    assert result.error is None, result.error
    return result, [f for f in result.findings if f.rule == "MEM-NOT-MODELLED"]


def _fsdp(overrides: str) -> str:
    return script(
        f"{A}.use_dynamic_bsz=True {A}.ppo_max_token_len_per_gpu=16384 {overrides}",
        model="Qwen2.5-14B",
        config="--config-name=ppo_trainer",
    )


def test_bitsandbytes_8bit_adam_is_said_not_judged(tmp_path):
    result, said = _run(tmp_path, _fsdp(f"{A}.optim.optimizer=AdamW8bit {A}.optim.optimizer_impl=bitsandbytes.optim"))
    [f] = said
    assert f.severity == "info" and "bitsandbytes' 8-bit optimizer state is not modelled" in f.message
    assert f.origin is not None and f.origin.line is not None
    assert not [x for x in result.findings if x.rule == "MEM-TRAIN-OOM"]


def test_adamw_is_judged_without_the_line(tmp_path):
    _, said = _run(tmp_path, _fsdp(f"{A}.optim.optimizer=AdamW"))
    assert said == []


def test_verl_cuda_graphs_are_said_and_the_estimate_kept(tmp_path):
    result, said = _run(tmp_path, script(f"+{OTC}.cuda_graph_impl=transformer_engine"))
    [f] = said
    assert "CUDA graphs" in f.message and "cuda_graph_impl=transformer_engine" in f.message
    _, plain = _run(tmp_path, script(""))
    assert plain == []


def test_megatron_lm_enable_cuda_graph_is_said(tmp_path):
    base = "--bf16 --vocab-size 151936"
    _, said = _run(tmp_path, megatron_lm_launch(f"{base} --enable-cuda-graph"))
    assert [f.message for f in said] == [
        "CUDA graphs (--enable-cuda-graph): their static buffers and memory pool are not in the estimate"
    ]
    _, plain = _run(tmp_path, megatron_lm_launch(base))
    assert plain == []
