#!/bin/bash
# Megatron-LM functional test moe/gpt3_mcore_te_tp2_pp1_te_8experts2parallel_ddp_average_in_collective (model_config.yaml MODEL_ARGS; paths and logging flags dropped)
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
    --expert-model-parallel-size 2 \
    --no-ckpt-fully-parallel-save \
    --moe-grouped-gemm \
    --disable-bias-linear \
    --sequence-parallel \
    --num-experts 8 \
    --use-distributed-optimizer \
    --moe-router-load-balancing-type sinkhorn \
    --moe-router-topk 1 \
    --overlap-grad-reduce \
    --overlap-param-gather \
    --no-gradient-accumulation-fusion \
    --attention-softmax-in-fp32 \
    --bf16 \
    --attention-backend unfused \
    --no-bias-gelu-fusion \
    --vocab-size 50257
