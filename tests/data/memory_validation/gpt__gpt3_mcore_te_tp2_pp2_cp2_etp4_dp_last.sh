#!/bin/bash
# Megatron-LM functional test gpt/gpt3_mcore_te_tp2_pp2_cp2_etp4_dp_last (model_config.yaml MODEL_ARGS; paths and logging flags dropped)
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
    --pipeline-model-parallel-size 2 \
    --context-parallel-size 2 \
    --sequence-parallel \
    --hidden-dropout 0.0 \
    --attention-dropout 0.0 \
    --no-gradient-accumulation-fusion \
    --attention-softmax-in-fp32 \
    --bf16 \
    --attention-backend flash \
    --use-tp-pp-dp-mapping \
    --expert-tensor-parallel-size 4 \
    --vocab-size 50257
