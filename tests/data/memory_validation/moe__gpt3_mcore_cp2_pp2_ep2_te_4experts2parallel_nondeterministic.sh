#!/bin/bash
# Megatron-LM functional test moe/gpt3_mcore_cp2_pp2_ep2_te_4experts2parallel_nondeterministic (model_config.yaml MODEL_ARGS; paths and logging flags dropped)
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \
    --num-layers 12 \
    --hidden-size 512 \
    --num-attention-heads 8 \
    --micro-batch-size 4 \
    --global-batch-size 32 \
    --seq-length 1024 \
    --max-position-embeddings 1024 \
    --transformer-impl transformer_engine \
    --context-parallel-size 2 \
    --pipeline-model-parallel-size 2 \
    --expert-model-parallel-size 2 \
    --sequence-parallel \
    --hidden-dropout 0.0 \
    --attention-dropout 0.0 \
    --num-experts 4 \
    --moe-router-load-balancing-type sinkhorn \
    --moe-router-topk 1 \
    --no-gradient-accumulation-fusion \
    --bf16 \
    --attention-backend flash \
    --disable-bias-linear \
    --no-bias-gelu-fusion \
    --vocab-size 50257
