#!/bin/bash
# Megatron-LM functional test moe/gpt3_mcore_te_tp2_pp1_te_8experts_etp1_ep4 (model_config.yaml MODEL_ARGS; paths and logging flags dropped)
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
    --pipeline-model-parallel-size 1 \
    --expert-model-parallel-size 4 \
    --expert-tensor-parallel-size 1 \
    --disable-bias-linear \
    --sequence-parallel \
    --num-experts 8 \
    --moe-router-load-balancing-type aux_loss \
    --moe-router-topk 2 \
    --moe-aux-loss-coeff 1e-2 \
    --no-gradient-accumulation-fusion \
    --moe-grouped-gemm \
    --attention-softmax-in-fp32 \
    --bf16 \
    --attention-backend unfused \
    --no-bias-gelu-fusion \
    --vocab-size 50257
