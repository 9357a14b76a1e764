#!/bin/bash
# Megatron-LM functional test gpt/gpt3_mcore_te_tp2_zp_z3_resume_fsdp_dtensor (model_config.yaml MODEL_ARGS; paths and logging flags dropped)
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \
    --num-layers 12 \
    --hidden-size 512 \
    --num-attention-heads 8 \
    --micro-batch-size 4 \
    --global-batch-size 32 \
    --seq-length 1024 \
    --max-position-embeddings 1024 \
    --transformer-impl transformer_engine \
    --tensor-model-parallel-size 2 \
    --use-megatron-fsdp \
    --calculate-per-token-loss \
    --use-distributed-optimizer \
    --no-gradient-accumulation-fusion \
    --megatron-fsdp-main-params-dtype fp32 \
    --megatron-fsdp-main-grads-dtype fp32 \
    --megatron-fsdp-grad-comm-dtype fp32 \
    --attention-softmax-in-fp32 \
    --use-checkpoint-opt_param-scheduler \
    --bf16 \
    --vocab-size 50257
