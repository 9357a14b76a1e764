#!/bin/bash
# Megatron-LM functional test gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_decoupled_lr (model_config.yaml MODEL_ARGS; paths and logging flags dropped)
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \
    --num-layers 12 \
    --hidden-size 512 \
    --num-attention-heads 8 \
    --micro-batch-size 4 \
    --global-batch-size 32 \
    --seq-length 1024 \
    --max-position-embeddings 1024 \
    --train-iters 100 \
    --lr-decay-iters 320000 \
    --lr 0.00015 \
    --lr-decay-style cosine \
    --min-lr 1e-05 \
    --weight-decay 1e-2 \
    --clip-grad 1.0 \
    --lr-warmup-fraction 0.01 \
    --transformer-impl transformer_engine \
    --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 4 \
    --num-layers-per-virtual-pipeline-stage 1 \
    --decoupled-lr 0.0002 \
    --no-gradient-accumulation-fusion \
    --attention-softmax-in-fp32 \
    --use-checkpoint-opt_param-scheduler \
    --bf16 \
    --vocab-size 50257
