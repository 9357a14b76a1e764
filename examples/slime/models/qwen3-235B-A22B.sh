# Qwen3-235B-A22B as Megatron-LM flags (sourced by the launch scripts next to this folder).
NLAYERS=94

MODEL_ARGS=(
   --disable-bias-linear
   --qk-layernorm
   --group-query-attention
   --num-attention-heads 64
   --num-query-groups 4
   --kv-channels 128
   --num-layers ${NLAYERS}
   --hidden-size 4096
   --ffn-hidden-size 12288
   --normalization RMSNorm
   --position-embedding-type rope
   --swiglu
   --untie-embeddings-and-output-weights
   --vocab-size 151936
   --rotary-base "${MODEL_ARGS_ROTARY_BASE:-1000000}"

   # moe
   --moe-ffn-hidden-size 1536
   --moe-router-topk 8
   --num-experts 128
   --moe-grouped-gemm
)
