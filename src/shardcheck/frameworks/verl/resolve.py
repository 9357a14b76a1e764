"""Resolve a verl launch into a :class:`~shardcheck.job.Job`, the way verl builds its config.

verl (target: the 0.9 release, 0.9.1): ``verl.trainer.main_ppo`` is a Hydra app
(``@hydra.main(config_path="config", config_name="ppo_trainer")``); the world is
``trainer.nnodes * trainer.n_gpus_per_node`` (verl/trainer/ppo/v1/trainer_base.py resource pool);
each Megatron engine calls ``mpu.initialize_model_parallel`` with its ``megatron.*`` sizes and
the default rank order (verl/workers/engine/megatron/transformer_impl.py ``_init_device_mesh``);
``override_transformer_config`` entries are applied last to the Megatron-Bridge provider
(``_build_tf_config``). The ref engine is built only when ``need_reference_policy`` holds
(verl/trainer/ppo/utils.py: ``algorithm.use_kl_in_reward or actor.use_kl_loss``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from shardcheck.errors import UnreadableInput
from shardcheck.frameworks.value_kinds import (
    ANY,
    COUNT,
    COUNT_OR_NULL,
    FLAG,
    FLAG_OR_NULL,
    FRACTION,
    FRACTION_OR_NULL,
    MAX_INT,
    NAME,
    NAME_OR_NULL,
    NUMBER,
    RANK,
    ValueKind,
    checked,
    shown,
)
from shardcheck.frameworks.verl import custom_config, verl_path
from shardcheck.frameworks.verl.config_tree import (
    KNOWN_CONFIGS,
    MODEL_ENGINES,
    VerlConfig,
    VerlDefaults,
    apply_overrides,
    bundled_defaults,
    installed_config_dir,
    installed_defaults,
)
from shardcheck.frameworks.verl.job_fields import command_line_notes, job_fields, read_model
from shardcheck.frameworks.verl.verl_path import VerlPathRequest
from shardcheck.frameworks.verl.versions import (
    VersionChoice,
    at_least,
    catalogue,
    choose,
    legacy_workers,
    renamed,
    span,
)
from shardcheck.inputs.hydra_overrides import HydraCommandLine, OverrideItem
from shardcheck.inputs.launch import Launch
from shardcheck.job import Cluster, FsdpLayout, Job, MegatronLayout, RolloutLayout, ServerLayout
from shardcheck.origin import Origin, Traced
from shardcheck.problems import Kind, Problem

# The Megatron engines verl 0.9.1 builds and the section each is built from (its ``megatron`` engine
# config): ActorRolloutRefWorker.init_model builds the ref from ``actor_rollout_ref.ref`` and the actor
# from ``actor_rollout_ref.actor``; the critic's TrainingWorker from ``critic`` (CriticConfig.engine =
# its ``megatron`` section; verl/workers/engine_workers.py, verl/workers/config/critic.py). The reward
# model and a distillation teacher are rollout servers (RolloutConfig), not Megatron engines.
ROLES = {"actor": "actor_rollout_ref.actor", "ref": "actor_rollout_ref.ref", "critic": "critic"}
# The keys the batch and rollout rules read (verl 0.9.1 names).
VALUE_KEYS = tuple(
    f"{prefix}.{key}"
    for prefix, keys in (
        ("data", ("train_batch_size", "max_prompt_length", "max_response_length")),
        (
            "actor_rollout_ref.actor",
            (
                "ppo_mini_batch_size",
                "ppo_micro_batch_size",
                "ppo_micro_batch_size_per_gpu",
                "use_dynamic_bsz",
                "ppo_max_token_len_per_gpu",
                "use_kl_loss",
            ),
        ),
        (
            "actor_rollout_ref.ref",
            (
                "log_prob_micro_batch_size",
                "log_prob_micro_batch_size_per_gpu",
                "log_prob_use_dynamic_bsz",
                "log_prob_max_token_len_per_gpu",
            ),
        ),
        (
            "actor_rollout_ref.rollout",
            (
                "name",
                "mode",
                "n",
                "log_prob_micro_batch_size",
                "log_prob_micro_batch_size_per_gpu",
                "log_prob_use_dynamic_bsz",
                "log_prob_max_token_len_per_gpu",
                "tensor_model_parallel_size",
                "data_parallel_size",
                "expert_parallel_size",
                "pipeline_model_parallel_size",
                "max_model_len",
                "n_gpus_per_node",
                "enable_chunked_prefill",
                "max_num_batched_tokens",
            ),
        ),
        ("algorithm", ("adv_estimator", "use_kl_in_reward")),
        ("trainer", ("use_v1", "use_legacy_worker_impl")),
    )
    for key in keys
)
# The keys the memory estimate reads (shardcheck/memory/estimate.py).
MEMORY_KEYS = tuple(
    f"{prefix}.{key}"
    for prefix, keys in (
        (
            "actor_rollout_ref.actor.megatron",
            ("dtype", "use_distributed_optimizer", "param_offload", "optimizer_offload"),
        ),
        (
            "actor_rollout_ref.actor.optim",
            (
                "optimizer",
                "use_precision_aware_optimizer",
                "main_grads_dtype",
                "exp_avg_dtype",
                "exp_avg_sq_dtype",
                "override_optimizer_config.optimizer_cpu_offload",
                "override_optimizer_config.optimizer_offload_fraction",
            ),
        ),
        (
            "actor_rollout_ref.actor.megatron.override_transformer_config",
            (
                "recompute_granularity",
                "recompute_method",
                "recompute_num_layers",
                "recompute_modules",
                "fp8",
                "fp8_recipe",
                "fp8_param",
                "overlap_moe_expert_parallel_comm",
                "cuda_graph_impl",
                "enable_cuda_graph",
            ),
        ),
        (
            "actor_rollout_ref.actor",
            (
                "calculate_entropy",
                "entropy_coeff",
                "entropy_from_logits_with_chunking",
                "entropy_from_logits_chunk_size",
                "use_fused_kernels",
            ),
        ),
        ("actor_rollout_ref.ref.megatron", ("param_offload",)),
        ("actor_rollout_ref.rollout", ("dtype",)),  # gpu_memory_utilization and max_num_seqs: VALUE_KEYS
        ("actor_rollout_ref.actor.fsdp_config", ("reshard_after_forward", "mixed_precision")),
        ("actor_rollout_ref.model", ("enable_gradient_checkpointing", "enable_activation_offload", "mtp.enable")),
        ("actor_rollout_ref.actor.megatron", ("grad_offload",)),  # VERL-MC-GRAD-OFFLOAD
        ("critic.megatron", ("grad_offload",)),
        ("actor_rollout_ref.actor.megatron", ("use_mbridge", "vanilla_mbridge")),  # MTP before 0.7.1; bridge rules
        ("actor_rollout_ref.ref.megatron", ("use_mbridge", "vanilla_mbridge")),
        ("critic.megatron", ("use_mbridge", "vanilla_mbridge")),
        ("critic", ("megatron.param_offload", "megatron.optimizer_offload")),  # critic.model.path: FSDP_VALUE_KEYS
        ("critic", ("ppo_max_token_len_per_gpu",)),  # the critic's own update phase (dynamic batch size)
    )
    for key in keys
)
# More keys the rollout-engine and critic rules read.
VALUE_KEYS += tuple(
    f"{prefix}.{key}"
    for prefix, keys in (
        # LoRA (ref_in_actor; the memory estimate sizes the adapters' gradients and optimizer state)
        (
            "actor_rollout_ref.model",
            ("lora_rank", "lora.rank", "lora_adapter_path", "target_modules", "lora.target_modules"),
        ),
        (
            "actor_rollout_ref.rollout",
            (
                "max_num_seqs",
                "gpu_memory_utilization",
                "free_cache_engine",
                "engine_kwargs.vllm",
                "engine_kwargs.vllm.enable_eplb",
                "engine_kwargs.sglang.enable_dp_attention",
                "engine_kwargs.sglang.mem_fraction_static",
            ),
        ),
        (
            "critic",
            (
                "enable",
                "strategy",
                "ppo_mini_batch_size",
                "ppo_micro_batch_size",
                "ppo_micro_batch_size_per_gpu",
                "use_dynamic_bsz",
                "ppo_infer_max_token_len_per_gpu",
                "ppo_max_token_len_per_gpu",
                "forward_max_token_len_per_gpu",
                "megatron.tensor_model_parallel_size",
                "megatron.pipeline_model_parallel_size",
                "megatron.context_parallel_size",
                "megatron.expert_model_parallel_size",
                "megatron.expert_tensor_parallel_size",
                "megatron.virtual_pipeline_model_parallel_size",
            ),
        ),
    )
    for key in keys
)
# Keys verl's YAML leaves out: their value when no override sets them (free-form engine kwargs take
# the engine's own default; dataclass fields the dataclass default).
# The critic's FSDP engine section before verl 0.8.0 moved it to ``critic.fsdp`` (``_critic_engine``).
CRITIC_ENGINE_BEFORE_0_8 = "critic.model.fsdp_config"
ABSENT_DEFAULTS = {
    "actor_rollout_ref.rollout.engine_kwargs.sglang.enable_dp_attention": (
        False,
        "default of SGLang ServerArgs: enable_dp_attention = False",
    ),
    "actor_rollout_ref.rollout.engine_kwargs.sglang.mem_fraction_static": (
        None,
        "not in engine_kwargs.sglang: verl passes gpu_memory_utilization as mem_fraction_static",
    ),
    # verl 0.4.0 … 0.6.1 have no such key: the update computes the entropy only when entropy_coeff != 0
    # (dp_actor.py / megatron_actor.py update_policy, verl 0.6.1); the key arrived in 0.7.0 (actor/actor.yaml)
    "actor_rollout_ref.actor.calculate_entropy": (
        False,
        "actor_rollout_ref.actor.calculate_entropy is not in this verl's config: entropy only when entropy_coeff != 0",
    ),
    # verl 0.4.0 has no optim.optimizer: init_megatron_optim_config builds OptimizerConfig(optimizer="adam", …)
    # (verl/utils/megatron_utils.py, verl 0.4.0); its FSDP workers build torch's AdamW
    **{
        f"{section}.optim.optimizer": ("adam", f"{section}.optim.optimizer is not in this verl's config: Adam")
        for section in ("actor_rollout_ref.actor", "critic")
    },
    # verl 0.4.0 … 0.6.0 have no megatron.dtype: the Megatron workers set self.param_dtype = torch.bfloat16
    # (verl/workers/megatron_workers.py init_model, verl 0.6.0); the key arrived in 0.6.1
    **{
        f"{section}.megatron.dtype": ("bfloat16", f"{section}.megatron.dtype is not in this verl's config: bfloat16")
        for section in ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")
    },
    # verl 0.4.x's override_transformer_config names no recompute keys: TransformerConfig's own defaults hold
    # (recompute_granularity / _method / _num_layers / _modules = None; megatron/core/transformer/
    # transformer_config.py, megatron-core 0.12)
    **{
        f"{section}.megatron.override_transformer_config.{key}": (
            None,
            f"{key} is not in this verl's override_transformer_config: TransformerConfig's default (None)",
        )
        for section in ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")
        for key in ("recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules")
    },
    "critic.ppo_infer_max_token_len_per_gpu": (
        32768,
        "default of verl 0.9.1 CriticConfig: ppo_infer_max_token_len_per_gpu = 32768",
    ),
    # releases without data parallel inside one rollout replica (the key arrived later): one DP rank each
    "actor_rollout_ref.rollout.data_parallel_size": (
        1,
        "actor_rollout_ref.rollout.data_parallel_size is not in this verl's config: no DP inside a replica",
    ),
    "actor_rollout_ref.rollout.pipeline_model_parallel_size": (
        1,
        "actor_rollout_ref.rollout.pipeline_model_parallel_size is not in this verl's config: no rollout PP",
    ),
    "actor_rollout_ref.rollout.expert_parallel_size": (
        1,
        "actor_rollout_ref.rollout.expert_parallel_size is not in this verl's config: no rollout EP",
    ),
    **{
        f"{engine}.offload_policy": (False, f"{engine}.offload_policy is not in this verl's config: no offload policy")
        for engine in (
            "actor_rollout_ref.actor.fsdp_config",
            "actor_rollout_ref.ref.fsdp_config",
            "critic.fsdp",
            CRITIC_ENGINE_BEFORE_0_8,
        )
    },
    **{
        f"{section}.optim.use_precision_aware_optimizer": (
            False,
            f"{section}.optim.use_precision_aware_optimizer is not in this verl's config: fp32 optimizer state",
        )
        for section in ("actor_rollout_ref.actor", "critic")
    },
    # releases before the v1 trainer (its switch arrived with it) run the classic trainer
    "trainer.use_v1": (False, "trainer.use_v1 is not in this verl's config: it has no v1 trainer"),
    # releases before RolloutReplica (the key arrived with it): the replica rules do not apply (None)
    "actor_rollout_ref.rollout.n_gpus_per_node": (
        None,
        "actor_rollout_ref.rollout.n_gpus_per_node is not in this verl's config: it has no rollout replicas",
    ),
}
# The keys the FSDP rules read besides the engine sections (verl 0.9.1 names).
FSDP_VALUE_KEYS = (
    "actor_rollout_ref.model.use_remove_padding",
    "critic.model.use_remove_padding",
    "critic.model.path",
    "critic.enable",
    "critic.strategy",
    "critic.ulysses_sequence_parallel_size",
    "critic.fsdp.ulysses_sequence_parallel_size",
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
    "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size",
)
_A, _R, _RO, _C = "actor_rollout_ref.actor", "actor_rollout_ref.ref", "actor_rollout_ref.rollout", "critic"
_OTC_KEY = f"{_A}.megatron.override_transformer_config"
# What each key read must be (verl 0.9.1's dataclasses: verl/workers/config/actor.py, rollout.py, critic.py,
# engine.py, optimizer.py; verl/trainer/config/data). Checked where read (``resolve_verl``); a test keeps this
# in step with VALUE_KEYS + MEMORY_KEYS + FSDP_VALUE_KEYS.
VALUE_KINDS: dict[str, ValueKind] = {
    "data.train_batch_size": COUNT,
    "data.max_prompt_length": COUNT,
    "data.max_response_length": COUNT,
    f"{_A}.ppo_mini_batch_size": COUNT,
    f"{_A}.ppo_micro_batch_size": COUNT_OR_NULL,
    f"{_A}.ppo_micro_batch_size_per_gpu": COUNT_OR_NULL,
    f"{_A}.use_dynamic_bsz": FLAG,
    f"{_A}.ppo_max_token_len_per_gpu": COUNT,
    f"{_A}.use_kl_loss": FLAG,
    f"{_R}.log_prob_micro_batch_size": COUNT_OR_NULL,
    f"{_R}.log_prob_micro_batch_size_per_gpu": COUNT_OR_NULL,
    f"{_R}.log_prob_use_dynamic_bsz": FLAG,
    f"{_R}.log_prob_max_token_len_per_gpu": COUNT,
    f"{_RO}.name": NAME,
    f"{_RO}.mode": NAME,
    f"{_RO}.n": COUNT,
    f"{_RO}.log_prob_micro_batch_size": COUNT_OR_NULL,
    f"{_RO}.log_prob_micro_batch_size_per_gpu": COUNT_OR_NULL,
    f"{_RO}.log_prob_use_dynamic_bsz": FLAG,
    f"{_RO}.log_prob_max_token_len_per_gpu": COUNT,
    f"{_RO}.tensor_model_parallel_size": COUNT,
    f"{_RO}.data_parallel_size": COUNT,
    f"{_RO}.expert_parallel_size": COUNT,
    f"{_RO}.pipeline_model_parallel_size": COUNT,
    f"{_RO}.max_model_len": COUNT_OR_NULL,
    f"{_RO}.n_gpus_per_node": COUNT,
    f"{_RO}.enable_chunked_prefill": FLAG,
    f"{_RO}.max_num_batched_tokens": COUNT_OR_NULL,
    "algorithm.adv_estimator": NAME,
    "algorithm.use_kl_in_reward": FLAG,
    "trainer.use_v1": FLAG,
    "trainer.use_legacy_worker_impl": NAME,
    f"{_RO}.max_num_seqs": COUNT_OR_NULL,
    f"{_RO}.gpu_memory_utilization": FRACTION,
    f"{_RO}.free_cache_engine": FLAG,
    f"{_RO}.engine_kwargs.vllm": ANY,
    f"{_RO}.engine_kwargs.vllm.enable_eplb": FLAG_OR_NULL,
    "actor_rollout_ref.model.lora_rank": RANK,
    "actor_rollout_ref.model.lora.rank": RANK,
    "actor_rollout_ref.model.lora_adapter_path": NAME_OR_NULL,
    "actor_rollout_ref.model.target_modules": ANY,  # "all-linear" or a list of names (memory_settings.lora)
    "actor_rollout_ref.model.lora.target_modules": ANY,
    f"{_RO}.engine_kwargs.sglang.enable_dp_attention": FLAG_OR_NULL,
    f"{_RO}.engine_kwargs.sglang.mem_fraction_static": FRACTION_OR_NULL,
    f"{_C}.enable": FLAG_OR_NULL,
    f"{_C}.strategy": NAME,
    f"{_C}.ppo_mini_batch_size": COUNT,
    f"{_C}.ppo_micro_batch_size": COUNT_OR_NULL,
    f"{_C}.ppo_micro_batch_size_per_gpu": COUNT_OR_NULL,
    f"{_C}.use_dynamic_bsz": FLAG,
    f"{_C}.ppo_infer_max_token_len_per_gpu": COUNT,
    f"{_C}.ppo_max_token_len_per_gpu": COUNT,
    f"{_C}.forward_max_token_len_per_gpu": COUNT,
    **{
        f"{_C}.megatron.{k}_parallel_size": COUNT for k in ("tensor_model", "pipeline_model", "context", "expert_model")
    },
    f"{_C}.megatron.expert_tensor_parallel_size": COUNT_OR_NULL,
    f"{_C}.megatron.virtual_pipeline_model_parallel_size": COUNT_OR_NULL,
    f"{_A}.megatron.dtype": NAME,
    f"{_A}.megatron.use_distributed_optimizer": FLAG,
    f"{_A}.megatron.param_offload": FLAG,
    f"{_A}.megatron.optimizer_offload": FLAG,
    f"{_A}.optim.optimizer": NAME,
    f"{_A}.optim.use_precision_aware_optimizer": FLAG,
    f"{_A}.optim.main_grads_dtype": NAME,
    f"{_A}.optim.exp_avg_dtype": NAME,
    f"{_A}.optim.exp_avg_sq_dtype": NAME,
    f"{_A}.optim.override_optimizer_config.optimizer_cpu_offload": FLAG_OR_NULL,
    f"{_A}.optim.override_optimizer_config.optimizer_offload_fraction": FRACTION_OR_NULL,
    f"{_OTC_KEY}.recompute_granularity": NAME_OR_NULL,
    f"{_OTC_KEY}.recompute_method": NAME_OR_NULL,
    f"{_OTC_KEY}.recompute_num_layers": COUNT_OR_NULL,
    f"{_OTC_KEY}.recompute_modules": ValueKind("texts", none=True),
    f"{_OTC_KEY}.fp8": ANY,  # "e4m3" | "hybrid" | False / None (bf16)
    f"{_OTC_KEY}.fp8_recipe": NAME_OR_NULL,
    f"{_OTC_KEY}.fp8_param": FLAG_OR_NULL,
    f"{_OTC_KEY}.overlap_moe_expert_parallel_comm": FLAG_OR_NULL,
    f"{_OTC_KEY}.cuda_graph_impl": NAME_OR_NULL,  # MEM-NOT-MODELLED
    f"{_OTC_KEY}.enable_cuda_graph": FLAG_OR_NULL,
    f"{_A}.calculate_entropy": FLAG,
    f"{_A}.entropy_coeff": NUMBER,
    f"{_A}.entropy_from_logits_with_chunking": FLAG,
    f"{_A}.entropy_from_logits_chunk_size": COUNT,
    f"{_A}.use_fused_kernels": FLAG,
    f"{_R}.megatron.param_offload": FLAG,
    f"{_RO}.dtype": NAME,
    f"{_A}.fsdp_config.reshard_after_forward": FLAG,
    f"{_A}.fsdp_config.mixed_precision": ANY,
    "actor_rollout_ref.model.enable_gradient_checkpointing": FLAG,
    "actor_rollout_ref.model.enable_activation_offload": FLAG,
    "actor_rollout_ref.model.mtp.enable": FLAG,
    f"{_A}.megatron.use_mbridge": FLAG,
    f"{_R}.megatron.use_mbridge": FLAG,
    f"{_C}.megatron.use_mbridge": FLAG,
    f"{_A}.megatron.vanilla_mbridge": FLAG,
    f"{_A}.megatron.grad_offload": FLAG,
    f"{_C}.megatron.grad_offload": FLAG,
    f"{_R}.megatron.vanilla_mbridge": FLAG,
    f"{_C}.megatron.vanilla_mbridge": FLAG,
    f"{_C}.megatron.param_offload": FLAG,
    f"{_C}.megatron.optimizer_offload": FLAG,
    "actor_rollout_ref.model.use_remove_padding": FLAG,
    f"{_C}.model.use_remove_padding": FLAG,
    f"{_C}.model.path": NAME_OR_NULL,
    f"{_C}.ulysses_sequence_parallel_size": COUNT,
    f"{_C}.fsdp.ulysses_sequence_parallel_size": COUNT,
    f"{_A}.ulysses_sequence_parallel_size": COUNT,
    f"{_A}.fsdp_config.ulysses_sequence_parallel_size": COUNT,
}
# verl's FSDP engine strategies (FSDPEngineConfig.__post_init__ also accepts fsdp_turbo, whose own
# turbo_config sizes shardcheck does not model).
FSDP_STRATEGIES = ("fsdp", "fsdp2")
# FSDP roles: (role, role config section, its engine section, whether a role-level Ulysses size > 1
# overrides the engine's). FSDPActorConfig.__post_init__ copies the deprecated
# ``ulysses_sequence_parallel_size`` into ``fsdp_config`` (actor and ref); FSDPCriticConfig has no
# such copy, so the critic engine reads only ``critic.fsdp.ulysses_sequence_parallel_size``.
FSDP_ROLES = (
    ("actor", "actor_rollout_ref.actor", "actor_rollout_ref.actor.fsdp_config", True),
    ("ref", "actor_rollout_ref.ref", "actor_rollout_ref.ref.fsdp_config", True),
    ("critic", "critic", "critic.fsdp", False),
)
# Config groups of verl 0.9.1's trainer config (directories of verl/trainer/config). A bare
# `group=option` override selects an option in ppo_trainer.yaml's defaults list.
CONFIG_GROUPS = frozenset(
    {
        "actor",
        "algorithm",
        "critic",
        "data",
        "distillation",
        "engine",
        "model",
        "model_engine",
        "npu_profile",
        "optim",
        "profiler",
        "ref",
        "reward",
        "rollout",
        "transfer_queue",
    }
)
# The entry point whose config shardcheck models; recipes (recipe.*) are Hydra apps with configs of their own.
PPO_ENTRY = "verl.trainer.main_ppo"
# verl's other PPO trainers on the same config (their @hydra.main names verl/trainer/config's ppo_trainer; the
# catalogue's ``entries``): main_ppo_sync (verl 0.8.0). Modelled as main_ppo.
PPO_ENTRIES = (PPO_ENTRY, "verl.trainer.main_ppo_sync")
# verl's experimental PPO trainers with a config directory of their own (defaults lists over ppo_trainer /
# ppo_megatron_trainer, verl/experimental/<x>/config, verl ≥ 0.8.0): composed from the catalogue's copy of those
# files like a recipe's config. Their separate rollout pool is not modelled (the trainer and rollout are judged as
# main_ppo's colocated ones).
EXPERIMENTAL_PPO = (
    "verl.experimental.fully_async_policy.fully_async_main",
    "verl.experimental.one_step_off_policy.main_ppo",
)
# verl's fully async trainer: data.train_batch_size must be 0 (verl/experimental/fully_async_policy/
# fully_async_rollouter.py FullyAsyncRollouter.__init__: ``assert self.config.data.train_batch_size == 0,
# "train_batch_size must be zero"``, verl-project/verl 0.8.0; recipe/fully_async_policy/ before it moved)
FULLY_ASYNC_KINDS = {"data.train_batch_size": ValueKind("int", low=0, high=0)}
FULLY_ASYNC_BATCH = (
    "fully_async_main takes data.train_batch_size = 0; its batch is require_batches × ppo_mini_batch_size, "
    "which shardcheck does not model"
)


def _fully_async(launch: Launch) -> bool:
    return bool(launch.module) and launch.module.endswith("fully_async_policy.fully_async_main")


_PLACEHOLDER = re.compile(r"__shardcheck_unknown_\d+__")
_OTC = "override_transformer_config"


# The options Hydra's own command line takes (hydra/_internal/utils.py get_args_parser, hydra-core 1.3): any
# other ``--flag`` is no Hydra override, so a recipe module given one parses with argparse (recipe/r1/
# data_process.py's --local_dir) and is no trainer launch.
HYDRA_OPTIONS = frozenset(
    {
        "--config-path",
        "-cp",
        "--config-name",
        "-cn",
        "--config-dir",
        "-cd",
        "--multirun",
        "-m",
        "--cfg",
        "-c",
        "--package",
        "-p",
        "--resolve",
        "--info",
        "-i",
        "--run",
        "-r",
        "--experimental-rerun",
        "--help",
        "-h",
        "--hydra-help",
        "--version",
        "--shell-completion",
        "-sc",
    }
)


def is_verl_entry(launch: Launch) -> bool:
    """verl's PPO trainer, a recipe's Hydra entry point (judged with unknown config defaults), or a verl fork's own
    PPO entry (``verl_tool.trainer.main_ppo``, ``<pkg>.recipe.<x>.main_<y>``: a Hydra app over verl's trainer, its
    config read where Hydra finds it, as a recipe's); a recipe module given an option Hydra does not take is an
    argparse program (a data script), not a trainer."""
    if launch.module in PPO_ENTRIES + EXPERIMENTAL_PPO:
        return True
    if not launch.module or not (launch.module.split(".")[0] == "recipe" or is_fork_entry(launch.module)):
        return False
    options = {w.text.split("=", 1)[0] for w in launch.args if w.text and w.text.startswith("-")}
    return options <= HYDRA_OPTIONS


def is_fork_entry(module: str) -> bool:
    """``verl_tool.trainer.main_ppo`` (a package's ``trainer.main_ppo``) or ``<pkg>.recipe.<x>.main_<y>``; verl's own
    modules are not forks."""
    parts = module.split(".")
    if parts[0] == "verl" or len(parts) < 3:
        return False
    return parts[-2:] == ["trainer", "main_ppo"] or ("recipe" in parts[1:-1] and parts[-1].startswith("main_"))


def unmodelled_verl_entry(launch: Launch) -> bool:
    """Another verl entry point (sft_trainer, main_generation, ...), whose config is not modelled."""
    return bool(launch.module) and launch.module.split(".")[0] == "verl" and not is_verl_entry(launch)


def unmodelled_reason(module: str) -> str:
    """Why a verl entry point is skipped: what the catalogue knows of it (its Hydra config and the versions that
    have it), or that no bundled verl has it as a Hydra app."""
    from shardcheck.frameworks.verl.versions import entry_config, versions_with_entry

    having = versions_with_entry(module)
    if having:
        _, name = entry_config(module, having[-1])
        return (
            f"{module} (a Hydra app on verl's config {name}, in verl {span(having)}) is not modelled yet; "
            "shardcheck models main_ppo, main_ppo_sync, fully_async_main, one_step_off_policy, "
            "the SFT trainers and main_generation / main_generation_server"
        )
    return f"{module} is no Hydra app of any bundled verl (no config to read); not modelled"


def _clean(text: str) -> str:
    return _PLACEHOLDER.sub("⟨?⟩", text)


def _config_name(hydra: HydraCommandLine) -> tuple[str, Origin | None]:
    if hydra.config_name is None:
        return "ppo_trainer", None
    text = hydra.config_name.text or ""
    name = text.removesuffix(".yaml")
    return name, hydra.config_name.origin


def split_group_choices(
    items: tuple[OverrideItem, ...],
) -> tuple[tuple[OverrideItem, ...], str | None, OverrideItem | None]:
    """Separate config-group choices from key overrides.

    Returns the key overrides, the ``model_engine`` choice (dp, megatron, veomni, torchtitan: Hydra
    applies a group choice while composing, wherever it stands on the line), and the first other
    group choice, which selects a config shardcheck does not read.
    """
    overrides: list[OverrideItem] = []
    engine: str | None = None
    unread: OverrideItem | None = None
    for item in items:
        group = item.key.split("@")[0]
        if group not in CONFIG_GROUPS:
            overrides.append(item)
        elif group == "model_engine" and item.kind in ("change", "force_add") and item.value in MODEL_ENGINES:
            engine = item.value
        else:
            unread = unread or item
    return tuple(overrides), engine, unread


def read_size(
    traced: Traced, key: str, notes: list[Problem], *, allow_none: bool = False, positive: bool = True
) -> Traced:
    """An integer size; a value of another type becomes unknown with a note naming its line."""
    if not traced.known:
        return traced
    value = traced.value
    if value is None and allow_none:
        return traced
    if value == "None" and allow_none and traced.origin.kind == "default":
        # verl 0.4.x ppo_megatron_trainer.yaml and 0.5.0 ref/megatron_ref.yaml write the ref's
        # `expert_tensor_parallel_size: None` (YAML: the string "None"); those releases build the ref with
        # the actor's parallel state (megatron_workers.py initialize_model_parallel reads actor.megatron),
        # so the string is never used as a size: it stands for null here.
        return Traced(None, traced.origin)
    if isinstance(value, bool) or not isinstance(value, int) or (positive and value < 1) or abs(value) > MAX_INT:
        where = traced.origin.first_script_line() or traced.origin
        why = COUNT.beyond(value)  # inf, NaN or past 2^40: said, not only the range
        notes.append(
            Problem(Kind.NOT_POSITIVE, where, {"name": key, "value": shown(value), "at_most": "2^40", "why": why})
        )
        return Traced(None, traced.origin, f"{key} is not a positive integer ({shown(value)})")
    return traced


def read_value(config: VerlConfig, key: str, kind: ValueKind, notes: list[Problem]) -> Traced:
    """``config.get(key)`` (or its meaning where this verl's config lacks it: ``_value``), checked to be of
    ``kind`` where it is read (else VALUE-BAD-* and unknown)."""
    return checked(key, _value(config, key), kind, notes)


def _bool(traced: Traced) -> Traced:
    if traced.known and not isinstance(traced.value, bool):
        return Traced(bool(traced.value), traced.origin)
    return traced


def engine_layout(config: VerlConfig, role: str, notes: list[Problem], base: str | None = None) -> MegatronLayout:
    """One Megatron engine resolved from its own section (``base``: ``<role section>.megatron`` unless given),
    ``override_transformer_config`` included (verl/workers/engine/megatron/transformer_impl.py _build_tf_config
    reads ``self.engine_config.override_transformer_config``, verl 0.9.1)."""
    base = base or f"{ROLES[role]}.megatron"

    def field_value(name: str) -> Traced:
        key = f"{base}.{name}"
        traced = config.get(key)
        if not traced.known and config.custom is None and name in MCORE_FIELD_DEFAULTS and config.is_missing(key):
            # deleted from the section (``~key``): the engine dataclass's field default applies
            value = MCORE_FIELD_DEFAULTS[name]
            return Traced(
                value,
                Origin(
                    kind="default",
                    text=f"default of verl {config.version} McoreEngineConfig: {name} = {value} ({key} is deleted)",
                ),
            )
        return traced

    def size(name: str, *, allow_none: bool = False) -> Traced:
        return read_size(field_value(name), f"{base}.{name}", notes, allow_none=allow_none)

    otc = field_value(_OTC)
    overrides: dict[str, Traced] = {}
    if otc.known and isinstance(otc.value, dict):
        for k in otc.value:
            overrides[k] = config.get(f"{base}.{_OTC}.{k}")
    replaced = config.replaced_inheritance(f"{base}.{_OTC}")

    def otc_get(name: str, default):
        if name in overrides:
            return overrides[name]
        text = f"default of megatron-core TransformerConfig: {name} = {default}"
        if replaced is not None:
            text += f", not the actor's: this override replaced the inherited {_OTC} with a new dict"
            return Traced(default, Origin(kind="default", text=text, via=(replaced.word,)))
        return Traced(default, Origin(kind="default", text=text))

    return MegatronLayout(
        role=role,
        key_prefix=base,
        tp=size("tensor_model_parallel_size"),
        pp=size("pipeline_model_parallel_size"),
        cp=size("context_parallel_size"),
        ep=size("expert_model_parallel_size"),
        etp_setting=size("expert_tensor_parallel_size", allow_none=True),
        vpp=size("virtual_pipeline_model_parallel_size", allow_none=True),
        first_stage_layers=read_size(
            otc_get("num_layers_in_first_pipeline_stage", None),
            f"{base}.{_OTC}.num_layers_in_first_pipeline_stage",
            notes,
            allow_none=True,
            positive=False,
        ),
        last_stage_layers=read_size(
            otc_get("num_layers_in_last_pipeline_stage", None),
            f"{base}.{_OTC}.num_layers_in_last_pipeline_stage",
            notes,
            allow_none=True,
            positive=False,
        ),
        account_for_embedding=_bool(
            checked(
                f"{base}.{_OTC}.account_for_embedding_in_pipeline_split",
                otc_get("account_for_embedding_in_pipeline_split", False),
                FLAG,
                notes,
            )
        ),
        account_for_loss=_bool(
            checked(
                f"{base}.{_OTC}.account_for_loss_in_pipeline_split",
                otc_get("account_for_loss_in_pipeline_split", False),
                FLAG,
                notes,
            )
        ),
        layout_string=checked(
            f"{base}.{_OTC}.pipeline_model_parallel_layout",
            otc_get("pipeline_model_parallel_layout", None),
            NAME_OR_NULL,
            notes,
        ),
        sequence_parallel=_bool(checked(f"{base}.sequence_parallel", field_value("sequence_parallel"), FLAG, notes)),
        transformer_overrides=overrides,
        transformer_overrides_replaced=(
            replace(replaced.word, text=_clean(replaced.text)) if replaced is not None else None
        ),
    )


def _ulysses_size(
    config: VerlConfig, section: str, engine: str, propagates: bool, notes: list[Problem], legacy: str | None = None
) -> tuple[Traced, str]:
    """The Ulysses SP size an FSDP engine uses, and the key that decides it (FSDPActorConfig.__post_init__,
    verl 0.9.1: ``if self.ulysses_sequence_parallel_size > 1:
    self.fsdp_config.ulysses_sequence_parallel_size = ...``). ``legacy``: the role-level key verl's legacy FSDP
    workers read instead (fsdp_workers.py, verl 0.4.0 … 0.7.1: ``self.config.actor.get("ulysses_sequence_parallel_size",
    1)`` for the actor and the ref, the critic's own for the critic; the engine-level keys are not read)."""
    if legacy is not None:
        return read_size(config.get(legacy), legacy, notes), legacy
    engine_key, role_key = f"{engine}.ulysses_sequence_parallel_size", f"{section}.ulysses_sequence_parallel_size"
    if config.setter(engine_key) is None and config.is_missing(engine_key) and not config.is_missing(role_key):
        # releases before the engine-level key (verl ≤ 0.5: the role's own ulysses_sequence_parallel_size)
        return read_size(config.get(role_key), role_key, notes), role_key
    engine_sp = read_size(config.get(engine_key), engine_key, notes)
    if not propagates:
        return engine_sp, engine_key
    role_sp = read_size(config.get(role_key), role_key, notes)
    if not role_sp.known:
        return role_sp, role_key
    if role_sp.value > 1:
        origin = Origin(
            kind="derived",
            text=f"{role_key} > 1 replaces the engine's (verl FSDPActorConfig.__post_init__)",
            via=(role_sp.origin,),
        )
        return Traced(role_sp.value, origin), role_key
    return engine_sp, engine_key


def _fsdp_layout(
    config: VerlConfig, role: str, section: str, engine: str, propagates: bool, notes: list[Problem]
) -> FsdpLayout:
    setting = config.get("trainer.use_legacy_worker_impl")
    legacy = None
    if legacy_workers(config.version, role, setting.value if setting.known else None, fsdp=True):
        legacy = (
            "critic.ulysses_sequence_parallel_size"
            if role == "critic"
            else f"{ROLES['actor']}.ulysses_sequence_parallel_size"
        )
    sp, sp_key = _ulysses_size(config, section, engine, propagates, notes, legacy)
    size_key, optimizer_offload = f"{engine}.fsdp_size", None
    if role == "ref" and config.is_missing(size_key) and config.setter(size_key) is None:
        # verl 0.4.0 … 0.5.0: the ref's fsdp_config has no fsdp_size (nor optimizer_offload: it has no optimizer);
        # the ref is built in the actor's worker, on the mesh of the actor's fsdp_size (fsdp_workers.py
        # ActorRolloutRefWorker.__init__: create_device_mesh(..., fsdp_size=self.config.actor.fsdp_config.fsdp_size))
        size_key = "actor_rollout_ref.actor.fsdp_config.fsdp_size"
        optimizer_offload = Traced(False, Origin(kind="default", text="the ref has no optimizer"))
    return FsdpLayout(
        role=role,
        key_prefix=engine,
        strategy=read_value(config, f"{section}.strategy", NAME, notes),
        sp=sp,
        sp_key=sp_key,
        size_key=size_key,
        fsdp_size=read_size(config.get(size_key), size_key, notes, positive=False),
        model_dtype=read_value(config, f"{engine}.model_dtype", NAME, notes),
        param_offload=_bool(read_value(config, f"{engine}.param_offload", FLAG, notes)),
        optimizer_offload=optimizer_offload or _bool(read_value(config, f"{engine}.optimizer_offload", FLAG, notes)),
        offload_policy=_bool(read_value(config, f"{engine}.offload_policy", FLAG, notes)),
    )


# The keys that make verl compute the ref's log-probs with the actor itself, its LoRA adapters disabled, and build
# no ref engine ("ref_in_actor"), by the first verl release that reads each: verl/trainer/ppo/ray_trainer.py
# (0.4.0 … 0.6.0: ``model.get("lora_rank", 0) > 0``; 0.6.1, 0.7.0: ``or model.get("lora_adapter_path") is not
# None``; 0.7.1: ``model.get("lora", {}).get("rank", 0)``, else ``lora_rank``), main_ppo.py (0.7.1, 0.8.0),
# main_ppo_v0.py and ppo/v1/trainer_base.py (0.9.0, 0.9.1, main of 2026-08-22).
REF_IN_ACTOR_KEYS = (
    ("actor_rollout_ref.model.lora_rank", "0.4.0"),
    ("actor_rollout_ref.model.lora_adapter_path", "0.6.1"),
    ("actor_rollout_ref.model.lora.rank", "0.7.1"),
)


def _ref_in_actor(config: VerlConfig, notes: list[Problem]) -> Traced:
    """Whether the ref is the actor without its LoRA adapters (no ref engine is built): REF_IN_ACTOR_KEYS."""
    inputs = []
    for key, since in REF_IN_ACTOR_KEYS:
        if not at_least(config.version, since):
            continue
        if config.setter(key) is None and config.is_missing(key):
            continue  # verl reads it with .get(): absent is 0 / None
        traced = read_value(config, key, NAME_OR_NULL if key.endswith("path") else RANK, notes)
        if traced.known and (traced.value is not None if key.endswith("path") else (traced.value or 0) > 0):
            return Traced.derived(True, f"ref in actor: {key} is set (LoRA; no ref engine is built)", traced)
        inputs.append(traced)
    read = [key for key, since in REF_IN_ACTOR_KEYS if at_least(config.version, since)]
    formula = "ref in actor = " + " or ".join(f"{key} set" for key in read)
    return Traced.derived(False, formula, *inputs)


def _and_not(used: Traced, in_actor: Traced) -> Traced:
    """The ref engine is built when the ref is used and is not the actor itself."""
    value = None if not (used.known and in_actor.known) else bool(used.value) and not in_actor.value
    return Traced.derived(value, "ref engine built = ref used and not ref in actor (LoRA)", used, in_actor)


def _critic_used(config: VerlConfig, notes: list[Problem]) -> Traced:
    """verl/trainer/ppo/utils.py need_critic: ``critic.enable`` when set, else adv_estimator == gae."""
    enable = read_value(config, "critic.enable", FLAG_OR_NULL, notes)
    estimator = read_value(config, "algorithm.adv_estimator", NAME, notes)
    if not enable.known and config.setter("critic.enable") is None and config.is_missing("critic.enable"):
        # releases without the key (verl ≤ 0.5: ray_trainer.py use_critic = adv_estimator == GAE)
        enable = Traced(None, Origin(kind="default", text=f"critic.enable is not in verl {config.version}'s config"))
    if enable.known and enable.value is not None:
        return Traced.derived(bool(enable.value), "critic built = critic.enable", enable)
    return Traced.derived(
        estimator.value == "gae" if estimator.known else None,
        "critic built = (algorithm.adv_estimator == gae)",
        enable,
        estimator,
    )


def _critic_engine(config: VerlConfig, engine: str) -> str:
    """The critic's FSDP engine section in this config: ``critic.fsdp`` from verl 0.8.0, where a release (or a
    carried fork) has none of it, ``critic.model.fsdp_config``: verl 0.4.0 … 0.7.1 build the critic's mesh from
    ``self.config.model.fsdp_config.fsdp_size`` and read its offload flags and dtype there (fsdp_workers.py
    CriticWorker.__init__, v0.7.1 bec9ef7 line 1311; v0.4.0 0758489 line 784)."""
    if config.is_missing(engine) and not config.is_missing(CRITIC_ENGINE_BEFORE_0_8):
        return CRITIC_ENGINE_BEFORE_0_8
    return engine


def _fsdp_layouts(
    config: VerlConfig, ref_used: Traced, critic_used: Traced, notes: list[Problem]
) -> tuple[FsdpLayout, ...]:
    """The FSDP engines verl builds: the actor, the ref when it is used, the critic when it is used."""
    built = {
        "actor": Traced(True, Origin(kind="default", text="the actor is always built")),
        "ref": ref_used,
        "critic": critic_used,
    }
    out = []
    for role, section, engine, propagates in FSDP_ROLES:
        strategy = read_value(config, f"{section}.strategy", NAME, notes)
        if built[role].value is False or not (strategy.known and strategy.value in FSDP_STRATEGIES):
            continue
        if role == "critic":
            engine = _critic_engine(config, engine)
        out.append(_fsdp_layout(config, role, section, engine, propagates, notes))
    return tuple(out)


def _choose_defaults(
    name: str,
    overrides: tuple[OverrideItem, ...],
    engine: str | None,
    custom: str | None,
    requested: tuple[str, str] | None,
    pinned: tuple[str, str] | None,
):
    """The verl version to judge with (see versions.py) and its config ``name``."""
    if isinstance(requested, VerlPathRequest):  # --verl-path: its own tree, whatever the script's keys
        choice = choose(name, overrides, requested=requested, engine=engine)
        return choice, verl_path.load(requested.directory).defaults(name)
    if requested is None:
        installed = installed_defaults(name)
        if installed is not None:
            return VersionChoice(
                installed.version, "installed", (), f"verl {installed.version} installed in this environment"
            ), installed
    if custom is not None and requested is None:  # a config of its own: its keys are not verl's to judge
        newest = catalogue().releases[-1]
        choice = VersionChoice(
            newest,
            "default",
            (),
            f"verl {newest}, the newest release (the script's own config "
            "is not read, so its keys cannot tell the version)",
        )
    else:
        choice = choose(name, overrides, requested=requested, pinned=pinned, engine=engine)
    return choice, bundled_defaults(name, choice.version)


def _own_config(
    launch: Launch,
    hydra: HydraCommandLine,
    path: str,
    overrides: tuple[OverrideItem, ...],
    requested: tuple[str, str] | None,
    pinned: tuple[str, str] | None,
) -> tuple | str:
    """The launch's own config (``--config-path`` / ``--config-name``, a recipe's ``@hydra.main``) composed by Hydra
    over the chosen verl version's tree (custom_config.py): (choice, defaults); ("verl", name) when the launch's
    config directory is verl's own tree; or why it cannot be read."""
    name = (
        hydra.config_name.text.removesuffix(".yaml")
        if hydra.config_name is not None and hydra.config_name.known
        else None
    )
    if hydra.config_name is not None and name is None:
        return f"--config-name {hydra.config_name.render()} is not known"
    try:
        if launch.module in EXPERIMENTAL_PPO and hydra.config_path is None:
            return _experimental_config(launch, name, overrides, requested, pinned)
        own = custom_config.load(Path(path), launch.module, hydra.config_path, name)
    except custom_config.VerlOwnTree as exc:
        if exc.name.removesuffix(".yaml") in KNOWN_CONFIGS:
            return ("verl", exc.name.removesuffix(".yaml"))
        return f"verl's config {exc.name} is not one shardcheck models"
    except custom_config.CustomConfigUnread as exc:
        return exc.reason
    except UnreadableInput as exc:  # a YAML that is not a regular file, or over the size cap: its path and why
        return str(exc)
    cat = catalogue()
    installed = installed_config_dir() if requested is None else None
    base = next((b for b in own.verl_bases if b in cat.keys), None)
    if isinstance(requested, VerlPathRequest):  # --verl-path: the directory's files as verl's tree
        given = verl_path.load(requested.directory)
        choice = choose(base or "ppo_trainer", overrides, requested=requested, own=own.files.keys())
        tree = custom_config.VerlTree(f"verl at {given.given} ({given.recognised})", given.files)
    elif installed is not None:
        version, directory = installed
        choice = VersionChoice(version, "installed", (), f"verl {version} installed in this environment")
        tree = custom_config.directory_tree(directory, f"installed verl {version} ({directory})")
    else:
        if base is None and requested is None and pinned is None:
            newest = cat.releases[-1]
            choice = VersionChoice(
                newest, "default", (), f"verl {newest}, the newest release ({own.label} names no config of verl's)"
            )
        else:
            choice = choose(base or "ppo_trainer", overrides, requested=requested, pinned=pinned, own=own.files.keys())
        tree = custom_config.catalogue_tree(choice.version)
    try:
        composed = custom_config.compose(own, tree)
    except custom_config.CustomConfigUnread as exc:
        return exc.reason
    source = f"{own.label} ({own.found_by}) composed by Hydra over {tree.label}"
    label = verl_path.load(requested.directory).label if isinstance(requested, VerlPathRequest) else choice.version
    return choice, VerlDefaults(composed, label, source, own.name, own.files.keys(), own.label)


def _experimental_config(
    launch: Launch,
    name: str | None,
    overrides: tuple[OverrideItem, ...],
    requested: tuple[str, str] | None,
    pinned: tuple[str, str] | None,
) -> tuple:
    """An experimental trainer's own config directory (the catalogue's copy of ``verl/experimental/<x>/config``)
    composed over the chosen version's tree, as ``_own_config`` composes a recipe's."""
    from shardcheck.frameworks.verl.versions import entry_config, entry_files, versions_with_entry

    module = launch.module or ""
    if isinstance(requested, VerlPathRequest):
        return _experimental_from_path(module, name, overrides, requested)
    having = versions_with_entry(module)
    if not having:
        return f"{module} is in no bundled verl version"
    folder, default_name = entry_config(module, having[-1])
    name = name or default_name
    newest_files = entry_files(having[-1], folder)
    if f"{name}.yaml" not in newest_files:
        return f"verl {having[-1]}'s {folder} has no {name}.yaml"
    probe = custom_config.CustomConfig(
        name, custom_config.ConfigFiles(Path(folder), newest_files), (), (), f"verl {having[-1]}"
    )
    own_keys = probe.files.keys()
    base = next(
        (e for e in newest_files[f"{name}.yaml"][1].get("defaults", []) if isinstance(e, str) and e != "_self_"),
        "ppo_trainer",
    )
    choice = choose(base, overrides, requested=requested, pinned=pinned, own=own_keys)
    if not choice.strict:  # inferred: only the versions that have this entry point count
        accepted = tuple(v for v in choice.accepted if v in having)
        releases = [v for v in accepted if v in catalogue().releases]
        version = (releases or list(accepted) or list(having))[-1]
        choice = VersionChoice(
            version,
            "inferred" if accepted else "default",
            accepted,
            f"verl {version}: the newest version with {module} that accepts every key of this script"
            + (f" (accepted: {span(accepted)})" if accepted else ""),
        )
    version = choice.version if choice.version in having else having[-1]
    files = entry_files(version, folder)
    searchpath = tuple((files[f"{name}.yaml"][1].get("hydra") or {}).get("searchpath") or ())
    own = custom_config.CustomConfig(
        name, custom_config.ConfigFiles(Path(folder), files), (base,), searchpath, f"verl {version}'s {folder}"
    )
    try:
        composed = custom_config.compose(own, custom_config.catalogue_tree(version))
    except custom_config.CustomConfigUnread as exc:
        return exc.reason
    if version != choice.version:
        choice = VersionChoice(
            version, choice.source, choice.accepted, f"verl {version}: the newest bundled version that has {module}"
        )
    source = f"verl {version}'s {folder}/{name}.yaml composed by Hydra over verl {version}'s tree"
    return choice, VerlDefaults(composed, version, source, name, own_keys, f"verl {version} {folder}/{name}.yaml")


def _experimental_from_path(
    module: str, name: str | None, overrides: tuple[OverrideItem, ...], requested: VerlPathRequest
) -> tuple | str:
    """``_experimental_config`` over a ``--verl-path`` directory: its own copy of the trainer's config folder
    (found through the module's ``@hydra.main``, read with ``ast``) composed over its own tree."""
    given = verl_path.load(requested.directory)
    found = given.entry_config(module)
    if found is None:
        return f"{module} is no Hydra app in verl at {given.given}"
    folder, default_name = found
    name = name or default_name
    files = given.entry_files(folder)
    if f"{name}.yaml" not in files:
        return f"verl at {given.given}: {folder} has no {name}.yaml"
    primary = files[f"{name}.yaml"][1] if isinstance(files[f"{name}.yaml"][1], dict) else {}
    base = next((e for e in primary.get("defaults", []) if isinstance(e, str) and e != "_self_"), "ppo_trainer")
    searchpath = tuple((primary.get("hydra") or {}).get("searchpath") or ())
    own = custom_config.CustomConfig(
        name, custom_config.ConfigFiles(given.root / folder, files), (base,), searchpath, f"verl at {given.given}"
    )
    own_keys = own.files.keys()
    choice = choose(base, overrides, requested=requested, own=own_keys)
    try:
        composed = custom_config.compose(
            own, custom_config.VerlTree(f"verl at {given.given} ({given.recognised})", given.files)
        )
    except custom_config.CustomConfigUnread as exc:
        return exc.reason
    source = f"{folder}/{name}.yaml of verl at {given.given} composed by Hydra over its tree ({given.recognised})"
    return choice, VerlDefaults(composed, given.label, source, name, own_keys, f"{given.given}: {folder}/{name}.yaml")


def _versions_having(config: VerlConfig, key: str) -> str:
    """``; present in verl 0.6.0 … 0.9.0`` for a key the judged version lacks but others have."""
    having = catalogue().having(config.defaults.config_name, key)
    if not having:
        return ""
    return f"; present in verl {span(having)}"


def _rename(config: VerlConfig, key: str) -> tuple[str, str, str] | None:
    """The catalogue's rename of ``key`` for the judged version (versions.renamed), unless the script already sets
    the key it was renamed to (then renaming would not help: the override is simply left over)."""
    if config.version not in catalogue().versions:  # a --verl-path tree: no release history to derive from
        return None
    found = renamed(config.defaults.config_name, key, config.version)
    if found is None or found[1] in config.set_by:
        return None
    return found


# verl/workers/config/engine.py McoreEngineConfig field defaults (verl 0.9.1)
MCORE_FIELD_DEFAULTS = {
    "tensor_model_parallel_size": 1,
    "expert_model_parallel_size": 1,
    "expert_tensor_parallel_size": None,
    "pipeline_model_parallel_size": 1,
    "virtual_pipeline_model_parallel_size": None,
    "context_parallel_size": 1,
    "sequence_parallel": True,
    _OTC: {},
}
RM = "reward.reward_model"
# verl/workers/config/rollout.py RolloutConfig field defaults (verl 0.9.1)
ROLLOUT_FIELD_DEFAULTS = {
    "tensor_model_parallel_size": 2,
    "data_parallel_size": 1,
    "pipeline_model_parallel_size": 1,
    "expert_parallel_size": 1,
}
DISTILL = "distillation"


def _server(
    config: VerlConfig,
    role: str,
    section: str,
    cluster: Cluster,
    pool_key: str | None,
    notes: list[Problem],
    switch: Traced,
    num_replicas: Traced | None = None,
) -> ServerLayout:
    def size(name: str) -> Traced:
        key = f"{section}.{name}"
        traced = config.get(key)
        if not traced.known and config.is_missing(key) and name in ROLLOUT_FIELD_DEFAULTS:
            # a key the section leaves out (the teacher's has no pipeline size; an added teacher may lack
            # any): the dataclass field's default
            value = ROLLOUT_FIELD_DEFAULTS[name]
            return Traced(
                value, Origin(kind="default", text=f"default of verl {config.version} RolloutConfig: {name} = {value}")
            )
        return read_size(traced, key, notes)

    if pool_key is None:
        nnodes, devices = cluster.nnodes, cluster.devices_per_node
    else:
        nnodes = read_size(config.get(f"{pool_key}.nnodes"), f"{pool_key}.nnodes", notes, positive=False)
        devices = read_size(
            config.get(f"{pool_key}.n_gpus_per_node"), f"{pool_key}.n_gpus_per_node", notes, positive=False
        )
    return ServerLayout(
        role=role,
        key_prefix=section,
        engine=read_value(config, f"{section}.name", NAME, notes),
        tp=size("tensor_model_parallel_size"),
        dp=size("data_parallel_size"),
        pp=size("pipeline_model_parallel_size"),
        ep=size("expert_parallel_size"),
        nnodes=nnodes,
        devices_per_node=devices,
        pool_key=pool_key,
        num_replicas=num_replicas,
        switch=switch,
    )


def _servers(config: VerlConfig, cluster: Cluster, notes: list[Problem]) -> tuple[ServerLayout, ...]:
    """The reward model (``reward.reward_model.enable``) and the distillation teachers
    (``distillation.enabled``) verl 0.9.1 starts, each on its pool (verl/trainer/ppo/v1/trainer_base.py
    init_resource_pool_mgr; verl/experimental/reward_loop/reward_model.py; verl/workers/config/distillation.py)."""
    out: list[ServerLayout] = []
    if config.custom is not None:
        return ()
    enable = read_value(config, f"{RM}.enable", FLAG_OR_NULL, notes)
    if enable.known and enable.value:
        own = read_value(config, f"{RM}.enable_resource_pool", FLAG_OR_NULL, notes)
        pool = RM if own.known and own.value else None
        out.append(_server(config, "reward model", f"{RM}.rollout", cluster, pool, notes, own if pool else enable))
    enabled = read_value(config, f"{DISTILL}.enabled", FLAG_OR_NULL, notes)
    if enabled.known and enabled.value:
        teachers = config.get(f"{DISTILL}.teacher_models")
        names = list(teachers.value) if teachers.known and isinstance(teachers.value, dict) else []
        if len(names) > 1:  # several teachers: the default single-teacher entry is dropped (_resolve_teacher_models)
            names = [n for n in names if n != "teacher_model"]
        for name in names:
            base = f"{DISTILL}.teacher_models.{name}"
            replicas = None
            if len(names) > 1 or name != "teacher_model":  # one teacher's count is derived from the pool
                replicas = read_value(config, f"{base}.num_replicas", ValueKind("int", low=0), notes)
                if not replicas.known and config.is_missing(f"{base}.num_replicas"):
                    replicas = Traced(
                        0,
                        Origin(
                            kind="default",
                            text=f"default of verl {config.version} DistillationTeacherModelConfig: num_replicas = 0",
                        ),
                    )
            out.append(
                _server(config, f"teacher {name}", f"{base}.inference", cluster, DISTILL, notes, enabled, replicas)
            )
    return tuple(out)


def config_notes(config: VerlConfig) -> list[Problem]:
    notes: list[Problem] = []
    for issue in config.issues:
        item = issue.override
        kind = {
            "unknown_key": Kind.CONFIG_UNKNOWN_KEY,
            "added_key": Kind.CONFIG_ADDED_KEY,
            "hydra": Kind.HYDRA_REJECTED,
        }[issue.kind]
        missing_megatron = (
            issue.kind == "unknown_key" and ".megatron." in item.key and config.defaults.config_name == "ppo_trainer"
        )
        elsewhere = _versions_having(config, item.key) if issue.kind == "unknown_key" else ""
        # an unknown key's suggestion is never one the script sets already (renaming would not help)
        suggestion = None if issue.kind == "unknown_key" and issue.suggestion in config.set_by else issue.suggestion
        rename = _rename(config, item.key) if issue.kind == "unknown_key" else None
        if rename is not None:
            suggestion = None  # the rename names the key; a near-miss guess beside it would only compete
        notes.append(
            Problem(
                kind,
                item.word,
                {
                    "text": _clean(item.text),
                    "reason": _clean(issue.message),
                    "key": _clean(item.key),
                    "suggestion": _clean(suggestion) if suggestion else None,
                    "megatron_section_missing": missing_megatron,
                    "version": config.version,
                    # the releases whose config has the key, when the chosen one lacks it
                    "elsewhere": elsewhere,
                    "having": span(catalogue().having(config.defaults.config_name, item.key)) if elsewhere else "",
                    # ("to" | "from", the key's name in the judged version, the release that renamed it)
                    "renamed": rename,
                },
            )
        )
    return notes


def _absent_meaning(key: str, traced: Traced) -> bool:
    """Whether ``traced`` is ABSENT_DEFAULTS' meaning of a key this release lacks (not a value to check)."""
    return key in ABSENT_DEFAULTS and traced.origin.kind == "default" and traced.origin.text == ABSENT_DEFAULTS[key][1]


def _value(config: VerlConfig, key: str) -> Traced:
    """``config.get(key)``; a key verl's YAML leaves out takes its documented default (ABSENT_DEFAULTS)."""
    traced = config.get(key)
    if (
        key in ABSENT_DEFAULTS
        and not traced.known
        and config.custom is None
        and config.setter(key) is None
        and config.is_missing(key)
    ):
        value, text = ABSENT_DEFAULTS[key]
        return Traced(value, Origin(kind="default", text=text))
    return traced


def resolve_verl(
    launch: Launch,
    hydra: HydraCommandLine,
    path: str,
    *,
    model_config: str | None = None,
    verl_version: tuple[str, str] | None = None,
    pinned: tuple[str, str] | None = None,
) -> Job:
    """The Job verl would build from this launch's command line.

    ``verl_version``: (version, where it was given) — a flag or a setting; ``pinned``: (version, file:line) of a
    pin found near the script. Without either, an installed verl, else the version is inferred (versions.py).
    """
    notes = command_line_notes(hydra)
    name, name_origin = _config_name(hydra)
    overrides, engine, unread_group = split_group_choices(hydra.overrides)
    custom: str | None = None
    choice: VersionChoice | None = None
    path_text = (hydra.config_path.text or "?").rstrip("/") if hydra.config_path is not None else "config"
    path_text = "config" if path_text == "./config" else path_text
    if unread_group is not None:
        custom = f"{name} with the group option {unread_group.text}"
        notes.append(
            Problem(
                Kind.CONFIG_CUSTOM_GROUP,
                unread_group.word,
                {"option": unread_group.text, "readable": [f"model_engine={k}" for k in MODEL_ENGINES]},
            )
        )
    elif launch.module not in PPO_ENTRIES or path_text not in ("config", "") or name not in KNOWN_CONFIGS:
        if launch.module in PPO_ENTRIES and path_text in ("config", "") and name in catalogue().keys:
            own = f"verl's config {name} is not one shardcheck models (it reads {', '.join(KNOWN_CONFIGS)})"
        elif launch.module in PPO_ENTRIES and path_text in ("config", ""):
            # hydra/_internal/utils.py compute_search_path_dir: a relative --config-path is relative to the file of
            # @hydra.main (verl/trainer/main_ppo.py), so this is verl's own tree (hydra-core 1.3)
            own = f"a relative --config-path {path_text} is verl's own verl/trainer/config, which has no {name}"
        elif engine is not None:
            own = f"model_engine={engine} over a launch's own config selects from verl's group files, not read"
        else:
            own = _own_config(launch, hydra, path, overrides, verl_version, pinned)
        if isinstance(own, tuple) and own[0] == "verl":  # the launch points at verl's own tree
            name = own[1]
        elif isinstance(own, str):
            custom = f"{name} ({launch.module}, --config-path {path_text})"
            origin = (
                hydra.config_path.origin
                if hydra.config_path is not None and path_text not in ("config", "")
                else name_origin or launch.origin
            )
            notes.append(Problem(Kind.CONFIG_CUSTOM, origin, {"config": custom, "entry": PPO_ENTRY, "why": own}))
        else:
            choice, defaults = own
            name = defaults.config_name
    if custom is not None:
        name = "ppo_trainer"  # only its key tree is used, in non-struct mode, to apply the overrides
    elif engine is not None and choice is None:
        name = MODEL_ENGINES[engine]
    if choice is None:
        choice, defaults = _choose_defaults(name, overrides, engine, custom, verl_version, pinned)
    config = apply_overrides(defaults, overrides, custom=custom)
    notes.extend(config_notes(config))

    cluster = Cluster(
        nnodes=read_size(config.get("trainer.nnodes"), "trainer.nnodes", notes),
        devices_per_node=read_size(config.get("trainer.n_gpus_per_node"), "trainer.n_gpus_per_node", notes),
        device=read_value(config, "trainer.device", NAME, notes),
    )
    strategy = read_value(config, "actor_rollout_ref.actor.strategy", NAME, notes)
    kl_loss = read_value(config, "actor_rollout_ref.actor.use_kl_loss", FLAG, notes)
    kl_reward = read_value(config, "algorithm.use_kl_in_reward", FLAG, notes)
    ref_used_value = None
    if kl_loss.known and kl_reward.known:
        ref_used_value = bool(kl_loss.value) or bool(kl_reward.value)
    ref_used = Traced.derived(
        ref_used_value, "ref built = algorithm.use_kl_in_reward or actor.use_kl_loss", kl_reward, kl_loss
    )
    in_actor = _ref_in_actor(config, notes)
    ref_built = ref_used if ref_used.value is False else _and_not(ref_used, in_actor)
    layouts: list[MegatronLayout] = []
    if strategy.known and strategy.value == "megatron":
        layouts.append(engine_layout(config, "actor", notes))
        ref_strategy = read_value(config, "actor_rollout_ref.ref.strategy", NAME, notes)
        if ref_built.value is not False and (not ref_strategy.known or ref_strategy.value == "megatron"):
            layouts.append(engine_layout(config, "ref", notes))

    ro = "actor_rollout_ref.rollout"
    rollout = RolloutLayout(
        engine=read_value(config, f"{ro}.name", NAME, notes),
        tp=read_size(config.get(f"{ro}.tensor_model_parallel_size"), f"{ro}.tensor_model_parallel_size", notes),
        dp=read_size(_value(config, f"{ro}.data_parallel_size"), f"{ro}.data_parallel_size", notes),
        pp=read_size(_value(config, f"{ro}.pipeline_model_parallel_size"), f"{ro}.pipeline_model_parallel_size", notes),
    )
    critic_used = _critic_used(config, notes)
    critic_strategy = read_value(config, "critic.strategy", NAME, notes)
    if layouts and critic_used.value is not False and critic_strategy.known and critic_strategy.value == "megatron":
        layouts.append(engine_layout(config, "critic", notes))
    fsdp_layouts = _fsdp_layouts(config, ref_built, critic_used, notes)
    servers = _servers(config, cluster, notes)
    model_path, model, problem = read_model(config, "actor_rollout_ref.model.path", notes, model_config, path)
    kinds = {**VALUE_KINDS, **(FULLY_ASYNC_KINDS if _fully_async(launch) else {})}
    values = {
        # a key this release lacks takes its meaning from ABSENT_DEFAULTS, unchecked (it is not the script's)
        key: traced if _absent_meaning(key, traced) else checked(key, traced, kinds.get(key, ANY), notes)
        for key in dict.fromkeys(VALUE_KEYS + MEMORY_KEYS + FSDP_VALUE_KEYS)
        for traced in (_value(config, key),)
    }
    if _fully_async(launch) and values["data.train_batch_size"].known:
        # the rollouter's 0 is no batch: the trainer's is require_batches × ppo_mini_batch_size, not modelled
        batch = values["data.train_batch_size"]
        values["data.train_batch_size"] = Traced(None, batch.origin, FULLY_ASYNC_BATCH)
    return Job(
        path=path,
        framework="verl",
        **job_fields(choice, config, defaults, hydra, config_name=name),
        entry=launch.entry,
        cluster=cluster,
        strategy=strategy,
        layouts=tuple(layouts),
        ref_used=ref_used,
        ref_in_actor=in_actor,
        critic_used=critic_used,
        model_path=model_path,
        model=model,
        model_problem=problem,
        notes=tuple(notes),
        rollout=rollout,
        values=values,
        fsdp_layouts=fsdp_layouts,
        servers=servers,
    )


# -- the framework interface (frameworks/interface.py) ------------------------------------------


def detect(launch: Launch) -> bool:
    """Whether ``launch`` is a verl launch shardcheck resolves (``python3 -m verl.trainer.main_ppo`` and recipes)."""
    return is_verl_entry(launch)


def resolve(
    launch: Launch,
    reading,
    path: str,
    *,
    model_config: str | None = None,
    verl_version: tuple[str, str] | None = None,
    pinned: tuple[str, str] | None = None,
    memo: dict | None = None,
    env: dict[str, str] | None = None,
) -> Job:
    """The Job verl would build from ``launch`` (its words read as Hydra overrides); ``memo`` keeps the parsed
    overrides between calls on the same launch (``check --versions`` resolves it once per version); ``env``:
    the ``--env`` values, the only environment ``${oc.env:...}`` may read."""
    from shardcheck.inputs.hydra_overrides import parse_hydra_args

    memo = {} if memo is None else memo
    if "hydra" not in memo:
        memo["hydra"] = parse_hydra_args(launch.args, env)
    return resolve_verl(
        launch, memo["hydra"], path, model_config=model_config, verl_version=verl_version, pinned=pinned
    )
