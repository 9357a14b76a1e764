#!/bin/bash
# Megatron-LM functional test gpt/gpt3_7b_tp4_pp1_memory_speed (model_config.yaml MODEL_ARGS; paths and logging flags dropped)
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \
    --num-layers 32 \
    --hidden-size 4096 \
    --num-attention-heads 32 \
    --group-query-attention \
    --num-query-groups 8 \
    --untie-embeddings-and-output-weights \
    --micro-batch-size 2 \
    --global-batch-size 8 \
    --seq-length 8192 \
    --max-position-embeddings 8192 \
    --tokenizer-type NullTokenizer \
    --vocab-size 131073 \
    --mock-data \
    --transformer-impl transformer_engine \
    --tensor-model-parallel-size 4 \
    --pipeline-model-parallel-size 1 \
    --use-distributed-optimizer \
    --overlap-grad-reduce \
    --overlap-param-gather \
    --no-gradient-accumulation-fusion \
    --bf16
