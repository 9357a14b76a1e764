"""How verl hands its Megatron engines' sizes to Megatron-Core (verl 0.9.1)."""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.frameworks.megatron.transformer_fields import closest_field
from shardcheck.job import Job
from shardcheck.rules.base import Finding, UnknownValue, engines, finding, need, rule, where

_NAMES = ("TP", "PP", "CP", "EP", "ETP", "VPP")


_CRITIC_KEYS = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "virtual_pipeline_model_parallel_size",
)


@rule(
    "VERL-MC-ONE-INIT",
    "warning",
    "The engine built first (critic, else ref) has other parallel sizes than the actor",
    frameworks=("verl",),
)
def one_parallel_state(job: Job) -> Iterator[Finding]:
    """
    verl builds one Megatron parallel state per worker process, and the first engine built creates
    it; later engines find it initialised and skip their own sizes, while their models are still
    built with them. Nothing checks that they agree. In one process verl builds the critic first
    (when a Megatron critic is used: it shares the actor's `global_pool`, so both live in one
    colocated worker), then the reference model, then the actor.

    Why:
    With different sizes the actor's model is built for one layout and runs on the groups of
    another: a crash or silently wrong sharding.

    Fix:
    Remove the ref overrides; give the critic the actor's sizes.

    Versions:
    From verl 0.8.0 (engine workers only) as above. Before, the legacy Megatron workers
    (megatron_workers.py, verl 0.4.0 … 0.7.1; 0.7.x builds a Megatron critic with them whatever
    `use_legacy_worker_impl` says) construct the actor/rollout worker first in the colocated process
    (ray_trainer.py init_workers: actor_rollout, then critic, then ref), and its `__init__` creates
    the groups from `actor.megatron.*`, for the ref role too; the critic's and the ref's own sizes
    never create groups, and each differing one is reported against the actor's.
    Which engines are built follows each release: a ref when `actor.use_kl_loss` or
    `algorithm.use_kl_in_reward` (main_ppo.py 0.4.0 … 0.6.1, trainer/ppo/utils.py
    need_reference_policy 0.7.1 … 0.9.1), unless the actor's LoRA stands in for it (the keys read
    per release: resolve.py REF_IN_ACTOR_KEYS); a critic by `critic.enable` when set (0.6.0 on),
    else for adv_estimator gae (ray_trainer.py use_critic 0.4.0 … 0.5.0, need_critic 0.6.0 … 0.9.1).

    Source:
    verl/trainer/ppo/v1/trainer_base.py init_workers (create_colocated_worker_cls per resource pool;
    the critic's pool is global_pool, like the actor's); verl/workers/engine_workers.py
    TrainingWorker.__init__ (the critic's engine is built when the colocated worker is constructed:
    EngineRegistry.new → MegatronEngine.__init__ → _init_device_mesh) and
    ActorRolloutRefWorker.init_model (later: the ref, then the actor); and
    verl/workers/engine/megatron/transformer_impl.py MegatronEngine._init_device_mesh
    (returns early when mpu.is_initialized(); "TODO: set different parallelism for actor, critic,
    ref"), verl 0.9.1.
    """
    from shardcheck.frameworks.verl.versions import ENGINE_WORKERS_ONLY, at_least

    actor = job.layout("actor")
    if actor is None:
        return
    sizes = (actor.tp, actor.pp, actor.cp, actor.ep, actor.etp_setting, actor.vpp)
    critic = _critic_sizes(job)
    if not at_least(job.framework_version, ENGINE_WORKERS_ONLY):
        yield from _legacy(job, sizes, critic)
        return
    if critic is not None:
        yield from _compare(
            sizes,
            critic,
            "critic",
            "critic.megatron.* (the actor's: "
            + ", ".join(f"critic.megatron.{k}={_shown(a)}" for k, a in zip(_CRITIC_KEYS, sizes))
            + ")",
        )
        return  # the critic's sizes create the groups; the ref's then do not matter
    ref = job.layout("ref")
    if ref is None or actor.sizes() == ref.sizes():
        return
    yield from _compare(
        sizes,
        (ref.tp, ref.pp, ref.cp, ref.ep, ref.etp_setting, ref.vpp),
        "ref",
        "remove the actor_rollout_ref.ref.megatron.* size overrides (they follow the actor by default)",
    )


def _legacy(job: Job, sizes: tuple, critic: tuple | None) -> Iterator[Finding]:
    """verl ≤ 0.7.1: the actor/rollout worker, built first, creates the groups from the actor's sizes."""
    ref = job.layout("ref")
    others = []
    if critic is not None:
        others.append(
            (
                "critic",
                critic,
                "set " + ", ".join(f"critic.megatron.{k}={_shown(a)}" for k, a in zip(_CRITIC_KEYS, sizes)),
            )
        )
    if ref is not None:
        others.append(
            (
                "ref",
                (ref.tp, ref.pp, ref.cp, ref.ep, ref.etp_setting, ref.vpp),
                "remove the actor_rollout_ref.ref.megatron.* size overrides (they follow the actor by default)",
            )
        )
    for role, theirs, fix in others:
        if not all(t.known for t in sizes + theirs):
            continue
        diffs = [(n, a, r) for n, a, r in zip(_NAMES, sizes, theirs) if a.value != r.value]
        if not diffs:
            continue
        text = ", ".join(f"{n} actor {_shown(a)} vs {role} {_shown(r)}" for n, a, r in diffs)
        yield finding(
            "VERL-MC-ONE-INIT",
            f"verl {job.framework_version}'s legacy workers build the actor first and its sizes create the process "
            f"groups; the {role}'s differ ({text})",
            where(*(r for _, _, r in diffs), *(a for _, a, _ in diffs)),
            fix=fix,
            role=role,
        )


def _shown(t) -> str:
    return "null" if t.value is None else str(t.value)


def _critic_sizes(job: Job) -> tuple | None:
    """The Megatron critic's sizes when verl builds one (need_critic, strategy megatron), else None."""
    from shardcheck.rules.verl_batch import critic_used

    try:
        used = critic_used(job)
    except UnknownValue:  # an unknown enable/estimator: the critic may or may not exist
        return None
    strategy = job.value("critic.strategy")
    if not used or not strategy.known or strategy.value != "megatron":
        return None
    return tuple(job.value(f"critic.megatron.{k}") for k in _CRITIC_KEYS)


def _compare(actor: tuple, first: tuple, role: str, fix: str) -> Iterator[Finding]:
    if not all(t.known for t in actor + first):
        return  # a size is unknown: VALUE-UNKNOWN says so; nothing to compare
    diffs = [(n, a, r) for n, a, r in zip(_NAMES, actor, first) if a.value != r.value]
    if not diffs:
        return
    text = ", ".join(f"{n} actor {_shown(a)} vs {role} {_shown(r)}" for n, a, r in diffs)
    yield finding(
        "VERL-MC-ONE-INIT",
        f"the {role} engine is built first and its sizes create the process groups; the actor's differ ({text})",
        where(*(r for _, _, r in diffs), *(a for _, a, _ in diffs)),
        fix=fix if role == "ref" else f"set {fix}",
        role=role,
    )


@rule(
    "VERL-MC-ETP-MISMATCH",
    "warning",
    "ETP left unset with EP > 1: process groups and model config may disagree",
    frameworks=("verl",),
)
def etp_unset(job: Job) -> Iterator[Finding]:
    """
    verl passes `expert_tensor_parallel_size: null` unchanged to Megatron-Core, whose parallel
    state then uses ETP = TP. When verl builds the model through Megatron-Bridge
    (`megatron.vanilla_mbridge=False`), it hands the same null to the bridge's provider, and
    Megatron-Bridge ≥ v0.6.0 sets the model config's ETP to 1 when EP > 1, so the expert layers can
    be built for ETP 1 on groups made for ETP = TP.

    Why:
    The groups and the layers disagree silently (verl's docker pins Megatron-Bridge r0.5.0, where
    both use TP; newer Bridge differs).

    Fix:
    Always set `actor_rollout_ref.actor.megatron.expert_tensor_parallel_size` when EP > 1.

    Versions:
    verl 0.7.0 and later, with `vanilla_mbridge=False` (its default from 0.9.0; 0.7.0 … 0.8.0 default
    to mbridge). mbridge takes ETP from the process groups (core/llm_bridge.py `mpu.etp_size`) and
    verl ≤ 0.6.1 has no Megatron-Bridge path, so there the two agree (verl/workers/megatron_workers.py,
    engine/megatron/transformer_impl.py, verl 0.4.0 … 0.9.1).

    Source:
    verl/workers/engine/megatron/transformer_impl.py MegatronEngine._init_device_mesh and
    _build_tf_config (verl 0.7.0 … 0.9.1); Megatron-Bridge src/megatron/bridge/models/transformer_config.py
    (v0.6.0); mbridge core/llm_bridge.py.
    """
    from shardcheck.frameworks.verl.versions import MEGATRON_BRIDGE_PATH, at_least

    if not at_least(job.framework_version, MEGATRON_BRIDGE_PATH):
        return
    for e in engines(job):
        if not (e.etp_setting.known and e.etp_setting.value is None):
            continue
        bridge = job.value(f"{e.key_prefix}.use_mbridge"), job.value(f"{e.key_prefix}.vanilla_mbridge")
        if not all(t.known for t in bridge) or bridge[0].value is False or bridge[1].value is True:
            continue  # mbridge (or verl's converter) builds the model: ETP from the groups
        if not (e.ep.known and e.ep.value > 1 and e.tp.known and e.tp.value > 1):
            continue
        yield finding(
            "VERL-MC-ETP-MISMATCH",
            f"[{e.role}] expert_tensor_parallel_size is unset: megatron-core's groups use ETP = TP = "
            f"{e.tp.value}, Megatron-Bridge ≥ 0.6 builds experts with ETP 1",
            where(e.tp, e.ep),
            fix=f"set {e.key_prefix}.expert_tensor_parallel_size explicitly (1 is the usual choice)",
            role=e.role,
        )


@rule(
    "VERL-MC-OTC-KEY",
    "error",
    "override_transformer_config sets a misspelt TransformerConfig field",
    frameworks=("verl",),
)
def transformer_override_key(job: Job) -> Iterator[Finding]:
    """
    verl hands every `override_transformer_config` entry to the Megatron-Bridge model provider
    (or, with `vanilla_mbridge`, to `TransformerConfig(**kwargs)`). A key that is a near-miss of a
    TransformerConfig field is a typo: the setting meant is not applied, and the layout shardcheck
    judges (and reports) is the one without it.

    Why:
    Megatron-Bridge ≥ 0.5.0 `apply_overrides_and_finalize` raises `AttributeError: <Provider> has no
    attribute 'KEY'.` when the engine builds the model (vanilla mbridge: `TypeError: unexpected
    keyword argument`); the key never takes effect.

    Fix:
    Spell the field as megatron-core's TransformerConfig does.

    Source:
    verl/workers/engine/megatron/transformer_impl.py MegatronEngine._build_tf_config (verl 0.9.1);
    Megatron-Bridge src/megatron/bridge/models/model_provider.py apply_overrides_and_finalize (v0.5.0);
    megatron/core/transformer/transformer_config.py TransformerConfig fields (megatron-core 0.16.1).
    """
    for e in engines(job):
        for key, traced in e.transformer_overrides.items():
            meant = closest_field(key)
            if meant is None or traced.origin.first_script_line() is None:
                continue  # a field, a provider attribute, or a key verl's own YAML sets
            yield finding(
                "VERL-MC-OTC-KEY",
                f"[{e.role}] override_transformer_config.{key} is not a TransformerConfig "
                f"field: did you mean {meant}? Megatron-Bridge raises AttributeError "
                f"(has no attribute '{key}'); the layout is judged without it",
                _override_line(traced),
                fix=f"{e.key_prefix}.override_transformer_config.{meant}",
                role=e.role,
            )


def _override_line(traced):
    """The script line of the override word (not the line its value came from); texts are shortened."""

    def walk(origin):
        yield origin
        for step in origin.via:
            yield from walk(step)

    words = [o for o in walk(traced.origin) if o.kind == "script" and "override_transformer_config" in (o.text or "")]
    return words[0] if words else where(traced)


@rule(
    "VERL-MTP-NO-LAYERS",
    "error",
    "MTP enabled for a model without MTP layers",
    needs_model=True,
    frameworks=("verl",),
    engine="megatron",
)
def mtp_without_layers(job: Job) -> Iterator[Finding]:
    """
    `actor_rollout_ref.model.mtp.enable=True` trains (and can speculate with) the checkpoint's
    multi-token-prediction layers; a model whose config.json has none (`num_nextn_predict_layers`, or
    Qwen3.5's `mtp_num_hidden_layers`, missing or 0) cannot.

    Why:
    The Megatron engine's `check_mtp_config` raises `ValueError: enable mtp while model has no mtp layer,
    please use a model with mtp layer` when it is built.

    Fix:
    Set `actor_rollout_ref.model.mtp.enable=False`, or use a checkpoint with MTP layers.

    Versions:
    verl 0.8.0 and later (engine workers only). 0.7.1 checks it too, in words that depend on the worker
    implementation (the legacy Megatron workers assert `MTP requires at least one nextn_predict_layer`);
    0.7.0 and earlier have no `model.mtp` key.

    Source:
    verl/utils/megatron_utils.py check_mtp_config and _get_mtp_num_layers, called from
    verl/workers/engine/megatron/transformer_impl.py (verl 0.8.0, 0.9.0, 0.9.1).
    """
    from shardcheck.frameworks.verl.versions import ENGINE_WORKERS_ONLY, at_least, mtp_keys
    from shardcheck.models.architecture import checkpoint_mtp_layers

    if not at_least(job.framework_version, ENGINE_WORKERS_ONLY):
        return
    enable = job.value("actor_rollout_ref.model.mtp.enable")
    if enable.value is not True:
        return  # unknown: the memory estimate names it; off: nothing is checked
    keys = mtp_keys(job.framework_version)
    if checkpoint_mtp_layers(job.model.config, keys):
        return
    yield finding(
        "VERL-MTP-NO-LAYERS",
        f"{job.model.name} has no MTP layers ({' / '.join(keys)} missing or 0) but model.mtp.enable is set "
        '(verl: "enable mtp while model has no mtp layer, please use a model with mtp layer")',
        where(enable),
        fix="actor_rollout_ref.model.mtp.enable=False",
    )


@rule(
    "VERL-MBRIDGE-REQUIRED",
    "error",
    "verl's Megatron engine needs use_mbridge=True",
    frameworks=("verl",),
    engine="megatron",
)
def mbridge_required(job: Job) -> Iterator[Finding]:
    """
    From verl 0.8.0 every Megatron engine (actor, reference, critic) is built by the engine workers, which
    build the model only through a bridge (mbridge or Megatron-Bridge); verl's own HF-to-Megatron converter
    is no longer reached.

    Why:
    `MegatronEngine.__init__` asserts `use_mbridge must be True`.

    Fix:
    Set the engine's `megatron.use_mbridge=True` (the default), or run verl ≤ 0.7.1 for its own converter.

    Versions:
    verl 0.8.0 and later (the legacy Megatron workers, removed in 0.8.0, used verl's converter without it).

    Source:
    verl/workers/engine/megatron/transformer_impl.py MegatronEngine.__init__ (verl 0.8.0, 0.9.0, 0.9.1).
    """
    from shardcheck.frameworks.verl.versions import ENGINE_WORKERS_ONLY, at_least

    if not at_least(job.framework_version, ENGINE_WORKERS_ONLY):
        return
    for e in engines(job):
        value = job.value(f"{e.key_prefix}.use_mbridge")
        if value.value is False:
            yield finding(
                "VERL-MBRIDGE-REQUIRED",
                f"[{e.role}] {e.key_prefix}.use_mbridge=False: verl {job.framework_version} builds Megatron models "
                'only through a bridge (verl: "use_mbridge must be True")',
                where(value),
                fix=f"{e.key_prefix}.use_mbridge=True",
                role=e.role,
            )


@rule(
    "VERL-MCORE-CONVERTER-DSV3",
    "error",
    "verl's own converter refuses DeepSeek-V3 checkpoints with MTP layers or quantized weights",
    needs_model=True,
    frameworks=("verl",),
    engine="megatron",
)
def legacy_converter_deepseek(job: Job) -> Iterator[Finding]:
    """
    Without a bridge (`megatron.use_mbridge=False`, the default before 0.7.0) verl builds the Megatron config
    of a `DeepseekV3ForCausalLM` checkpoint (DeepSeek-V3/R1, Kimi-K2) with its own converter, which builds
    neither MTP layers nor quantized weights; the released DeepSeek-V3 config.json has both
    (`num_nextn_predict_layers: 1`, an fp8 `quantization_config`).

    Why:
    `hf_to_mcore_config_dpskv3` asserts `MTP is not supported for now, please modify the config.json to set
    num_nextn_predict_layers to 0`, then `quantization is not supported for now, please modify the config.json
    to remove quantization_config`.

    Fix:
    Set `megatron.use_mbridge=True` (verl ≥ 0.5.0), or use a bf16 checkpoint whose config.json has
    `num_nextn_predict_layers: 0` and no `quantization_config`.

    Versions:
    verl 0.4.0 … 0.7.1 (the legacy Megatron workers; 0.8.0 on needs a bridge: VERL-MBRIDGE-REQUIRED). From
    0.7.1 the workers set `num_nextn_predict_layers` to 0 first unless `model.mtp.enable` (which itself needs
    the bridge), so only the quantization check is reached there.

    Source:
    verl/models/mcore/config_converter.py hf_to_mcore_config_dpskv3, called from verl/workers/megatron_workers.py
    when use_mbridge is off (verl 0.4.0 … 0.7.1).
    """
    from shardcheck.frameworks.verl.versions import ENGINE_WORKERS_ONLY, MTP_KEYED, at_least

    version = job.framework_version
    if at_least(version, ENGINE_WORKERS_ONLY):
        return
    cfg = job.model.config
    if "DeepseekV3ForCausalLM" not in (cfg.get("architectures") or ()):
        return
    for e in engines(job):
        value = job.value(f"{e.key_prefix}.use_mbridge")
        if at_least(version, "0.5.0") and value.value is not False:
            continue  # with the bridge (or unknown): not this converter; 0.4.x has no bridge at all
        nextn = cfg.get("num_nextn_predict_layers") or 0
        if nextn and not at_least(version, MTP_KEYED):
            text = "MTP is not supported for now, please modify the config.json to set num_nextn_predict_layers to 0"
            what = f"num_nextn_predict_layers {nextn}"
        elif cfg.get("quantization_config"):
            text = "quantization is not supported for now, please modify the config.json to remove quantization_config"
            what = "a quantization_config"
        else:
            continue
        bridge = (
            f"{e.key_prefix}.use_mbridge=True" if at_least(version, "0.5.0") else "verl ≥ 0.5.0 with use_mbridge=True"
        )
        yield finding(
            "VERL-MCORE-CONVERTER-DSV3",
            f"[{e.role}] {job.model.name}'s config.json has {what}; verl {version}'s own converter (use_mbridge off) "
            f'refuses it (verl: "{text}")',
            where(value, job.model_path),
            fix=f"{bridge}, or a config.json without it",
            role=e.role,
        )


@rule(
    "VERL-BRIDGE-MIMO-V2",
    "error",
    "Megatron-Bridge's MiMo-V2-Flash provider: TP at most the KV heads, no CP",
    needs_model=True,
    frameworks=("verl",),
    engine="megatron",
)
def bridge_mimo_v2_flash(job: Job) -> Iterator[Finding]:
    """
    With `use_mbridge=True` and `vanilla_mbridge=False` (verl's default from 0.9.0) verl builds the model with
    Megatron-Bridge, whose MiMo-V2-Flash provider (HF `model_type` mimo_v2_flash) keeps every KV head whole:
    TP may not exceed the smaller of the full-attention KV heads (`num_key_value_heads`) and the
    sliding-window ones (`swa_num_key_value_heads`), and context parallelism is not supported. megatron-core
    itself would replicate KV heads over a larger TP.

    Why:
    `MiMoV2FlashModelProvider.provide` asserts `MiMo-V2-Flash requires TP size <= num query groups`, then
    `MiMo-V2-Flash does not support context parallelism yet.`

    Fix:
    A TP no larger than the smaller KV head count, and CP 1.

    Versions:
    Megatron-Bridge since the provider's first commit (38803fd, May 2026, unchanged to 067f987); verl 0.7.0
    and later can select it (`vanilla_mbridge=False`; the default from 0.9.0). mbridge has no MiMo-V2-Flash.

    Source:
    src/megatron/bridge/models/mimo_v2_flash/mimo_v2_flash_provider.py MiMoV2FlashModelProvider.provide and
    mimo_v2_flash_bridge.py provider_bridge (NVIDIA-NeMo/Megatron-Bridge 067f987).
    """

    cfg = job.model.config
    if cfg.get("model_type") != "mimo_v2_flash":
        return
    full, swa = cfg.get("num_key_value_heads"), cfg.get("swa_num_key_value_heads")
    if not isinstance(full, int) or not isinstance(swa, int):
        return
    smallest = min(full, swa)
    for e in engines(job):
        use = job.value(f"{e.key_prefix}.use_mbridge")
        vanilla = job.value(f"{e.key_prefix}.vanilla_mbridge")
        if use.value is not True or vanilla.value is not False:
            continue  # not Megatron-Bridge (or not known to be)
        tp = need(e.tp, f"{e.key_prefix}.tensor_model_parallel_size")
        cp = need(e.cp, f"{e.key_prefix}.context_parallel_size")
        if tp > smallest:
            yield finding(
                "VERL-BRIDGE-MIMO-V2",
                f"[{e.role}] TP {tp} > {smallest}: {job.model.name} has {full} full-attention and {swa} sliding-window "
                'KV heads (Megatron-Bridge: "MiMo-V2-Flash requires TP size <= num query groups")',
                where(e.tp, vanilla),
                fix=f"{e.key_prefix}.tensor_model_parallel_size={smallest} or less",
                role=e.role,
            )
        elif cp > 1:
            yield finding(
                "VERL-BRIDGE-MIMO-V2",
                f'[{e.role}] CP {cp} (Megatron-Bridge: "MiMo-V2-Flash does not support context parallelism yet.")',
                where(e.cp, vanilla),
                fix=f"{e.key_prefix}.context_parallel_size=1",
                role=e.role,
            )


@rule(
    "VERL-MC-GRAD-OFFLOAD",
    "warning",
    "megatron.grad_offload is read and never used: gradients move only with param_offload",
    frameworks=("verl",),
    engine="megatron",
)
def grad_offload_unused(job: Job) -> Iterator[Finding]:
    """
    verl's Megatron config has a `grad_offload` switch beside `param_offload`, but no release acts on
    it: the workers store it as `_is_offload_grad` and never read that again. A Megatron engine's
    gradient buffers leave the device only with `param_offload`, together with the weights.

    Why:
    No error: with `grad_offload=True` alone the gradients stay on the device, and a memory plan that
    counted on moving them runs out of GPU memory (VLLM-MEM-STARTUP, VLLM-MEM-WAKE count them).

    Fix:
    Set `param_offload=True` to move the weights and gradients, or drop `grad_offload`.

    Versions:
    The key is in the config of every bundled release but 0.9.1 (0.4.0 … 0.9.0, main; 0.9.1 refuses
    it: VERL-CFG-UNKNOWN-KEY), and unused in all: megatron_workers.py (0.4.0 … 0.7.1,
    `self._is_offload_grad = ...get("grad_offload", False)`), engine/megatron/transformer_impl.py
    (0.6.0 … 0.9.0, main of 2026-08-22: `self._is_offload_grad = self.engine_config.grad_offload`);
    offload and reload pass `grad=self._is_offload_param`.

    Source:
    verl/workers/megatron_workers.py ActorRolloutRefWorker / CriticWorker __init__ (verl 0.4.0 … 0.7.1);
    verl/workers/engine/megatron/transformer_impl.py MegatronEngine (verl 0.8.0, 0.9.0).
    """
    for prefix, role in (("actor_rollout_ref.actor.megatron", "actor"), ("critic.megatron", "critic")):
        if role == "critic" and job.layout("critic") is None:
            continue
        grad = job.value(f"{prefix}.grad_offload")
        param = job.value(f"{prefix}.param_offload")
        if not (grad.known and grad.value is True and param.known and param.value is False):
            continue
        yield finding(
            "VERL-MC-GRAD-OFFLOAD",
            f"[{role}] {prefix}.grad_offload=True has no effect: verl {job.framework_version} stores it and never "
            "uses it; the gradient buffers leave the device only with param_offload (with the weights)",
            where(grad),
            fix=f"{prefix}.param_offload=True (weights and gradients), or drop {prefix}.grad_offload",
            role=role,
        )
