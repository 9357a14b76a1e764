"""The published recommended layouts against the planner (docs/validation.md, "Recommended layouts").

Megatron-Bridge publishes, per model and cluster, the layout NVIDIA tuned for it: its performance scripts'
H100 BF16 presets and the layouts of its performance tables (tests/data/published_step_times.json). Each is
written as the Megatron-LM pre-training launch of the same model, cluster, global and micro batch, sequence length
and layout (distributed optimizer, sequence parallel with TP, bf16 with gradients reduced in bf16 and the DP
communication overlapped, as the performance configs set; the FP8 table rows with their FP8 settings, the MoE
presets with their EP all-to-all overlap) and planned on
H100-SXM-80GB: the script's own layout is the published one, so its rank among the planner's valid layouts is
the published layout's rank. The results are recorded in ``recommended_layout_ranks`` of the data file and
replayed here, so the table cannot drift from the model.
``SHARDCHECK_RECORD_RANKS=1 python -m pytest -p no:cacheprovider tests/test_recommended_layouts.py -s`` records
them again (after a change to the model that is meant to move them) and prints the table's rows.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from shardcheck.api import resolve_script
from shardcheck.plan.search import adapter_for, plan_job, space_for

DATA = Path(__file__).parent / "data" / "published_step_times.json"
RANK_BUDGET = 50  # candidates judged past the top to rank the published layout (the CLI default; else "> N")

# Megatron-LM flags of each model's architecture (the Hugging Face config.json of the released checkpoint:
# layers, hidden, FFN, heads, KV groups, head dim, vocab; Llama 3.1 and Qwen3 use RMSNorm, SwiGLU, RoPE, no
# linear biases and untied embeddings; Qwen3 adds the QK layer norm). Both families train without dropout in
# Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge c3e43e6aa, src/megatron/bridge/models/llama/llama_provider.py
# Llama3ModelProvider and models/qwen/qwen_provider.py Qwen3MoEModelProvider: hidden_dropout = attention_dropout
# = 0.0), where Megatron-LM's flags default to 0.1 (masks the estimate would count)
COMMON = (
    "--normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear "
    "--untie-embeddings-and-output-weights --group-query-attention --kv-channels 128 "
    "--hidden-dropout 0.0 --attention-dropout 0.0"
)
MODELS = {
    "Llama-3.1-8B": "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
    "--num-query-groups 8 --vocab-size 128256",
    "Llama-3.1-70B": "--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
    "--num-query-groups 8 --vocab-size 128256",
    "Llama-3.1-405B": "--num-layers 126 --hidden-size 16384 --ffn-hidden-size 53248 --num-attention-heads 128 "
    "--num-query-groups 8 --vocab-size 128256",
    "Qwen3-30B-A3B": "--num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 "
    "--num-query-groups 4 --vocab-size 151936 --qk-layernorm --num-experts 128 --moe-router-topk 8 "
    "--moe-ffn-hidden-size 768",
    "Qwen3-235B-A22B": "--num-layers 94 --hidden-size 4096 --ffn-hidden-size 12288 --num-attention-heads 64 "
    "--num-query-groups 4 --vocab-size 151936 --qk-layernorm --num-experts 128 --moe-router-topk 8 "
    "--moe-ffn-hidden-size 1536",
}
LAYERS = {"Llama-3.1-8B": 32, "Llama-3.1-70B": 80, "Llama-3.1-405B": 126, "Qwen3-30B-A3B": 48, "Qwen3-235B-A22B": 94}


def launch(row: dict) -> str:
    """The Megatron-LM pre-training launch of a published row (torchrun, 8 GPUs a node)."""
    layers = LAYERS[row["model"]]
    parallel = [
        f"--tensor-model-parallel-size {row['tp']}",
        f"--pipeline-model-parallel-size {row['pp']}",
        f"--context-parallel-size {row['cp']}",
    ]
    if row["tp"] > 1:
        parallel.append("--sequence-parallel")
    if row["ep"] > 1:
        parallel.append(f"--expert-model-parallel-size {row['ep']} --expert-tensor-parallel-size 1")
    if row["vpp"]:
        parallel.append(f"--num-virtual-stages-per-pipeline-rank {row['vpp']}")
    if row.get("recompute_num_layers"):
        # Megatron-Bridge's recompute_num_layers: full recompute, block method (scripts/performance/utils/overrides.py)
        parallel.append(
            f"--recompute-granularity full --recompute-method block --recompute-num-layers "
            f"{row['recompute_num_layers']}"
        )
    if row.get("moe_a2a_overlap"):
        # the preset's moe_a2a_overlap (Megatron-Bridge scripts/performance/utils/overrides.py), with the alltoall
        # dispatcher it needs, which Bridge's Qwen3 providers set (src/megatron/bridge/models/qwen/qwen_provider.py)
        parallel.append("--overlap-moe-expert-parallel-comm --delay-wgrad-compute --moe-token-dispatcher-type alltoall")
    if layers % row["pp"] or (row["vpp"] and (layers // row["pp"]) % row["vpp"]):
        # Megatron-Bridge's recipes for these counts (126 = 8·8·2 − 2, 94 = 8·4·3 − 2) count the embedding
        # and the loss as layers in the pipeline split
        parallel.append("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split")
    # FP8-CS rows: Megatron-Bridge's fp8_cs precision (scripts/performance/utils/precision.py): hybrid format,
    # tensorwise (current) scaling, FP8 parameter gather
    fp8 = " --fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather" if row["precision"] == "fp8" else ""
    return (
        "#!/bin/bash\n"
        f"torchrun --nnodes {row['gpus'] // 8} --nproc-per-node 8 pretrain_gpt.py \\\n"
        f"    {MODELS[row['model']]} {COMMON} \\\n"
        f"    --seq-length {row['seq']} --max-position-embeddings {row['seq']} \\\n"
        f"    {' '.join(parallel)} \\\n"
        f"    --micro-batch-size {row['mbs']} --global-batch-size {row['gbs']} --use-distributed-optimizer \\\n"
        f"    --bf16{fp8} \\\n"
        "    --train-iters 1000 --lr 3e-4 \\\n"
        # Megatron-Bridge's performance configs reduce gradients in bf16 (llama3_llm_pretrain.py,
        # llama31_llm_pretrain.py, qwen3_llm_pretrain.py: cfg.ddp.grad_reduce_in_fp32 = False) and its recipes
        # overlap the gradient reduce and the parameter gather (recipes/llama/llama3.py, qwen/qwen3_moe.py:
        # DistributedDataParallelConfig(overlap_grad_reduce=True, overlap_param_gather=True))
        "    --grad-reduce-in-bf16 --overlap-grad-reduce --overlap-param-gather\n"
    )


def published_rank(row: dict, tmp: Path, *, rank: bool = True, best: bool = False) -> dict:
    """Whether the planner keeps the published layout (every rule, the memory margin), its peak and time; with
    ``rank`` its rank among the planner's layouts on H100-SXM-80GB when it is kept; with ``best`` (or when it is
    ranked) the planner's first plan."""
    path = tmp / f"{row['model']}-{row['gpus']}-{row['gbs']}.sh"
    path.write_text(launch(row))
    job = resolve_script(path)
    # the default space tries VPP up to 4 (docs/plan.md); the published VPP is added so its layout is searched
    space = space_for(job, adapter_for(job))
    vpps = tuple(v for v in space.vpp if v is not None)
    space = replace(space, vpp=(None, *sorted(set(vpps) | ({row["vpp"]} if row["vpp"] else set()))))
    result = plan_job(job, device="H100-SXM-80GB", top=0, rank_budget=0, space=space)  # the layout alone
    assert result.current is not None, row  # the published layout is in the searched space and timed
    out = {
        "rank": None,  # None: not ranked (not kept, or not asked), or more than ``faster`` layouts are faster
        "faster": None,
        "valid": result.current_valid,
        "errors": sorted({f.rule for f in result.current_errors}),
        "peak_gib": round(result.current.peak_bytes / 2**30, 1),
        "published_seconds": round(result.current.seconds, 2),
    }
    rank = rank and result.current_valid
    if rank or best:
        result = plan_job(job, device="H100-SXM-80GB", top=5, rank_budget=RANK_BUDGET if rank else 0, space=space)
        if rank:
            out["rank"], out["faster"] = result.current_rank, result.rank_floor
        first = result.plans[0]
        t = first.layout
        sizes = f"TP {t.tp} PP {t.pp} CP {t.cp} EP {t.ep} ETP {t.etp or t.tp} VPP {t.vpp or '-'}"
        out["best"] = f"{sizes} {first.memory.recompute[0]}"
        out["best_seconds"] = round(first.seconds, 2)
        out["best_peak_gib"] = round(first.peak_bytes / 2**30, 1)
    return out


SECTIONS = ("recommended_h100_bf16", "table_25_09_h100", "table_26_02_h100")
RANKED = "recommended_h100_bf16"  # the recommended-layout check; the FP8 table rows (their layouts, timed in bf16)
# are replayed for whether the planner keeps them, their peak and time (their best plans are recorded once)


def _rows() -> list[tuple[str, dict]]:
    data = json.loads(DATA.read_text())
    return [(table, row) for table in SECTIONS for row in data[table]]


def dump(data: dict) -> str:
    """The data file as it is kept: one row (or one recorded rank) a line."""
    out = ["{"]
    for i, (key, value) in enumerate(data.items()):
        end = "," if i < len(data) - 1 else ""
        if isinstance(value, list):
            rows = ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in value)
            out += [f" {json.dumps(key)}: [", rows, " ]" + end]
        elif isinstance(value, dict):
            rows = ",\n".join(f"  {json.dumps(k)}: " + json.dumps(v, ensure_ascii=False) for k, v in value.items())
            out += [f" {json.dumps(key)}: {{", rows, " }" + end]
        else:
            out.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}" + end)
    return "\n".join(out + ["}"]) + "\n"


def _key(table: str, row: dict) -> str:
    return f"{table} {row['model']} {row['gpus']}"


@pytest.mark.skipif(os.environ.get("SHARDCHECK_RECORD_RANKS") != "1", reason="records the ranks on request")
def test_record_ranks(tmp_path):  # pragma: no cover - run by hand
    data = json.loads(DATA.read_text())
    recorded = {}
    for table, row in _rows():
        got = published_rank(row, tmp_path, rank=table == RANKED, best=True)
        recorded[_key(table, row)] = got
        rank = (
            f"#{got['rank']}"
            if got["rank"]
            else f"> {got['faster']}"
            if got["faster"] is not None
            else "kept"
            if got["valid"]
            else "not kept"
        )
        print(
            f"| {table} | {row['model']} | {row['gpus']} | TP {row['tp']} PP {row['pp']} CP {row['cp']} "
            f"VP {row['vpp'] or '–'} EP {row['ep']} | {rank} | {got['peak_gib']} | {got['published_seconds']} | "
            f"{got['best']} | {got['best_peak_gib']} | {got['best_seconds']} |"
        )
    data["recommended_layout_ranks"] = recorded
    DATA.write_text(dump(data))


@pytest.mark.parametrize("table,row", _rows(), ids=[_key(t, r).replace(" ", "-") for t, r in _rows()])
def test_published_layout_rank_replays(table, row, tmp_path):
    recorded = json.loads(DATA.read_text()).get("recommended_layout_ranks", {}).get(_key(table, row))
    assert recorded is not None, "no recorded rank: run with SHARDCHECK_RECORD_RANKS=1"
    got = published_rank(row, tmp_path, rank=table == RANKED)
    if "best" in got:
        assert got["best"] == recorded["best"]
    assert (got["rank"], got["faster"], got["valid"]) == (recorded["rank"], recorded["faster"], recorded["valid"]), (
        f"{_key(table, row)}: the published layout's rank moved from {recorded} to {got}; if the change is "
        "intended, record again and update docs/validation.md"
    )
    assert got["published_seconds"] == pytest.approx(recorded["published_seconds"], rel=0.02)
