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
from pathlib import Path

from shardcheck.frameworks.verl.config_tree import (
    KNOWN_CONFIGS,
    MODEL_ENGINES,
    VerlConfig,
    apply_overrides,
    load_defaults,
)
from shardcheck.inputs.hydra_overrides import HydraCommandLine, OverrideItem
from shardcheck.inputs.launch import Launch
from shardcheck.job import Cluster, ConfigNote, FsdpLayout, Job, MegatronLayout, RolloutLayout, ServerLayout
from shardcheck.models.facts import load_model
from shardcheck.origin import Origin, Traced

# The Megatron engines verl 0.9.1 builds and the section each is built from (its ``megatron`` engine
# config): ActorRolloutRefWorker.init_model builds the ref from ``actor_rollout_ref.ref`` and the actor
# from ``actor_rollout_ref.actor``; the critic's TrainingWorker from ``critic`` (CriticConfig.engine =
# its ``megatron`` section; verl/workers/engine_workers.py, verl/workers/config/critic.py). The reward
# model and a distillation teacher are rollout servers (RolloutConfig), not Megatron engines.
ROLES = {"actor": "actor_rollout_ref.actor", "ref": "actor_rollout_ref.ref", "critic": "critic"}
# The keys the batch and rollout rules read (verl 0.9.1 names).
VALUE_KEYS = tuple(
    f"{prefix}.{key}" for prefix, keys in (
        ("data", ("train_batch_size", "max_prompt_length", "max_response_length")),
        ("actor_rollout_ref.actor", ("ppo_mini_batch_size", "ppo_micro_batch_size", "ppo_micro_batch_size_per_gpu",
                                     "use_dynamic_bsz", "ppo_max_token_len_per_gpu", "use_kl_loss")),
        ("actor_rollout_ref.ref", ("log_prob_micro_batch_size", "log_prob_micro_batch_size_per_gpu",
                                   "log_prob_use_dynamic_bsz", "log_prob_max_token_len_per_gpu")),
        ("actor_rollout_ref.rollout", ("name", "mode", "n", "log_prob_micro_batch_size", "log_prob_micro_batch_size_per_gpu",
                                       "log_prob_use_dynamic_bsz", "log_prob_max_token_len_per_gpu",
                                       "tensor_model_parallel_size", "data_parallel_size", "expert_parallel_size",
                                       "pipeline_model_parallel_size", "max_model_len", "n_gpus_per_node",
                                       "enable_chunked_prefill", "max_num_batched_tokens")),
        ("algorithm", ("adv_estimator", "use_kl_in_reward")),
        ("trainer", ("use_v1",)),
    ) for key in keys
)
# The keys the memory estimate reads (shardcheck/memory/estimate.py).
MEMORY_KEYS = tuple(
    f"{prefix}.{key}" for prefix, keys in (
        ("actor_rollout_ref.actor.megatron", ("dtype", "use_distributed_optimizer", "param_offload", "optimizer_offload")),
        ("actor_rollout_ref.actor.optim", ("optimizer", "use_precision_aware_optimizer", "main_grads_dtype",
                                           "exp_avg_dtype", "exp_avg_sq_dtype",
                                           "override_optimizer_config.optimizer_cpu_offload",
                                           "override_optimizer_config.optimizer_offload_fraction")),
        ("actor_rollout_ref.actor.megatron.override_transformer_config", (
            "recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules")),
        ("actor_rollout_ref.actor", ("calculate_entropy", "entropy_coeff", "entropy_from_logits_with_chunking",
                                     "entropy_from_logits_chunk_size", "use_fused_kernels")),
        ("actor_rollout_ref.ref.megatron", ("param_offload",)),
        ("actor_rollout_ref.rollout", ("dtype",)),  # gpu_memory_utilization and max_num_seqs: VALUE_KEYS
        ("actor_rollout_ref.actor.fsdp_config", ("reshard_after_forward", "mixed_precision")),
        ("actor_rollout_ref.model", ("enable_gradient_checkpointing", "enable_activation_offload")),
        ("critic", ("megatron.param_offload", "megatron.optimizer_offload")),  # critic.model.path: FSDP_VALUE_KEYS
        ("critic", ("ppo_max_token_len_per_gpu",)),  # the critic's own update phase (dynamic batch size)
    ) for key in keys
)
# More keys the rollout-engine and critic rules read.
VALUE_KEYS += tuple(
    f"{prefix}.{key}" for prefix, keys in (
        ("actor_rollout_ref.rollout", ("max_num_seqs", "gpu_memory_utilization",
                                       "engine_kwargs.sglang.enable_dp_attention",
                                       "engine_kwargs.sglang.mem_fraction_static")),
        ("critic", ("enable", "strategy", "ppo_mini_batch_size", "ppo_micro_batch_size", "ppo_micro_batch_size_per_gpu",
                    "use_dynamic_bsz", "ppo_infer_max_token_len_per_gpu", "megatron.tensor_model_parallel_size",
                    "megatron.pipeline_model_parallel_size", "megatron.context_parallel_size",
                    "megatron.expert_model_parallel_size", "megatron.expert_tensor_parallel_size",
                    "megatron.virtual_pipeline_model_parallel_size")),
    ) for key in keys
)
# Keys verl's YAML leaves out: their value when no override sets them (free-form engine kwargs take
# the engine's own default; dataclass fields the dataclass default).
ABSENT_DEFAULTS = {
    "actor_rollout_ref.rollout.engine_kwargs.sglang.enable_dp_attention":
        (False, "default of SGLang ServerArgs: enable_dp_attention = False"),
    "actor_rollout_ref.rollout.engine_kwargs.sglang.mem_fraction_static":
        (None, "not in engine_kwargs.sglang: verl passes gpu_memory_utilization as mem_fraction_static"),
    "critic.ppo_infer_max_token_len_per_gpu":
        (32768, "default of verl 0.9.1 CriticConfig: ppo_infer_max_token_len_per_gpu = 32768"),
}
# The keys the FSDP rules read besides the engine sections (verl 0.9.1 names).
FSDP_VALUE_KEYS = ("actor_rollout_ref.model.use_remove_padding", "critic.model.use_remove_padding", "critic.model.path",
                   "critic.enable", "critic.strategy",
                   "critic.ulysses_sequence_parallel_size", "critic.fsdp.ulysses_sequence_parallel_size",
                   "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
                   "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size")
# verl's FSDP engine strategies (FSDPEngineConfig.__post_init__ also accepts fsdp_turbo, whose own
# turbo_config sizes shardcheck does not model).
FSDP_STRATEGIES = ("fsdp", "fsdp2")
# FSDP roles: (role, role config section, its engine section, whether a role-level Ulysses size > 1
# overrides the engine's). FSDPActorConfig.__post_init__ copies the deprecated
# ``ulysses_sequence_parallel_size`` into ``fsdp_config`` (actor and ref); FSDPCriticConfig has no
# such copy, so the critic engine reads only ``critic.fsdp.ulysses_sequence_parallel_size``.
FSDP_ROLES = (("actor", "actor_rollout_ref.actor", "actor_rollout_ref.actor.fsdp_config", True),
              ("ref", "actor_rollout_ref.ref", "actor_rollout_ref.ref.fsdp_config", True),
              ("critic", "critic", "critic.fsdp", False))
# Config groups of verl 0.9.1's trainer config (directories of verl/trainer/config). A bare
# `group=option` override selects an option in ppo_trainer.yaml's defaults list.
CONFIG_GROUPS = frozenset({"actor", "algorithm", "critic", "data", "distillation", "engine", "model", "model_engine",
                           "npu_profile", "optim", "profiler", "ref", "reward", "rollout", "transfer_queue"})
# The entry point whose config shardcheck models; recipes (recipe.*) are Hydra apps with configs of their own.
PPO_ENTRY = "verl.trainer.main_ppo"
_PLACEHOLDER = re.compile(r"__shardcheck_unknown_\d+__")
_OTC = "override_transformer_config"


def is_verl_entry(launch: Launch) -> bool:
    """verl's PPO trainer, or a recipe's Hydra entry point (judged with unknown config defaults)."""
    return launch.module == PPO_ENTRY or (bool(launch.module) and launch.module.split(".")[0] == "recipe")


def unmodelled_verl_entry(launch: Launch) -> bool:
    """Another verl entry point (sft_trainer, main_generation, ...), whose config is not modelled."""
    return bool(launch.module) and launch.module.split(".")[0] == "verl" and not is_verl_entry(launch)


def _clean(text: str) -> str:
    return _PLACEHOLDER.sub("⟨?⟩", text)


def _config_name(hydra: HydraCommandLine) -> tuple[str, Origin | None]:
    if hydra.config_name is None:
        return "ppo_trainer", None
    text = hydra.config_name.text or ""
    name = text.removesuffix(".yaml")
    return name, hydra.config_name.origin


def split_group_choices(items: tuple[OverrideItem, ...]
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


def _int(traced: Traced, key: str, notes: list[ConfigNote], *, allow_none: bool = False,
         positive: bool = True) -> Traced:
    """An integer size; a value of another type becomes unknown with a note naming its line."""
    if not traced.known:
        return traced
    value = traced.value
    if value is None and allow_none:
        return traced
    if isinstance(value, bool) or not isinstance(value, int) or (positive and value < 1):
        where = traced.origin.first_script_line() or traced.origin
        notes.append(ConfigNote(
            rule="VALUE-BAD-SIZE", origin=where,
            message=f"{key} must be a positive integer, got {value!r}",
            fix=f"set {key} to a whole number ≥ 1",
        ))
        return Traced(None, traced.origin, f"{key} is not a positive integer ({value!r})")
    return traced


def _bool(traced: Traced) -> Traced:
    if traced.known and not isinstance(traced.value, bool):
        return Traced(bool(traced.value), traced.origin)
    return traced


def _layout(config: VerlConfig, role: str, notes: list[ConfigNote]) -> MegatronLayout:
    """One Megatron engine resolved from its own section, ``override_transformer_config`` included
    (verl/workers/engine/megatron/transformer_impl.py _build_tf_config reads
    ``self.engine_config.override_transformer_config``, verl 0.9.1)."""
    base = f"{ROLES[role]}.megatron"

    def field_value(name: str) -> Traced:
        key = f"{base}.{name}"
        traced = config.get(key)
        if not traced.known and config.custom is None and name in MCORE_FIELD_DEFAULTS and config._missing(key):
            # deleted from the section (``~key``): the engine dataclass's field default applies
            value = MCORE_FIELD_DEFAULTS[name]
            return Traced(value, Origin(kind="default", text=f"default of verl {config.version} McoreEngineConfig: "
                                                             f"{name} = {value} ({key} is deleted)"))
        return traced

    def size(name: str, *, allow_none: bool = False) -> Traced:
        return _int(field_value(name), f"{base}.{name}", notes, allow_none=allow_none)

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
        first_stage_layers=_int(otc_get("num_layers_in_first_pipeline_stage", None),
                                f"{base}.{_OTC}.num_layers_in_first_pipeline_stage", notes, allow_none=True,
                                positive=False),
        last_stage_layers=_int(otc_get("num_layers_in_last_pipeline_stage", None),
                               f"{base}.{_OTC}.num_layers_in_last_pipeline_stage", notes, allow_none=True,
                               positive=False),
        account_for_embedding=_bool(otc_get("account_for_embedding_in_pipeline_split", False)),
        account_for_loss=_bool(otc_get("account_for_loss_in_pipeline_split", False)),
        layout_string=otc_get("pipeline_model_parallel_layout", None),
        sequence_parallel=_bool(field_value("sequence_parallel")),
        transformer_overrides=overrides,
        transformer_overrides_replaced=replaced.word if replaced is not None else None,
    )


def _ulysses_size(config: VerlConfig, section: str, engine: str, propagates: bool,
                  notes: list[ConfigNote]) -> tuple[Traced, str]:
    """The Ulysses SP size an FSDP engine uses, and the key that decides it (FSDPActorConfig.__post_init__,
    verl 0.9.1: ``if self.ulysses_sequence_parallel_size > 1: self.fsdp_config.ulysses_sequence_parallel_size = ...``)."""
    engine_key, role_key = f"{engine}.ulysses_sequence_parallel_size", f"{section}.ulysses_sequence_parallel_size"
    engine_sp = _int(config.get(engine_key), engine_key, notes)
    if not propagates:
        return engine_sp, engine_key
    role_sp = _int(config.get(role_key), role_key, notes)
    if not role_sp.known:
        return role_sp, role_key
    if role_sp.value > 1:
        origin = Origin(kind="derived", text=f"{role_key} > 1 replaces the engine's (verl FSDPActorConfig.__post_init__)",
                        via=(role_sp.origin,))
        return Traced(role_sp.value, origin), role_key
    return engine_sp, engine_key


def _fsdp_layout(config: VerlConfig, role: str, section: str, engine: str, propagates: bool,
                 notes: list[ConfigNote]) -> FsdpLayout:
    sp, sp_key = _ulysses_size(config, section, engine, propagates, notes)
    return FsdpLayout(
        role=role,
        key_prefix=engine,
        strategy=config.get(f"{section}.strategy"),
        sp=sp,
        sp_key=sp_key,
        fsdp_size=_int(config.get(f"{engine}.fsdp_size"), f"{engine}.fsdp_size", notes, positive=False),
        model_dtype=config.get(f"{engine}.model_dtype"),
        param_offload=_bool(config.get(f"{engine}.param_offload")),
        optimizer_offload=_bool(config.get(f"{engine}.optimizer_offload")),
        offload_policy=_bool(config.get(f"{engine}.offload_policy")),
    )


def _critic_used(config: VerlConfig) -> Traced:
    """verl/trainer/ppo/utils.py need_critic: ``critic.enable`` when set, else adv_estimator == gae."""
    enable, estimator = config.get("critic.enable"), config.get("algorithm.adv_estimator")
    if enable.known and enable.value is not None:
        return Traced.derived(bool(enable.value), "critic built = critic.enable", enable)
    return Traced.derived(estimator.value == "gae" if estimator.known else None,
                          "critic built = (algorithm.adv_estimator == gae)", enable, estimator)


def _fsdp_layouts(config: VerlConfig, ref_used: Traced, critic_used: Traced,
                  notes: list[ConfigNote]) -> tuple[FsdpLayout, ...]:
    """The FSDP engines verl builds: the actor, the ref when it is used, the critic when it is used."""
    built = {"actor": Traced(True, Origin(kind="default", text="the actor is always built")),
             "ref": ref_used, "critic": critic_used}
    out = []
    for role, section, engine, propagates in FSDP_ROLES:
        strategy = config.get(f"{section}.strategy")
        if built[role].value is False or not (strategy.known and strategy.value in FSDP_STRATEGIES):
            continue
        out.append(_fsdp_layout(config, role, section, engine, propagates, notes))
    return tuple(out)


# verl/workers/config/engine.py McoreEngineConfig field defaults (verl 0.9.1)
MCORE_FIELD_DEFAULTS = {"tensor_model_parallel_size": 1, "expert_model_parallel_size": 1,
                        "expert_tensor_parallel_size": None, "pipeline_model_parallel_size": 1,
                        "virtual_pipeline_model_parallel_size": None, "context_parallel_size": 1,
                        "sequence_parallel": True, _OTC: {}}
RM = "reward.reward_model"
# verl/workers/config/rollout.py RolloutConfig field defaults (verl 0.9.1)
ROLLOUT_FIELD_DEFAULTS = {"tensor_model_parallel_size": 2, "data_parallel_size": 1, "pipeline_model_parallel_size": 1,
                          "expert_parallel_size": 1}
DISTILL = "distillation"


def _server(config: VerlConfig, role: str, section: str, cluster: Cluster, pool_key: str | None,
            notes: list[ConfigNote], switch: Traced, num_replicas: Traced | None = None) -> ServerLayout:
    def size(name: str) -> Traced:
        key = f"{section}.{name}"
        traced = config.get(key)
        if not traced.known and config._missing(key) and name in ROLLOUT_FIELD_DEFAULTS:
            # a key the section leaves out (the teacher's has no pipeline size; an added teacher may lack
            # any): the dataclass field's default
            value = ROLLOUT_FIELD_DEFAULTS[name]
            return Traced(value, Origin(kind="default", text=f"default of verl {config.version} RolloutConfig: "
                                                             f"{name} = {value}"))
        return _int(traced, key, notes)

    if pool_key is None:
        nnodes, devices = cluster.nnodes, cluster.devices_per_node
    else:
        nnodes = _int(config.get(f"{pool_key}.nnodes"), f"{pool_key}.nnodes", notes, positive=False)
        devices = _int(config.get(f"{pool_key}.n_gpus_per_node"), f"{pool_key}.n_gpus_per_node", notes, positive=False)
    return ServerLayout(role=role, key_prefix=section, engine=config.get(f"{section}.name"),
                        tp=size("tensor_model_parallel_size"), dp=size("data_parallel_size"),
                        pp=size("pipeline_model_parallel_size"), ep=size("expert_parallel_size"),
                        nnodes=nnodes, devices_per_node=devices, pool_key=pool_key, num_replicas=num_replicas,
                        switch=switch)


def _servers(config: VerlConfig, cluster: Cluster, notes: list[ConfigNote]) -> tuple[ServerLayout, ...]:
    """The reward model (``reward.reward_model.enable``) and the distillation teachers
    (``distillation.enabled``) verl 0.9.1 starts, each on its pool (verl/trainer/ppo/v1/trainer_base.py
    init_resource_pool_mgr; verl/experimental/reward_loop/reward_model.py; verl/workers/config/distillation.py)."""
    out: list[ServerLayout] = []
    if config.custom is not None:
        return ()
    enable = config.get(f"{RM}.enable")
    if enable.known and enable.value:
        own = config.get(f"{RM}.enable_resource_pool")
        pool = RM if own.known and own.value else None
        out.append(_server(config, "reward model", f"{RM}.rollout", cluster, pool, notes, own if pool else enable))
    enabled = config.get(f"{DISTILL}.enabled")
    if enabled.known and enabled.value:
        teachers = config.get(f"{DISTILL}.teacher_models")
        names = list(teachers.value) if teachers.known and isinstance(teachers.value, dict) else []
        if len(names) > 1:  # several teachers: the default single-teacher entry is dropped (_resolve_teacher_models)
            names = [n for n in names if n != "teacher_model"]
        for name in names:
            base = f"{DISTILL}.teacher_models.{name}"
            replicas = None
            if len(names) > 1 or name != "teacher_model":  # one teacher's count is derived from the pool
                replicas = config.get(f"{base}.num_replicas")
                if not replicas.known and config._missing(f"{base}.num_replicas"):
                    replicas = Traced(0, Origin(kind="default", text=f"default of verl {config.version} "
                                                                     "DistillationTeacherModelConfig: num_replicas = 0"))
            out.append(_server(config, f"teacher {name}", f"{base}.inference", cluster, DISTILL, notes, enabled,
                               replicas))
    return tuple(out)


def _issue_notes(config: VerlConfig) -> list[ConfigNote]:
    notes: list[ConfigNote] = []
    for issue in config.issues:
        item = issue.override
        rule = {"unknown_key": "VERL-CFG-UNKNOWN-KEY", "added_key": "VERL-CFG-ADDED-KEY",
                "hydra": "HYDRA-OVERRIDE"}[issue.kind]
        fix = None
        if issue.kind == "unknown_key" and ".megatron." in item.key and config.defaults.config_name == "ppo_trainer":
            fix = "the megatron section exists with --config-name=ppo_megatron_trainer or model_engine=megatron"
        elif issue.suggestion:
            fix = f"did you mean `{issue.suggestion}`?"
        elif issue.kind == "unknown_key":
            fix = f"prefix it with `+` only if verl reads `{item.key}`; otherwise remove it"
        notes.append(ConfigNote(rule=rule, message=_clean(f"{item.text}: {issue.message}"), origin=item.word,
                                fix=_clean(fix) if fix else None))
    return notes


def _value(config: VerlConfig, key: str) -> Traced:
    """``config.get(key)``; a key verl's YAML leaves out takes its documented default (ABSENT_DEFAULTS)."""
    traced = config.get(key)
    if key in ABSENT_DEFAULTS and not traced.known and config.custom is None and config._setter(key) is None \
            and config._missing(key):
        value, text = ABSENT_DEFAULTS[key]
        return Traced(value, Origin(kind="default", text=text))
    return traced


def resolve_verl(launch: Launch, hydra: HydraCommandLine, path: str, *, model_config: str | None = None) -> Job:
    """The Job verl would build from this launch's command line."""
    notes: list[ConfigNote] = []
    name, name_origin = _config_name(hydra)
    for error in hydra.errors:
        notes.append(ConfigNote(rule="HYDRA-OVERRIDE", origin=error.word,
                                message=f"{error.text}: Hydra cannot parse this override ({error.message})",
                                fix="quote the value for Hydra, e.g. key='\"value\"'"))
    for word in hydra.unknown_words:
        notes.append(ConfigNote(
            rule="VALUE-UNKNOWN", origin=word.word,
            message=f"argument {word.text} is unknown ({word.reason}); it may set any key, so the verdict is undecided",
            fix="give the values it is built from with --env NAME=VALUE",
        ))
    overrides, engine, unread_group = split_group_choices(hydra.overrides)
    custom: str | None = None
    path_text = (hydra.config_path.text or "?").rstrip("/") if hydra.config_path is not None else "config"
    if unread_group is not None:
        custom = f"{name} with the group option {unread_group.text}"
        notes.append(ConfigNote(
            rule="VERL-CONFIG-CUSTOM", origin=unread_group.word,
            message=f"{unread_group.text} selects a config group option shardcheck does not read (it reads "
                    f"{', '.join(f'model_engine={k}' for k in MODEL_ENGINES)}); only the keys set on the command "
                    "line are known, the rest are unknown, and keys are not checked",
        ))
    elif launch.module != PPO_ENTRY or path_text not in ("config", "") or name not in KNOWN_CONFIGS:
        custom = f"{name} ({launch.module}, --config-path {path_text})"
        origin = (hydra.config_path.origin if hydra.config_path is not None and path_text not in ("config", "")
                  else name_origin or launch.origin)
        notes.append(ConfigNote(
            rule="VERL-CONFIG-CUSTOM", origin=origin,
            message=f"config {custom} is not one of verl {PPO_ENTRY}'s own configs; only the keys set on the "
                    "command line are known, the rest are unknown, and keys are not checked",
        ))
    if custom is not None:
        name = "ppo_trainer"  # only its key tree is used, in non-struct mode, to apply the overrides
    elif engine is not None:
        name = MODEL_ENGINES[engine]
    defaults = load_defaults(name)
    config = apply_overrides(defaults, overrides, custom=custom)
    notes.extend(_issue_notes(config))

    cluster = Cluster(
        nnodes=_int(config.get("trainer.nnodes"), "trainer.nnodes", notes),
        devices_per_node=_int(config.get("trainer.n_gpus_per_node"), "trainer.n_gpus_per_node", notes),
        device=config.get("trainer.device"),
    )
    strategy = config.get("actor_rollout_ref.actor.strategy")
    kl_loss = config.get("actor_rollout_ref.actor.use_kl_loss")
    kl_reward = config.get("algorithm.use_kl_in_reward")
    ref_used_value = None
    if kl_loss.known and kl_reward.known:
        ref_used_value = bool(kl_loss.value) or bool(kl_reward.value)
    ref_used = Traced.derived(ref_used_value, "ref built = algorithm.use_kl_in_reward or actor.use_kl_loss",
                              kl_reward, kl_loss)
    layouts: list[MegatronLayout] = []
    if strategy.known and strategy.value == "megatron":
        layouts.append(_layout(config, "actor", notes))
        ref_strategy = config.get("actor_rollout_ref.ref.strategy")
        if ref_used.value is not False and (not ref_strategy.known or ref_strategy.value == "megatron"):
            layouts.append(_layout(config, "ref", notes))

    ro = "actor_rollout_ref.rollout"
    rollout = RolloutLayout(
        engine=config.get(f"{ro}.name"),
        tp=_int(config.get(f"{ro}.tensor_model_parallel_size"), f"{ro}.tensor_model_parallel_size", notes),
        dp=_int(config.get(f"{ro}.data_parallel_size"), f"{ro}.data_parallel_size", notes),
        pp=_int(config.get(f"{ro}.pipeline_model_parallel_size"), f"{ro}.pipeline_model_parallel_size", notes),
    )
    critic_used = _critic_used(config)
    critic_strategy = config.get("critic.strategy")
    if layouts and critic_used.value is not False and critic_strategy.known and critic_strategy.value == "megatron":
        layouts.append(_layout(config, "critic", notes))
    fsdp_layouts = _fsdp_layouts(config, ref_used, critic_used, notes)
    servers = _servers(config, cluster, notes)
    model_path = config.get("actor_rollout_ref.model.path")
    from omegaconf import OmegaConf

    raw_path = OmegaConf.select(config.cfg, "actor_rollout_ref.model.path", throw_on_missing=False)
    base = Path(path).parent
    model, problem = load_model(str(raw_path) if raw_path is not None else None, model_path.known,
                                model_config, base=base)
    return Job(
        path=path,
        framework="verl",
        framework_version=config.version,
        entry=launch.entry,
        config_name=name,
        config_source=defaults.source,
        cluster=cluster,
        strategy=strategy,
        layouts=tuple(layouts),
        ref_used=ref_used,
        critic_used=critic_used,
        model_path=model_path,
        model=model,
        model_problem=problem,
        notes=tuple(notes),
        open_arguments=tuple(word.word for word in hydra.unknown_words),
        rollout=rollout,
        values={key: _value(config, key) for key in VALUE_KEYS + MEMORY_KEYS + FSDP_VALUE_KEYS},
        fsdp_layouts=fsdp_layouts,
        servers=servers,
    )
