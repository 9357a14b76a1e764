#!/bin/bash
# Megatron-LM functional test gpt/gpt3_weekly_mcore_tp4_cp2_current_scaling_native_fp8_tp_sp_cp_tp_overlap (model_config.yaml MODEL_ARGS; paths and logging flags dropped)
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \
    --num-layers 12 \
    --hidden-size 512 \
    --num-attention-heads 8 \
    --micro-batch-size 2 \
    --global-batch-size 128 \
    --seq-length 1024 \
    --max-position-embeddings 1024 \
    --transformer-impl transformer_engine \
    --tensor-model-parallel-size 4 \
    --context-parallel-size 2 \
    --sequence-parallel \
    --no-gradient-accumulation-fusion \
    --fp8-format hybrid \
    --fp8-recipe tensorwise \
    --fp8-param-gather \
    --use-distributed-optimizer \
    --attention-softmax-in-fp32 \
    --bf16 \
    --normalization RMSNorm \
    --vocab-size 50257
