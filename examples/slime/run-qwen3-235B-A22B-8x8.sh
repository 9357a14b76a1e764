#!/bin/bash
# GRPO of Qwen3-235B-A22B with slime on 8 nodes × 8 GPUs: TP 4, PP 4, CP 2, EP 16, ETP 1,
# 22 layers on the last stage (24, 24, 24, 22); SGLang rollout of 2 engines × 32 GPUs (DP attention 4, EP 32).
pkill -9 sglang
ray stop --force
pkill -9 python
set -ex

export PYTHONUNBUFFERED=1
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
source "${SCRIPT_DIR}/models/qwen3-235B-A22B.sh"

CKPT_ARGS=(
   --hf-checkpoint /data/Qwen3-235B-A22B
   --ref-load /data/Qwen3-235B-A22B_torch_dist
)

ROLLOUT_ARGS=(
   --rollout-batch-size 8
   --n-samples-per-prompt 8
   --rollout-max-prompt-len 2048 --rollout-max-response-len 8192
   --global-batch-size 64
)

PERF_ARGS=(
   --tensor-model-parallel-size 4
   --sequence-parallel
   --pipeline-model-parallel-size 4
   --context-parallel-size 2
   --expert-model-parallel-size 16
   --expert-tensor-parallel-size 1
   --decoder-last-pipeline-num-layers 22

   --recompute-granularity full
   --recompute-method uniform
   --recompute-num-layers 1

   --use-dynamic-batch-size
   --max-tokens-per-gpu 16384
)

OPTIMIZER_ARGS=(
   --optimizer adam
   --lr 1e-6
   --optimizer-cpu-offload
   --use-precision-aware-optimizer
)

SGLANG_ARGS=(
   --rollout-num-gpus-per-engine 32
   --sglang-enable-dp-attention
   --sglang-dp-size 4
   --sglang-ep-size 32
   --sglang-mem-fraction-static 0.7
   --sglang-cuda-graph-bs 1 2 4 8 $(seq 16 8 256)
)

ray start --head --node-ip-address ${MASTER_ADDR} --num-gpus 8 --disable-usage-stats
for WORKER_IP in $(awk '{print $1}' /root/mpi_rack_hostfile); do
  ssh root@"${WORKER_IP}" "ray start --address=${MASTER_ADDR}:6379 --num-gpus 8" &
done
wait

ray job submit --address="http://127.0.0.1:8265" \
   -- python3 train.py \
   --actor-num-nodes 8 \
   --actor-num-gpus-per-node 8 \
   --rollout-num-gpus 64 \
   ${MODEL_ARGS[@]} \
   ${CKPT_ARGS[@]} \
   ${ROLLOUT_ARGS[@]} \
   ${OPTIMIZER_ARGS[@]} \
   ${PERF_ARGS[@]} \
   ${SGLANG_ARGS[@]}
