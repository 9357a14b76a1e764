#!/bin/bash
# Megatron-LM pre-training of a 48-layer MoE on 2 nodes × 8 GPUs with torchrun: TP 2, PP 4 with
# VPP 2 (--num-virtual-stages-per-pipeline-rank), EP 4, ETP 1: DP 2, EDP 1.
export CUDA_DEVICE_MAX_CONNECTIONS=1
NNODES=${NNODES:-2}
GPUS_PER_NODE=8

MODEL_ARGS=(
   --num-layers 48 --hidden-size 2048 --num-attention-heads 32
   --group-query-attention --num-query-groups 4 --kv-channels 128
   --num-experts 64 --moe-router-topk 8 --moe-ffn-hidden-size 1024
   --seq-length 8192 --max-position-embeddings 32768 --vocab-size 50257
)
PARALLEL_ARGS=(
   --tensor-model-parallel-size 2 --sequence-parallel
   --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2
   --expert-model-parallel-size 4 --expert-tensor-parallel-size 1
)

torchrun --nnodes ${NNODES} --nproc-per-node ${GPUS_PER_NODE} pretrain_gpt.py \
   "${MODEL_ARGS[@]}" "${PARALLEL_ARGS[@]}" \
   --micro-batch-size 1 --global-batch-size 256 --use-distributed-optimizer --bf16 \
   --train-iters 10000 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 500
