"""Oracle for activation bytes: what megatron-core's own TransformerLayer keeps for backward, on CPU.

Run as a script (one process per case, so its patches and process group stay out of the test process):
``python moe_saved_tensors.py '<json case>'`` prints a JSON object of bytes per group. It builds one MoE
``TransformerLayer`` with the local (no Transformer Engine) spec — ``SequentialMLP`` experts, the case's token
dispatcher — on a one-rank gloo process group, runs one forward of ``[seq, mbs, hidden]`` bf16 under
``torch.autograd.graph.saved_tensors_hooks`` and sums the distinct storages saved for backward (parameters
excluded), grouped by the module that saved them first: ``mlp`` (router, dispatcher, experts), ``qk_norm``
(the Q and K layer norms, counting only storages the core attention does not also keep).

Four patches let megatron-core 0.16.1 run a forward on a CPU-only torch, none of which changes what is saved:
the alltoall dispatcher's device-to-host copy stream (``torch.cuda.Stream``, ``current_stream``, ``stream``) is
a no-op stream; ``torch.cuda.current_device()`` answers "cpu" (the unfused attention's scratch buffer); the
model-parallel RNG tracker's ``fork`` is a no-op (dropout is 0); and ``moe_utils.te_general_gemm``, which
megatron-core reads unguarded without Transformer Engine, is None. The causal mask is passed explicitly (the
default one is built on CUDA).
"""

from __future__ import annotations

import contextlib
import json
import sys
import warnings


class _Stream:
    def wait_stream(self, other):
        pass

    def record_event(self):
        return _Event()


class _Event:
    def synchronize(self):
        pass


def measure(case: dict) -> dict:
    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist

    stream = _Stream()
    torch.cuda.Stream = lambda *a, **kw: stream
    torch.cuda.current_stream = lambda *a, **kw: stream
    torch.cuda.stream = lambda s: contextlib.nullcontext()
    torch.cuda.current_device = lambda: "cpu"
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)

    import megatron.core.tensor_parallel.random as rng
    import megatron.core.transformer.moe.moe_utils as moe_utils
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    parallel_state.initialize_model_parallel(1, 1)
    moe_utils.te_general_gemm = getattr(moe_utils, "te_general_gemm", None)
    rng.get_cuda_rng_tracker().fork = lambda *a, **kw: contextlib.nullcontext()

    c = case
    config = TransformerConfig(
        num_layers=1,
        hidden_size=c["hidden"],
        num_attention_heads=c["heads"],
        num_query_groups=c["kv_heads"],
        kv_channels=c["head_dim"],
        ffn_hidden_size=4 * c["hidden"],
        num_moe_experts=c["experts"],
        moe_router_topk=c["topk"],
        moe_ffn_hidden_size=c["moe_ffn"],
        gated_linear_unit=True,
        activation_func=torch.nn.functional.silu,
        add_bias_linear=False,
        normalization="RMSNorm",
        qk_layernorm=True,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bf16=True,
        params_dtype=torch.bfloat16,
        moe_token_dispatcher_type=c["dispatcher"],
        moe_grouped_gemm=False,
        bias_activation_fusion=True,
        moe_aux_loss_coeff=1e-3,
        use_cpu_initialization=True,
        gradient_accumulation_fusion=False,
        moe_router_force_load_balancing=True,
    )
    spec = get_gpt_layer_local_spec(
        num_experts=c["experts"], moe_grouped_gemm=False, qk_layernorm=True, normalization="RMSNorm"
    )
    layer = build_module(spec, config=config, layer_number=1).to(torch.bfloat16)
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    stack: list[str] = []
    for name, module in layer.named_modules():
        module.register_forward_pre_hook(lambda m, i, name=name: stack.append(name))
        module.register_forward_hook(lambda m, i, o: (stack.pop(), None)[1])
    first: dict[int, tuple[int, str]] = {}
    users: dict[int, set[str]] = {}

    def pack(t):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params:
            where = stack[-1] if stack else ""
            first.setdefault(ptr, (storage.nbytes(), where))
            users.setdefault(ptr, set()).add(where)
        return t

    s, b, h = c["seq"], c["mbs"], c["hidden"]
    x = torch.randn(s, b, h, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.triu(torch.ones(1, 1, s, s, dtype=torch.bool), diagonal=1)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out, _ = layer(x, attention_mask=mask)
    out.float().sum().backward()  # the saved tensors suffice for a backward
    groups = {"mlp": 0, "qk_norm": 0, "total": 0}
    for ptr, (nbytes, where) in first.items():
        groups["total"] += nbytes
        if where == "mlp" or where.startswith("mlp."):
            groups["mlp"] += nbytes
        elif where.endswith(("q_layernorm", "k_layernorm")) and not any("core_attention" in u for u in users[ptr]):
            groups["qk_norm"] += nbytes
    return groups


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))))
