"""Oracle for parameter counts: megatron-core's own GPTModel, built on the meta device for one rank.

Each case initialises the real ``parallel_state`` on torch's ``fake`` process group as the rank of the
wanted pipeline stage (as Megatron-LM's ``--fake-process-group`` does), builds every virtual chunk of
that rank with the local (no Transformer Engine) layer spec on ``torch.device("meta")``, and counts
``named_parameters`` by kind. Two patches let megatron-core 0.16.1 build on a CPU-only torch, and
none adds or removes a parameter: the rotary embedding asks ``torch.cuda.current_device()`` (answered
with "meta"); tied embeddings on several stages move the shared weight with ``Tensor.cuda()`` before an
all-reduce (left on the meta device); and the local spec's ``DotProductAttention`` rejects MLA's
``k_channels`` argument, so MLA's parameter-free core attention is replaced by an empty module.

Hybrid (Gated DeltaNet) models: megatron-core's own hybrid block spec
(``get_transformer_block_with_experimental_attention_variant_spec``) asks for Transformer Engine, so the
oracle takes the local spec of every layer and puts megatron-core's ``GatedDeltaNet`` (with the local
column/row-parallel linears and norm) in the linear layers' attention slot; the TE spec fuses the input norm
into ``in_proj`` (``layer_norm_weight``, hidden wide) where the local spec keeps a separate ``input_layernorm``
of the same size. ``GatedDeltaNet`` refuses to build without the flash-linear-attention kernels (``HAVE_FLA``),
which no parameter depends on: the flag is set. MTP: ``get_gpt_mtp_block_spec`` over the same block spec.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

from shardcheck.models.architecture import Architecture


class _NoParameters(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()


def _norm(arch: Architecture) -> str:
    return "LayerNorm" if arch.norm_bias else "RMSNorm"


def _config(arch: Architecture, tp: int, pp: int, ep: int, etp: int, vpp: int | None, first, last, mtp: int = 0):
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    kwargs = dict(
        num_layers=arch.num_layers,
        hidden_size=arch.hidden,
        num_attention_heads=arch.heads,
        ffn_hidden_size=arch.ffn or arch.moe_ffn,
        normalization=_norm(arch),
        gated_linear_unit=arch.gated,
        add_bias_linear=arch.linear_bias,
        add_qkv_bias=arch.qkv_bias,
        qk_layernorm=arch.qk_layernorm,
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        expert_model_parallel_size=ep,
        expert_tensor_parallel_size=etp,
        virtual_pipeline_model_parallel_size=vpp,
        num_layers_in_first_pipeline_stage=first,
        num_layers_in_last_pipeline_stage=last,
        use_cpu_initialization=True,
        params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16,
        bf16=True,
        softmax_type="learnable" if arch.attention_sinks else "vanilla",
        attention_output_gate=arch.attention_gate,
        mtp_num_layers=mtp or None,
    )
    if arch.linear is not None and arch.linear_layers:
        g = arch.linear
        kwargs.update(
            experimental_attention_variant="gated_delta_net",
            linear_attention_freq=[int(arch.is_linear_layer(i)) for i in range(arch.num_layers)],
            linear_conv_kernel_dim=g.conv_kernel,
            linear_key_head_dim=g.key_dim,
            linear_value_head_dim=g.value_dim,
            linear_num_key_heads=g.key_heads,
            linear_num_value_heads=g.value_heads,
            perform_initialization=False,  # GatedDeltaNet.reset_parameters forks a CUDA RNG; counts do not change
        )
    if arch.experts:
        kwargs.update(
            num_moe_experts=arch.experts,
            moe_ffn_hidden_size=arch.moe_ffn,
            moe_router_topk=arch.topk,
            moe_layer_freq=[int(arch.is_moe_layer(i)) for i in range(arch.num_layers)],
            moe_token_dispatcher_type="allgather",
            moe_shared_expert_intermediate_size=arch.shared_ffn or None,
            moe_shared_expert_gate=arch.shared_gate,
        )
    if arch.mla is None:
        return TransformerConfig(num_query_groups=arch.kv_heads, kv_channels=arch.head_dim, **kwargs)
    m = arch.mla
    return MLATransformerConfig(
        q_lora_rank=m.q_lora_rank,
        kv_lora_rank=m.kv_lora_rank,
        qk_head_dim=m.qk_nope_head_dim,
        qk_pos_emb_head_dim=m.qk_rope_head_dim,
        v_head_dim=m.v_head_dim,
        rope_type="rope",
        **kwargs,
    )


def megatron_stage_params(
    arch: Architecture,
    *,
    tp: int,
    pp: int,
    ep: int,
    etp: int,
    stage: int,
    vpp: int | None = None,
    first: int | None = None,
    last: int | None = None,
    mtp: int = 0,
) -> dict[str, int]:
    """Parameters on one device of pipeline ``stage``, counted from megatron-core's GPTModel (``mtp`` MTP depths
    on the last stage)."""
    import megatron.core.ssm.gated_delta_net as gdn_module
    import megatron.core.transformer.multi_latent_attention as mla_module
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec, get_gpt_mtp_block_spec
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset

    gdn_module.HAVE_FLA = True

    torch.cuda.current_device = lambda: "meta"
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    mla_module.HAVE_TE = False
    world = pp * math.lcm(tp, ep * etp)
    rank = stage * (world // pp)  # default order tp-cp-ep-dp-pp: the pipeline rank is the outermost
    dist.init_process_group(backend="fake", store=FakeStore(), world_size=world, rank=rank)
    counts = {"embedding": 0, "dense": 0, "expert": 0, "output": 0}
    try:
        ps.initialize_model_parallel(
            tensor_model_parallel_size=tp,
            pipeline_model_parallel_size=pp,
            virtual_pipeline_model_parallel_size=vpp,
            expert_model_parallel_size=ep,
            expert_tensor_parallel_size=etp,
            create_gloo_process_groups=False,
        )
        config = _config(arch, tp, pp, ep, etp, vpp, first, last, mtp)
        chunks = vpp or 1
        for chunk in range(chunks):
            vp = chunk if vpp else None
            spec = get_gpt_decoder_block_spec(
                config, use_transformer_engine=False, normalization=_norm(arch), vp_stage=vp
            )
            offset = get_transformer_layer_offset(config, vp_stage=vp)
            assert len(spec.layer_specs) == get_num_layers_to_build(config, vp_stage=vp)
            for number, layer_spec in enumerate(spec.layer_specs, start=offset):
                if arch.mla is not None:  # other core attention is built as is (gpt-oss: its softmax offset)
                    layer_spec.submodules.self_attention.submodules.core_attention = _NoParameters
                if arch.is_linear_layer(number):  # layers of one kind share their spec object: copy this one
                    layer_spec = spec.layer_specs[number - offset] = copy.copy(layer_spec)
                    layer_spec.submodules = copy.copy(layer_spec.submodules)
                    norm = layer_spec.submodules.input_layernorm
                    layer_spec.submodules.self_attention = ModuleSpec(
                        module=gdn_module.GatedDeltaNet,
                        submodules=gdn_module.GatedDeltaNetSubmodules(
                            in_proj=ColumnParallelLinear, out_norm=norm, out_proj=RowParallelLinear
                        ),
                    )
            last_chunk = stage == pp - 1 and chunk == chunks - 1
            mtp_spec = None
            if mtp and last_chunk:
                mtp_spec = get_gpt_mtp_block_spec(config, spec, use_transformer_engine=False, vp_stage=vp)
            with torch.device("meta"):
                model = GPTModel(
                    config=config,
                    transformer_layer_spec=spec,
                    vocab_size=arch.vocab,
                    max_sequence_length=arch.position_embeddings or 4096,
                    pre_process=stage == 0 and chunk == 0,
                    post_process=last_chunk,
                    mtp_block_spec=mtp_spec,
                    share_embeddings_and_output_weights=arch.tied,
                    position_embedding_type="learned_absolute" if arch.position_embeddings else "rope",
                    vp_stage=chunk if vpp else None,
                )
            for name, p in model.named_parameters():
                if name.startswith("embedding."):
                    counts["embedding"] += p.numel()
                elif name.startswith("output_layer."):
                    counts["output"] += p.numel()
                elif ".experts." in name:
                    counts["expert"] += p.numel()
                else:
                    counts["dense"] += p.numel()
    finally:
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    counts["total"] = sum(counts.values())
    return counts
