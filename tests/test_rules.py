"""Every rule: a case where it fires, and a case where it stays silent (sqlfluff style: one row per rule)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from shardcheck.api import check
from shardcheck.rules.registry import all_rules

M = "actor_rollout_ref.actor.megatron"
OTC = f"+{M}.override_transformer_config"


def script(overrides: str = "", *, model: str = "Qwen3-30B-A3B", nodes: int = 1, gpus: int = 8,
           before: str = "", config: str = "--config-name=ppo_megatron_trainer") -> str:
    words = " ".join(textwrap.dedent(overrides).split())
    # A launch that is valid apart from what a case changes: batch sizes every DP up to 16, and 32, divides.
    batch = ("data.train_batch_size=1441440 actor_rollout_ref.actor.ppo_mini_batch_size=1441440 "
             "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 "
             "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 "
             "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 critic.ppo_micro_batch_size_per_gpu=1 "
             "actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=1")
    return (f"{before}\npython3 -m verl.trainer.main_ppo {config} actor_rollout_ref.model.path=/models/{model} "
            f"trainer.nnodes={nodes} trainer.n_gpus_per_node={gpus} {batch} {words}\n")


A = "actor_rollout_ref.actor"
RO = "actor_rollout_ref.rollout"
SGL = f"+{RO}.engine_kwargs.sglang"
RM = "reward.reward_model"
YARN = str(Path(__file__).parent / "data" / "yarn-short")  # YaRN factor 2 over 32768: vLLM derives 65536
FSDP = "--config-name=ppo_trainer"  # verl's default config: the actor, ref and critic run under FSDP


def direct(**sizes):
    from shardcheck.frameworks.megatron.direct import job_from_sizes

    return job_from_sizes(**sizes)


# Qwen3-30B-A3B spread so that its training state fits a 40 GiB device (on 4 nodes).
FITS = f"{M}.pipeline_model_parallel_size=4 {M}.expert_model_parallel_size=8 {M}.expert_tensor_parallel_size=1"
SMALL_MOE = ("--num-layers 48 --hidden-size 2048 --num-attention-heads 32 --group-query-attention --num-query-groups 4 "
             "--num-experts 128 --moe-router-topk 8 --seq-length 4096 --max-position-embeddings 40960")


def megatron_lm(flags: str = "", *, model: str = SMALL_MOE, nodes: int = 1, gpus: int = 8) -> str:
    """A valid Megatron-LM launch (torchrun + pretrain_gpt.py) apart from what a case adds; the last flag wins."""
    return (f"torchrun --nnodes {nodes} --nproc-per-node {gpus} pretrain_gpt.py {model} --micro-batch-size 1 "
            f"--global-batch-size 256 {flags}\n")


def slime(flags: str = "", *, model: str = SMALL_MOE, batch: str = "--rollout-batch-size 32") -> str:
    """A valid slime launch on one 8-GPU node, its rollout on 8 GPUs of its own, apart from what a case adds."""
    return ("ray job submit --address=http://127.0.0.1:8265 -- python3 train.py --actor-num-nodes 1 "
            "--actor-num-gpus-per-node 8 --rollout-num-gpus 8 --rollout-num-gpus-per-engine 8 "
            f"{batch} --n-samples-per-prompt 8 --global-batch-size 256 {model} {flags}\n")


# rule id → (bad script, good script) — or (bad job, good job) for layouts no verl script can
# reach (verl always uses the default rank order). Keep one row per registered rule.
CASES: dict[str, tuple[str, str]] = {
    "MCORE-PS-WORLD": (script(f"{M}.tensor_model_parallel_size=3"), script(f"{M}.tensor_model_parallel_size=4")),
    "MCORE-PS-EXPERT-FOLD": (
        script(f"{M}.tensor_model_parallel_size=2 {M}.expert_model_parallel_size=8"),
        script(f"{M}.tensor_model_parallel_size=2 {M}.expert_model_parallel_size=8 {M}.expert_tensor_parallel_size=1"),
    ),
    "MCORE-PS-VPP-PP": (
        script(f"{M}.virtual_pipeline_model_parallel_size=2"),
        script(f"{M}.virtual_pipeline_model_parallel_size=2 {M}.pipeline_model_parallel_size=2"),
    ),
    "MCORE-TC-HEADS-TP": (script(f"{M}.tensor_model_parallel_size=3", gpus=12),
                          script(f"{M}.tensor_model_parallel_size=4", gpus=12)),
    "MCORE-TC-QG-TP": (script(f"{M}.tensor_model_parallel_size=7", model="Qwen2.5-7B", gpus=7),
                       script(f"{M}.tensor_model_parallel_size=4", model="Qwen2.5-7B", gpus=8)),
    "MCORE-TC-MOE-EP-NOEXP": (script(f"{M}.expert_model_parallel_size=2", model="Qwen3-8B"),
                              script(f"{M}.expert_model_parallel_size=1", model="Qwen3-8B")),
    "MCORE-BUILD-EXPERTS-EP": (script(f"{M}.expert_model_parallel_size=3", gpus=6),
                               script(f"{M}.expert_model_parallel_size=2", gpus=6)),
    "MCORE-TC-UNEVEN-POS": (
        script(f"{M}.pipeline_model_parallel_size=4 {OTC}.num_layers_in_first_pipeline_stage=0"),
        script(f"{M}.pipeline_model_parallel_size=4 {OTC}.num_layers_in_first_pipeline_stage=12 "
               f"{OTC}.num_layers_in_last_pipeline_stage=12"),
    ),
    "MCORE-TC-UNEVEN-MIDDLE": (
        script(f"{M}.pipeline_model_parallel_size=4 {OTC}.num_layers_in_first_pipeline_stage=10 "
               f"{OTC}.num_layers_in_last_pipeline_stage=11"),
        script(f"{M}.pipeline_model_parallel_size=4 {OTC}.num_layers_in_first_pipeline_stage=11 "
               f"{OTC}.num_layers_in_last_pipeline_stage=11"),
    ),
    "MCORE-TC-UNEVEN-VPP": (
        script(f"{M}.pipeline_model_parallel_size=4 {M}.virtual_pipeline_model_parallel_size=2 "
               f"{OTC}.num_layers_in_first_pipeline_stage=11 {OTC}.num_layers_in_last_pipeline_stage=11"),
        script(f"{M}.pipeline_model_parallel_size=4 {M}.virtual_pipeline_model_parallel_size=2 "
               f"{OTC}.num_layers_in_first_pipeline_stage=12 {OTC}.num_layers_in_last_pipeline_stage=12"),
    ),
    "MCORE-TC-UNEVEN-ACCOUNT": (
        script(f"{M}.pipeline_model_parallel_size=4 {OTC}.num_layers_in_first_pipeline_stage=12 "
               f"{OTC}.num_layers_in_last_pipeline_stage=12 {OTC}.account_for_embedding_in_pipeline_split=True"),
        script(f"{M}.pipeline_model_parallel_size=4 {OTC}.num_layers_in_first_pipeline_stage=12 "
               f"{OTC}.num_layers_in_last_pipeline_stage=12"),
    ),
    "MCORE-TC-ACCOUNT-SPLIT": (
        script(f"{M}.pipeline_model_parallel_size=4 {OTC}.account_for_embedding_in_pipeline_split=True"),
        script(f"{M}.pipeline_model_parallel_size=2 {OTC}.account_for_embedding_in_pipeline_split=True "
               f"{OTC}.account_for_loss_in_pipeline_split=True"),
    ),
    "MCORE-BUILD-LAYERS-PP": (script(f"{M}.pipeline_model_parallel_size=5", gpus=5),
                              script(f"{M}.pipeline_model_parallel_size=4", gpus=8)),
    "MCORE-BUILD-NEGATIVE-STAGE": (
        script(f"{M}.pipeline_model_parallel_size=4 {OTC}.num_layers_in_first_pipeline_stage=30 "
               f"{OTC}.num_layers_in_last_pipeline_stage=30"),
        script(f"{M}.pipeline_model_parallel_size=4 {OTC}.num_layers_in_first_pipeline_stage=12 "
               f"{OTC}.num_layers_in_last_pipeline_stage=12"),
    ),
    "MCORE-BUILD-VPP": (
        script(f"{M}.pipeline_model_parallel_size=4 {M}.virtual_pipeline_model_parallel_size=5"),
        script(f"{M}.pipeline_model_parallel_size=4 {M}.virtual_pipeline_model_parallel_size=3"),
    ),
    "MCORE-TC-RECOMPUTE": (
        script(f"{OTC}.recompute_granularity=full".replace("+", "", 1)),
        script(f"{OTC}.recompute_granularity=full {OTC}.recompute_method=uniform {OTC}.recompute_num_layers=1"
               .replace("+", "")),
    ),
    "MCORE-TC-MOE-DISPATCH": (script(f"{OTC}.moe_token_dispatcher_type=allgather"),
                              script(f"{OTC}.moe_token_dispatcher_type=alltoall")),
    "MCORE-PS-ORDER-TOKEN": (direct(world=16, tp=2, cp=2, order="tp-dp-pp"),
                             direct(world=16, tp=2, cp=2, order="tp-cp-dp-pp")),
    "MCORE-PS-ORDER-PPLAST": (direct(world=16, tp=2, pp=2, ep=4, etp=1, order="tp-cp-ep-pp-dp"),
                              direct(world=16, tp=2, pp=2, ep=2, etp=1, order="tp-cp-ep-pp-dp")),
    "MCORE-PS-PP-GROUPS": (direct(world=8, tp=2, pp=2, ep=2, etp=1, order="tp-pp-cp-ep-dp"),
                           direct(world=8, tp=2, pp=2, ep=2, etp=1)),
    "MCORE-PS-LOCALITY": (script(f"{M}.expert_model_parallel_size=16 {M}.expert_tensor_parallel_size=1", nodes=2),
                          script(f"{M}.expert_model_parallel_size=8 {M}.expert_tensor_parallel_size=1", nodes=2)),
    "VERL-ACT-MBS": (script(f"{A}.ppo_micro_batch_size_per_gpu=null"),
                     script(f"{A}.ppo_micro_batch_size_per_gpu=null {A}.use_dynamic_bsz=True")),
    "VERL-CFG-REAL-BSZ": (script("data.train_batch_size=6 {A}.ppo_mini_batch_size=2".format(A=A)),
                          script("data.train_batch_size=8 {A}.ppo_mini_batch_size=8".format(A=A))),
    "VERL-ACT-TBS-MINI": (script(f"data.train_batch_size=8 {A}.ppo_mini_batch_size=16"),
                          script(f"data.train_batch_size=16 {A}.ppo_mini_batch_size=16")),
    "VERL-ENG-MINI-DP": (script(f"data.train_batch_size=16 {A}.ppo_mini_batch_size=4"),
                         script(f"data.train_batch_size=16 {A}.ppo_mini_batch_size=8")),
    "VERL-ENG-MICRO-DIV": (script(f"data.train_batch_size=48 {A}.ppo_mini_batch_size=48 "
                                  f"{A}.ppo_micro_batch_size_per_gpu=4"),
                           script(f"data.train_batch_size=48 {A}.ppo_mini_batch_size=48 "
                                  f"{A}.ppo_micro_batch_size_per_gpu=3")),
    "VERL-ENG-DYN-TOKENS": (script(f"{A}.use_dynamic_bsz=True data.max_prompt_length=1024 "
                                   "data.max_response_length=32768"),
                            script(f"{A}.use_dynamic_bsz=True data.max_prompt_length=1024 "
                                   f"data.max_response_length=32768 {A}.ppo_max_token_len_per_gpu=33792 "
                                   "+critic.ppo_infer_max_token_len_per_gpu=33792")),
    "VERL-BAL-DP": (script(f"data.train_batch_size=12 {A}.ppo_mini_batch_size=8"),
                    script(f"data.train_batch_size=16 {A}.ppo_mini_batch_size=8")),
    "VERL-CFG-LOGPROB-MBS": (script(f"{RO}.log_prob_micro_batch_size_per_gpu=null"),
                             script(f"{RO}.log_prob_micro_batch_size_per_gpu=2")),
    "VERL-ENG-VPP-MB": (script(f"{M}.pipeline_model_parallel_size=4 {M}.virtual_pipeline_model_parallel_size=2 "
                               f"data.train_batch_size=12 {A}.ppo_mini_batch_size=12 {A}.ppo_micro_batch_size_per_gpu=2 "
                               f"{RO}.log_prob_micro_batch_size_per_gpu=2"),
                        script(f"{M}.pipeline_model_parallel_size=4 {M}.virtual_pipeline_model_parallel_size=2 "
                               f"data.train_batch_size=16 {A}.ppo_mini_batch_size=16 {A}.ppo_micro_batch_size_per_gpu=2 "
                               f"{RO}.log_prob_micro_batch_size_per_gpu=2")),
    "VERL-ENG-DYN-SAME": (script(f"{A}.use_dynamic_bsz=True {RO}.log_prob_use_dynamic_bsz=False"),
                          script(f"{A}.use_dynamic_bsz=True")),
    "VERL-RO-MODE": (script(f"{RO}.mode=sync"), script(f"{RO}.mode=async")),
    "VERL-RO-MNBT": (script(f"{RO}.enable_chunked_prefill=False {RO}.max_num_batched_tokens=8192"),
                     script(f"{RO}.enable_chunked_prefill=False {RO}.max_num_batched_tokens=40960")),
    "SHELL-CONTINUATION": (script().rstrip("\n") + " \\ # one node\n", script() + "# one node\n"),
    "MCORE-TC-MOE-CAPACITY": (megatron_lm("--moe-expert-capacity-factor 1.0 --moe-router-load-balancing-type sinkhorn"),
                              megatron_lm("--moe-expert-capacity-factor 1.0 --moe-router-load-balancing-type aux_loss")),
    "MCORE-PS-DISTOPT-INSTANCES": (megatron_lm("--expert-model-parallel-size 4 --num-distributed-optimizer-instances 8"),
                                   megatron_lm("--expert-model-parallel-size 4 --num-distributed-optimizer-instances 2")),
    "VERL-SRV-POOL": (script(f"{RM}.enable=True {RM}.enable_resource_pool=True {RM}.rollout.name=vllm"),
                      script(f"{RM}.enable=True {RM}.enable_resource_pool=True {RM}.rollout.name=vllm "
                             f"{RM}.nnodes=1 {RM}.n_gpus_per_node=8")),
    "VERL-SRV-REPLICA": (script(f"{RM}.enable=True {RM}.rollout.name=vllm {RM}.rollout.tensor_model_parallel_size=16"),
                         script(f"{RM}.enable=True {RM}.rollout.name=vllm {RM}.rollout.tensor_model_parallel_size=4")),
    "VERL-RO-PP": (script(f"{RO}.pipeline_model_parallel_size=2"), script(f"{RO}.pipeline_model_parallel_size=1")),
    "VERL-RO-EP": (script(f"{RO}.tensor_model_parallel_size=2 {RO}.data_parallel_size=2 {RO}.expert_parallel_size=8"),
                   script(f"{RO}.tensor_model_parallel_size=2 {RO}.data_parallel_size=2 {RO}.expert_parallel_size=4")),
    "VERL-RO-WORLD": (script(f"{RO}.tensor_model_parallel_size=3"), script(f"{RO}.tensor_model_parallel_size=4")),
    "VERL-RO-REPLICA-NODE": (script(f"{RO}.tensor_model_parallel_size=4 {RO}.data_parallel_size=3", nodes=3),
                             script(f"{RO}.tensor_model_parallel_size=4 {RO}.data_parallel_size=2", nodes=3)),
    "VERL-RO-VLLM-DP": (script(f"{RO}.tensor_model_parallel_size=16 {RO}.data_parallel_size=2", nodes=4),
                        script(f"{RO}.tensor_model_parallel_size=8 {RO}.data_parallel_size=2", nodes=4)),
    "VERL-RO-MAXLEN": (script(f"{RO}.max_model_len=65536"), script(f"{RO}.max_model_len=40960")),
    "VERL-RO-LEN-BUDGET": (script(f"{RO}.max_model_len=4096 data.max_prompt_length=2048 data.max_response_length=4096"),
                           script(f"{RO}.max_model_len=8192 data.max_prompt_length=2048 data.max_response_length=4096")),
    "VLLM-TP-HEADS": (script(f"{RO}.tensor_model_parallel_size=3", gpus=6),
                      script(f"{RO}.tensor_model_parallel_size=2", gpus=6)),
    "VLLM-TP-KV": (script(f"{RO}.tensor_model_parallel_size=7", model="Qwen2.5-7B", gpus=7),
                   script(f"{RO}.tensor_model_parallel_size=2", model="Qwen2.5-7B")),
    "VERL-MC-ONE-INIT": (
        script(f"actor_rollout_ref.actor.use_kl_loss=True {M}.tensor_model_parallel_size=2 "
               "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=1"),
        script(f"actor_rollout_ref.actor.use_kl_loss=True {M}.tensor_model_parallel_size=2 "
               "critic.megatron.tensor_model_parallel_size=2"),
    ),
    "VERL-MC-ETP-MISMATCH": (
        script(f"{M}.tensor_model_parallel_size=2 {M}.expert_model_parallel_size=2"),
        script(f"{M}.tensor_model_parallel_size=2 {M}.expert_model_parallel_size=2 {M}.expert_tensor_parallel_size=1"),
    ),
    "SGLANG-TP-HEADS": (script(f"{RO}.name=sglang {RO}.tensor_model_parallel_size=3", gpus=6),
                        script(f"{RO}.name=sglang {RO}.tensor_model_parallel_size=2", gpus=6)),
    "SGLANG-TP-KV": (script(f"{RO}.name=sglang {RO}.tensor_model_parallel_size=5", model="Qwen3-14B", gpus=5),
                     script(f"{RO}.name=sglang {RO}.tensor_model_parallel_size=4", model="Qwen3-14B")),
    "SGLANG-DP-ATTN": (script(f"{RO}.name=sglang {RO}.tensor_model_parallel_size=2 {RO}.data_parallel_size=2"),
                       script(f"{RO}.name=sglang {RO}.tensor_model_parallel_size=2 {RO}.data_parallel_size=2 "
                              f"{SGL}.enable_dp_attention=True")),
    "SGLANG-EP-EXPERTS": (script(f"{RO}.name=sglang {RO}.tensor_model_parallel_size=2 {RO}.data_parallel_size=3 "
                                 f"{RO}.expert_parallel_size=6 {SGL}.enable_dp_attention=True", gpus=6),
                          script(f"{RO}.name=sglang {RO}.tensor_model_parallel_size=2 {RO}.data_parallel_size=4 "
                                 f"{RO}.expert_parallel_size=8 {SGL}.enable_dp_attention=True")),
    "SGLANG-MEM-FRACTION": (script(f"{RO}.name=sglang {RO}.gpu_memory_utilization=1.0"),
                            script(f"{RO}.name=sglang {RO}.gpu_memory_utilization=0.8")),
    "VLLM-MAXLEN-DERIVED": (script().replace("/models/Qwen3-30B-A3B", YARN),
                            script(f"{RO}.max_model_len=65536").replace("/models/Qwen3-30B-A3B", YARN)),
    "VLLM-MNS-MNBT": (script(f"{RO}.max_num_batched_tokens=128"), script(f"{RO}.max_num_batched_tokens=256")),
    "VLLM-MNS-REQUESTS": (script(f"data.train_batch_size=4096 {A}.ppo_mini_batch_size=4096 {RO}.max_num_seqs=256"),
                          script(f"data.train_batch_size=4096 {A}.ppo_mini_batch_size=4096 {RO}.max_num_seqs=512")),
    "VERL-MC-OTC-KEY": (script(f"{OTC}.moe_token_dispatcher_typ=alltoall"),
                        script(f"{OTC}.moe_token_dispatcher_type=alltoall")),
    "VERL-FSDP-SP-WORLD": (script(f"{A}.ulysses_sequence_parallel_size=3", model="Qwen3-8B", gpus=8, config=FSDP),
                           script(f"{A}.ulysses_sequence_parallel_size=4", model="Qwen3-8B", gpus=8, config=FSDP)),
    "VERL-FSDP-SP-HEADS": (script(f"{A}.ulysses_sequence_parallel_size=16", model="Qwen2.5-14B", nodes=2, config=FSDP),
                           script(f"{A}.ulysses_sequence_parallel_size=8", model="Qwen2.5-14B", config=FSDP)),
    "VERL-FSDP-SP-NOPATCH": (script(f"{A}.ulysses_sequence_parallel_size=2", model="Qwen3-Next-80B-A3B", config=FSDP),
                             script(f"{A}.ulysses_sequence_parallel_size=1", model="Qwen3-Next-80B-A3B", config=FSDP)),
    "VERL-FSDP-SP-RMPAD": (script(f"{A}.ulysses_sequence_parallel_size=2 actor_rollout_ref.model.use_remove_padding=False",
                                  config=FSDP),
                           script(f"{A}.ulysses_sequence_parallel_size=2 actor_rollout_ref.model.use_remove_padding=True",
                                  config=FSDP)),
    "VERL-FSDP-SIZE": (script(f"{A}.fsdp_config.fsdp_size=3", config=FSDP),
                       script(f"{A}.fsdp_config.fsdp_size=4", config=FSDP)),
    "VERL-FSDP-CRITIC-SP": (script("algorithm.adv_estimator=gae critic.ulysses_sequence_parallel_size=2", config=FSDP),
                            script("algorithm.adv_estimator=gae critic.ulysses_sequence_parallel_size=2 "
                                   "critic.fsdp.ulysses_sequence_parallel_size=2", config=FSDP)),
    "VERL-FSDP-REF-SP": (script(f"{A}.use_kl_loss=True {A}.fsdp_config.ulysses_sequence_parallel_size=2", config=FSDP),
                         script(f"{A}.use_kl_loss=True {A}.ulysses_sequence_parallel_size=2", config=FSDP)),
    "VERL-FSDP-OFFLOAD-POLICY": (script(f"{A}.fsdp_config.offload_policy=True", config=FSDP),
                                 script(f"{A}.fsdp_config.offload_policy=True {A}.strategy=fsdp2", config=FSDP)),
    "SHELL-PARSE": (script(before="if then; fi"), script(before="if true; then X=1; fi")),
    "SHELL-SYNTAX": (script(before="X=${A B}"), script(before="X=${A:-B}")),
    "SHELL-SOURCE": (script(before="source ./env.sh"), script(before="X=1")),
    "SHELL-EVAL": (script(before="eval X=1"), script(before="X=1")),
    "SHELL-ARITH": (script(before="X=$((1 / 0))"), script(before="X=$((1 / 1))")),
    "HYDRA-OVERRIDE": (script("trainer.default_local_dir=~/ckpt"), script("trainer.default_local_dir=/ckpt")),
    "VERL-CFG-UNKNOWN-KEY": (script(f"{M}.tensor_parallel_size=2"), script(f"{M}.tensor_model_parallel_size=2")),
    "VERL-CFG-ADDED-KEY": (script("+trainer.n_gpu_per_node=8"), script("trainer.n_gpus_per_node=8")),
    "VERL-CONFIG-CUSTOM": (script(config="--config-path=/my/configs --config-name=my_trainer"),
                           script(config="--config-path=config --config-name=ppo_megatron_trainer")),
    "VALUE-BAD-SIZE": (script(f"{M}.tensor_model_parallel_size=two"), script(f"{M}.tensor_model_parallel_size=2")),
    "VALUE-UNKNOWN": (script(f"{M}.tensor_model_parallel_size=$TP"), script(f"{M}.tensor_model_parallel_size=2")),
    "MODEL-NOT-FOUND": (script(model="my-private-model"), script(model="Qwen3-30B-A3B")),
    "MEM-TRAIN-OOM": (script(), script(f"{FITS} {RO}.tensor_model_parallel_size=4", nodes=4)),
    "MEM-ROLLOUT-KV": (script(f"{FITS} {RO}.gpu_memory_utilization=0.1 {RO}.max_model_len=40960", nodes=4),
                       script(f"{FITS} {RO}.gpu_memory_utilization=0.5 {RO}.max_model_len=40960 "
                              f"{RO}.tensor_model_parallel_size=4", nodes=4)),
    "MEM-ROLLOUT-CONCURRENCY": (
        script(f"{FITS} {RO}.tensor_model_parallel_size=4", nodes=4),
        script(f"{FITS} {RO}.tensor_model_parallel_size=4 data.train_batch_size=32 {A}.ppo_mini_batch_size=32", nodes=4),
    ),
    "MEM-HOST": (script(f"{M}.param_offload=True {M}.optimizer_offload=True"),
                 script(f"{FITS} {M}.param_offload=True {M}.optimizer_offload=True {RO}.tensor_model_parallel_size=4",
                        nodes=4)),
    "MLM-VPP-EXCLUSIVE": (
        megatron_lm("--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
                    "--num-virtual-stages-per-pipeline-rank 2"),
        megatron_lm("--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2"),
    ),
    "MLM-VPP-LAYERS": (megatron_lm("--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 5"),
                       megatron_lm("--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 3")),
    "MLM-VPP-P2P": (
        megatron_lm("--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                    "--no-overlap-p2p-communication"),
        megatron_lm("--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2"),
    ),
    "MLM-SEQ-CP": (megatron_lm("--context-parallel-size 2 --seq-length 4098"), megatron_lm("--context-parallel-size 2")),
    "MLM-KV-CHANNELS": (megatron_lm("--num-attention-heads 48"), megatron_lm("--num-attention-heads 48 --kv-channels 64")),
    "MLM-GQA-FLAG": (megatron_lm(model=SMALL_MOE.replace("--group-query-attention ", "")), megatron_lm()),
    "MLM-GBS-DIV": (slime("--global-batch-size 252"), megatron_lm("--global-batch-size 248")),
    "MLM-FLAG-UNKNOWN": (slime("--tensor-model-paralel-size 2"), slime("--tensor-model-parallel-size 2")),
    "SLIME-BATCH-REQUIRED": (slime(batch=""), slime()),
    "SLIME-DYN-TOKENS": (slime("--use-dynamic-batch-size"), slime("--use-dynamic-batch-size --max-tokens-per-gpu 8192")),
    "SLIME-GBS-STEPS": (slime("--num-steps-per-rollout 2"), slime("--num-steps-per-rollout 1")),
    "SLIME-UNEVEN-PP1": (slime("--decoder-last-pipeline-num-layers 20"),
                         slime("--pipeline-model-parallel-size 2 --decoder-last-pipeline-num-layers 20")),
    "SLIME-SGL-DP-ATTN": (slime("--sglang-dp-size 2"), slime("--sglang-dp-size 2 --sglang-enable-dp-attention")),
    "SLIME-SGL-PP": (slime("--sglang-pp-size 3"), slime("--sglang-pp-size 2")),
    "SLIME-RO-ENGINES": (slime("--rollout-num-gpus 12"), slime("--rollout-num-gpus 16")),
}
# The memory rules' cases name their device (and host RAM), as `--device` / `--host-memory` would.
DEVICES = {"MEM-TRAIN-OOM": "a100-40", "MEM-ROLLOUT-KV": "a100-40", "MEM-ROLLOUT-CONCURRENCY": "h200",
           "MEM-HOST": "h200"}
HOST_MEMORY = {"MEM-HOST": 1 << 40}


def rule_findings(tmp_path, text, rule_id: str, env=None):
    if not isinstance(text, str):  # a Job built from sizes
        from shardcheck.api import Result
        from shardcheck.rules.registry import run_rules

        findings, skipped = run_rules(text)
        return [f for f in findings if f.rule == rule_id], Result("<sizes>", text, findings, skipped)
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = check(path, env, device=DEVICES.get(rule_id), host_memory=HOST_MEMORY.get(rule_id))
    assert result.error is None, result.error
    return [f for f in result.findings if f.rule == rule_id], result


# Rules about the input as a whole (checked before or around a job): (bad, good) as (script text or None for
# a missing file, --env values).
INPUT_CASES = {
    "INPUT-NO-LAUNCH": (("echo preparing data\n", None), (script(), None)),
    "INPUT-UNREADABLE": ((None, None), (script(), None)),
    "INPUT-UNUSABLE": (('X="unterminated\npython3 -m verl.trainer.main_ppo\n', None), (script(), None)),
    "SHELL-ENV-UNUSED": ((script(before="N=${NNODES:-1}"), {"nnodes": "2"}),
                         (script(before="N=${NNODES:-1}"), {"NNODES": "2"})),
    "SUPPRESS-UNKNOWN-ID": (("# shardcheck: disable=MCORE-TC-HEAD-TP\n" + script(), None),
                            ("# shardcheck: disable=MCORE-TC-HEADS-TP\n" + script(), None)),
}


def test_every_rule_has_a_case():
    assert set(CASES) | set(INPUT_CASES) == set(all_rules())
    assert not set(CASES) & set(INPUT_CASES)


@pytest.mark.parametrize("rule_id", sorted(INPUT_CASES))
def test_input_rule_fires_on_bad_and_is_silent_on_good(tmp_path, rule_id):
    for (text, env), fires in zip(INPUT_CASES[rule_id], (True, False)):
        path = tmp_path / "run.sh"
        path.unlink(missing_ok=True)
        if text is not None:
            path.write_text(text)
        result = check(path, env)
        found = [f for f in result.findings if f.rule == rule_id]
        assert bool(found) == fires, (rule_id, fires, [(f.rule, f.message) for f in result.findings])
        for f in found:
            assert f.severity == all_rules()[rule_id].severity and f.path is not None


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires_on_bad(tmp_path, rule_id):
    found, _ = rule_findings(tmp_path, CASES[rule_id][0], rule_id)
    assert found, f"{rule_id} did not fire"
    for f in found:
        assert f.severity == all_rules()[rule_id].severity
        assert f.line is not None or not isinstance(CASES[rule_id][0], str), f"{rule_id} finding has no line: {f}"


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_silent_on_good(tmp_path, rule_id):
    found, result = rule_findings(tmp_path, CASES[rule_id][1], rule_id)
    assert not found, f"{rule_id} fired on the good case: {found}"


def test_good_cases_have_no_errors_at_all(tmp_path):
    """The 'good' side of layout rules is a whole valid launch, not just silent for one rule."""
    for rule_id, (_, good) in CASES.items():
        _, result = rule_findings(tmp_path, good, rule_id)
        assert result.valid, (rule_id, [(f.rule, f.message) for f in result.findings
                                        if f.severity == "error" or f.rule == "VALUE-UNKNOWN"])


def test_unknown_value_names_the_variable_and_line(tmp_path):
    found, _ = rule_findings(tmp_path, CASES["VALUE-UNKNOWN"][0], "VALUE-UNKNOWN")
    assert "$TP is not set in the script" in found[0].message
    assert found[0].line == 2


def test_unknown_value_leaves_the_verdict_undecided(tmp_path):
    _, result = rule_findings(tmp_path, CASES["VALUE-UNKNOWN"][0], "VALUE-UNKNOWN")
    assert result.valid is None and result.layout_valid is None and result.exit_code == 0


def test_env_supplies_an_unknown(tmp_path):
    found, result = rule_findings(tmp_path, CASES["VALUE-UNKNOWN"][0], "VALUE-UNKNOWN", env={"TP": "2"})
    assert not found and result.layout_summary()["tp"] == 2 and result.valid is True


def test_messages_list_valid_values(tmp_path):
    found, _ = rule_findings(tmp_path, CASES["MCORE-TC-HEADS-TP"][0], "MCORE-TC-HEADS-TP")
    assert "TP must divide 32: 1, 2, 4, 8, 16, 32" in found[0].fix


def test_did_you_mean(tmp_path):
    found, _ = rule_findings(tmp_path, CASES["VERL-CFG-UNKNOWN-KEY"][0], "VERL-CFG-UNKNOWN-KEY")
    assert f"{M}.tensor_model_parallel_size" in found[0].fix


def test_model_rules_are_skipped_without_a_model(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(CASES["MODEL-NOT-FOUND"][0])
    result = check(path)
    assert "MCORE-TC-HEADS-TP" in result.skipped
    assert "MCORE-PS-WORLD" not in result.skipped


def test_ref_layout_is_judged_when_it_differs(tmp_path):
    text = script(f"actor_rollout_ref.actor.use_kl_loss=True {M}.tensor_model_parallel_size=2 "
                  "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=3")
    found, result = rule_findings(tmp_path, text, "MCORE-PS-WORLD")
    assert [f.role for f in found] == ["ref"]


def test_local_config_json_is_used(tmp_path):
    model = tmp_path / "mymodel"
    model.mkdir()
    (model / "config.json").write_text('{"num_hidden_layers": 10, "num_attention_heads": 12, '
                                       '"num_key_value_heads": 12, "hidden_size": 768}')
    text = script(f"{M}.pipeline_model_parallel_size=4").replace("/models/Qwen3-30B-A3B", str(model))
    found, result = rule_findings(tmp_path, text, "MCORE-BUILD-LAYERS-PP")
    assert found and result.job.model.source.startswith("config.json at")


def test_an_unknown_argument_leaves_the_verdict_undecided(tmp_path):
    found, result = rule_findings(tmp_path, script('"$(cat extra_overrides.txt)"'), "VALUE-UNKNOWN")
    assert found and "it may set any key" in found[0].message
    assert result.valid is None
    assert not [f for f in result.findings if f.rule == "HYDRA-OVERRIDE"]


def test_a_layout_behind_an_unknown_if_is_still_judged(tmp_path):
    text = script('"${A[@]}"', before="A=(actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3)\n"
                                      "if [ -f /x ]; then :; fi")
    found, _ = rule_findings(tmp_path, text, "MCORE-PS-WORLD")
    assert found


def test_other_engines_configs_are_read(tmp_path):
    text = ("python3 -m verl.trainer.main_ppo model_engine=veomni "
            "actor_rollout_ref.actor.veomni.enable_full_shard=True\n")
    found, result = rule_findings(tmp_path, text, "VERL-CFG-UNKNOWN-KEY")
    assert not found and result.job.config_name == "ppo_veomni_trainer"


def test_a_recipe_config_makes_defaults_unknown_not_assumed(tmp_path):
    text = ("python3 -m recipe.dapo.main_dapo --config-path=config --config-name=dapo_trainer "
            f"{M}.tensor_model_parallel_size=2 some.recipe.key=1\n")
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = check(path)
    rules = {f.rule for f in result.findings}
    assert "VERL-CONFIG-CUSTOM" in rules and "VERL-CFG-UNKNOWN-KEY" not in rules
    assert result.valid is None  # nnodes etc. come from the recipe's config


def test_unmodelled_verl_entry_is_skipped(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer model.path=x\n")
    result = check(path)
    assert result.exit_code == 0 and result.status == "skipped"
    assert [(f.rule, f.line) for f in result.findings] == [("INPUT-NO-LAUNCH", 1)]
    assert "verl.trainer.sft_trainer is not modelled yet; skipped" in result.findings[0].message


def test_errors_an_unknown_argument_could_change_are_conditional(tmp_path):
    text = script(f'{M}.tensor_model_parallel_size=3 "$(cat more.txt)"')
    found, result = rule_findings(tmp_path, text, "MCORE-PS-WORLD")
    assert found and found[0].conditional and "could change this" in found[0].message
    assert result.valid is None and result.exit_code == 1
    # an override Hydra rejects is certain whatever the unknown argument holds
    text = script(f'{M}.tensor_parallel_size=3 "$(cat more.txt)"')
    found, result = rule_findings(tmp_path, text, "VERL-CFG-UNKNOWN-KEY")
    assert found and not found[0].conditional and result.valid is False


def test_plus_on_a_dataclass_section_is_not_judged_from_its_yaml(tmp_path):
    """verl 0.9.1's RolloutConfig has moe_tensor_parallel_size though its YAML does not list it."""
    found, _ = rule_findings(tmp_path, script(f"+{RO}.moe_tensor_parallel_size=2"), "VERL-CFG-ADDED-KEY")
    assert not found


def test_the_critic_engine_creates_the_process_groups(tmp_path):
    """verl's default estimator (gae) uses a Megatron critic, built first: its sizes must follow the actor's."""
    found, _ = rule_findings(tmp_path, script(f"{M}.tensor_model_parallel_size=2"), "VERL-MC-ONE-INIT")
    assert found and "critic" in found[0].message and "critic.megatron.tensor_model_parallel_size=2" in found[0].fix
    quiet, _ = rule_findings(tmp_path, script(f"{M}.tensor_model_parallel_size=2 algorithm.adv_estimator=grpo"),
                             "VERL-MC-ONE-INIT")
    assert not quiet  # no critic: the actor's sizes create the groups
