#!/bin/bash
# Megatron-LM functional test moe/gpt3_mcore_te_tp1_pp1_te_4experts_groupedGEMM_op_fuser (model_config.yaml MODEL_ARGS; paths and logging flags dropped)
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \
    --num-layers 4 \
    --hidden-size 512 \
    --num-attention-heads 8 \
    --micro-batch-size 4 \
    --global-batch-size 32 \
    --seq-length 1024 \
    --max-position-embeddings 1024 \
    --transformer-impl transformer_engine \
    --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 1 \
    --expert-model-parallel-size 1 \
    --moe-grouped-gemm \
    --use-transformer-engine-op-fuser \
    --disable-bias-linear \
    --num-experts 4 \
    --moe-router-load-balancing-type sinkhorn \
    --moe-router-topk 1 \
    --swiglu \
    --no-gradient-accumulation-fusion \
    --attention-softmax-in-fp32 \
    --bf16 \
    --no-bias-gelu-fusion \
    --vocab-size 50257
