"""Measure one training step's peak allocated memory with megatron-core on one GPU, beside shardcheck's prediction.

For each layout below (small Qwen3-MoE-shaped and dense GPT models) the script writes the equivalent
Megatron-LM launch (``torchrun --nproc-per-node 1 pretrain_gpt.py <flags>``), asks shardcheck for the
last (only) pipeline stage's ``allocated`` figure, then builds the same model with megatron-core on one
rank (torch.distributed with world size 1, TP = PP = EP = 1, the local layer spec: no Transformer Engine
needed), wraps it in Megatron's DistributedDataParallel with the distributed optimizer (Adam, bf16 with
fp32 main parameters and gradients), and runs two training steps on random tokens (the first creates
Adam's state). It prints ``torch.cuda.max_memory_allocated()`` and the prediction per layout, and with
``--json FILE`` writes the rows in the form of tests/data/memory_validation/rows.json.

Usage (a CUDA machine with megatron-core and torch): python bench/gpu_memory_measure.py [--json out.json]
Without a GPU: python bench/gpu_memory_measure.py --dry-run  (builds the launches and the predictions and
imports the megatron-core pieces; measures nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


@dataclass(frozen=True)
class Layout:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    seq: int
    micro: int = 1
    vocab: int = 32000
    experts: int = 0
    topk: int = 0
    moe_ffn: int = 0
    recompute: str | None = None  # None | "full" | "selective"
    extra: dict = field(default_factory=dict)

    def flags(self) -> list[str]:
        """The Megatron-LM flags of this layout (what shardcheck reads)."""
        f = [
            f"--num-layers {self.layers}",
            f"--hidden-size {self.hidden}",
            f"--num-attention-heads {self.heads}",
            "--group-query-attention",
            f"--num-query-groups {self.kv_heads}",
            f"--kv-channels {self.hidden // self.heads}",
            f"--ffn-hidden-size {self.ffn}",
            "--swiglu",
            "--normalization RMSNorm",
            "--disable-bias-linear",
            "--position-embedding-type rope",
            "--untie-embeddings-and-output-weights",
            f"--vocab-size {self.vocab}",
            "--make-vocab-size-divisible-by 128",
            f"--seq-length {self.seq}",
            f"--max-position-embeddings {self.seq}",
            f"--micro-batch-size {self.micro}",
            f"--global-batch-size {self.micro}",
            "--bf16",
            "--use-distributed-optimizer",
            "--transformer-impl local",
            "--hidden-dropout 0",
            "--attention-dropout 0",
            "--tensor-model-parallel-size 1",
            "--pipeline-model-parallel-size 1",
        ]
        if self.experts:
            f += [
                f"--num-experts {self.experts}",
                f"--moe-router-topk {self.topk}",
                f"--moe-ffn-hidden-size {self.moe_ffn}",
                "--moe-token-dispatcher-type alltoall",
            ]
        if self.recompute == "full":
            f += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
        elif self.recompute == "selective":
            f += ["--recompute-granularity selective"]
        return f


LAYOUTS = [
    Layout("dense-4L-h1024-s2048", 4, 1024, 16, 4, 3072, 2048),
    Layout("dense-4L-h1024-s4096", 4, 1024, 16, 4, 3072, 4096),
    Layout("dense-4L-h1024-s4096-full-recompute", 4, 1024, 16, 4, 3072, 4096, recompute="full"),
    Layout("dense-4L-h1024-s4096-selective", 4, 1024, 16, 4, 3072, 4096, recompute="selective"),
    Layout("qwen3moe-4L-h1024-e16k4-s2048", 4, 1024, 16, 4, 3072, 2048, experts=16, topk=4, moe_ffn=768),
    Layout("qwen3moe-4L-h1024-e16k4-s4096", 4, 1024, 16, 4, 3072, 4096, experts=16, topk=4, moe_ffn=768),
    Layout(
        "qwen3moe-4L-h1024-e16k4-s4096-full",
        4,
        1024,
        16,
        4,
        3072,
        4096,
        experts=16,
        topk=4,
        moe_ffn=768,
        recompute="full",
    ),
]


def predict(layout: Layout) -> int | None:
    from shardcheck.api import resolve_script
    from shardcheck.memory.validation import predict as shardcheck_predict

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{layout.name}.sh"
        path.write_text("torchrun --nnodes 1 --nproc-per-node 1 pretrain_gpt.py " + " ".join(layout.flags()) + "\n")
        return shardcheck_predict(resolve_script(path), "h200")


def _config(layout: Layout):
    import torch
    from megatron.core.transformer.transformer_config import TransformerConfig

    kw = dict(
        num_layers=layout.layers,
        hidden_size=layout.hidden,
        num_attention_heads=layout.heads,
        num_query_groups=layout.kv_heads,
        kv_channels=layout.hidden // layout.heads,
        ffn_hidden_size=layout.ffn,
        gated_linear_unit=True,
        activation_func=torch.nn.functional.silu,
        normalization="RMSNorm",
        add_bias_linear=False,
        bf16=True,
        params_dtype=torch.bfloat16,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        gradient_accumulation_fusion=False,
        bias_activation_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        apply_rope_fusion=False,
        pipeline_dtype=torch.bfloat16,
    )
    if layout.experts:
        kw.update(
            num_moe_experts=layout.experts,
            moe_router_topk=layout.topk,
            moe_ffn_hidden_size=layout.moe_ffn,
            moe_token_dispatcher_type="alltoall",
            moe_aux_loss_coeff=0.0,
        )
    if layout.recompute == "full":
        kw.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    elif layout.recompute == "selective":
        kw.update(recompute_granularity="selective")
    return TransformerConfig(**kw)


def measure(layout: Layout) -> int:
    """Two training steps of ``layout`` on this GPU; torch.cuda.max_memory_allocated() over both."""
    import torch
    from megatron.core import parallel_state, tensor_parallel
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    config = _config(layout)
    spec = get_gpt_layer_local_spec(num_experts=layout.experts or None, normalization="RMSNorm")
    padded = -(-layout.vocab // 128) * 128
    model = GPTModel(
        config=config,
        transformer_layer_spec=spec,
        vocab_size=padded,
        max_sequence_length=layout.seq,
        position_embedding_type="rope",
        share_embeddings_and_output_weights=False,
    ).cuda()
    ddp = DistributedDataParallelConfig(grad_reduce_in_fp32=True, use_distributed_optimizer=True)
    model = DistributedDataParallel(config, ddp, model)
    opt = get_megatron_optimizer(
        OptimizerConfig(optimizer="adam", lr=1e-4, bf16=True, use_distributed_optimizer=True), [model]
    )
    tokens = torch.randint(0, layout.vocab, (layout.micro, layout.seq), device="cuda")
    position = torch.arange(layout.seq, device="cuda").unsqueeze(0).expand(layout.micro, -1)
    for _ in range(2):
        model.zero_grad_buffer()
        opt.zero_grad()
        loss = model(tokens, position, None, labels=tokens)
        loss.float().mean().backward()
        model.finish_grad_sync()
        opt.step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del model, opt, loss
    tensor_parallel.random.get_cuda_rng_tracker().reset()
    parallel_state.destroy_model_parallel()
    return peak


def _init() -> None:
    import torch
    from megatron.core import parallel_state, tensor_parallel

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    tensor_parallel.model_parallel_cuda_manual_seed(1234)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry-run", action="store_true", help="predictions and imports only (no GPU needed)")
    parser.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    parser.add_argument("--only", metavar="NAME", help="measure only layouts whose name contains NAME")
    args = parser.parse_args()
    rows = []
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            print("no CUDA device: run with --dry-run, or on a machine with a GPU", file=sys.stderr)
            return 2
        device = torch.cuda.get_device_name()
    else:
        # the pieces the measurement uses, imported to show they exist in this megatron-core
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig  # noqa: F401
        from megatron.core.models.gpt import GPTModel  # noqa: F401
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: F401
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer  # noqa: F401

        device = "none (dry run)"
    for layout in LAYOUTS:
        if args.only and args.only not in layout.name:
            continue
        predicted = predict(layout)
        if not args.dry_run:
            _config(layout)  # the config is valid before any GPU work
            _init()
            measured = measure(layout)
        else:
            _config(layout)
            measured = None
        ratio = predicted / measured if measured and predicted else None
        rows.append(
            {
                "case": layout.name,
                "flags": layout.flags(),
                "device": device,
                "measured_allocated": measured,
                "predicted_allocated": predicted,
                "ratio": round(ratio, 4) if ratio else None,
            }
        )
        shown = f"{measured / 2**30:8.3f}" if measured else "       -"
        print(
            f"{layout.name:44} measured {shown} GiB  predicted {predicted / 2**30:8.3f} GiB"
            + (f"  ratio {ratio:.3f}" if ratio else "")
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
