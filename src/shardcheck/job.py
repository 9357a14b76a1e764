"""The typed job every rule reads: cluster, training layouts, model, each value traced to its origin."""

from __future__ import annotations

from dataclasses import dataclass, field

from shardcheck.origin import Origin, Traced, UnknownValue
from shardcheck.problems import Problem


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """The devices the trainer gets: ``nnodes`` × ``devices_per_node``."""

    nnodes: Traced[int]
    devices_per_node: Traced[int]
    device: Traced[str]

    @property
    def world(self) -> Traced[int]:
        """World size = nnodes · devices_per_node (verl: trainer.nnodes * trainer.n_gpus_per_node)."""
        n, g = self.nnodes, self.devices_per_node
        value = n.value * g.value if n.known and g.known else None
        return Traced.derived(value, "world = nnodes · devices_per_node", n, g)


@dataclass(frozen=True, slots=True, kw_only=True)
class MegatronLayout:
    """One Megatron-Core engine's parallel layout (verl: ``<role>.megatron.*``).

    ``etp_setting`` is the configured expert_tensor_parallel_size: None means "follow TP", the
    default Megatron-Core applies (parallel_state.initialize_model_parallel:
    ``if expert_tensor_parallel_size is None: expert_tensor_parallel_size = tensor_model_parallel_size``).
    ``vpp`` None means no interleaved schedule. ``first_stage_layers`` / ``last_stage_layers`` None
    mean an even split.
    """

    role: str
    key_prefix: str
    tp: Traced[int]
    pp: Traced[int]
    cp: Traced[int]
    ep: Traced[int]
    etp_setting: Traced[int | None]
    vpp: Traced[int | None]
    first_stage_layers: Traced[int | None]
    last_stage_layers: Traced[int | None]
    account_for_embedding: Traced[bool]
    account_for_loss: Traced[bool]
    layout_string: Traced[str | None]
    sequence_parallel: Traced[bool]
    transformer_overrides: dict[str, Traced] = field(default_factory=dict)
    # The override word that replaced an inherited override_transformer_config (verl's ref inherits the
    # actor's through ${oc.select:...}; ``++<ref>.override_transformer_config.k=v`` replaces it)
    transformer_overrides_replaced: Origin | None = None
    order: str = "tp-cp-ep-dp-pp"  # Megatron-Core's rank order (verl always passes the default)

    @property
    def etp(self) -> Traced[int]:
        """The effective expert tensor parallel size (None → TP, Megatron-Core's default)."""
        if self.etp_setting.known and self.etp_setting.value is None:
            setting = self.etp_setting.origin
            said = setting.text if setting.kind == "default" else f"line {setting.line}"
            origin = Origin(
                kind="default", text=f"{said} is null, so megatron-core uses ETP = TP", via=(setting, self.tp.origin)
            )
            return Traced(self.tp.value, origin, self.tp.unknown)
        return self.etp_setting  # type: ignore[return-value]

    def sizes(self) -> tuple:
        """The values that decide the process groups (for comparing two engines)."""
        return tuple(
            t.value if t.known else ("?", t.unknown)
            for t in (self.tp, self.pp, self.cp, self.ep, self.etp_setting, self.vpp)
        )

    def judged(self) -> tuple:
        """Every value a layout, model or memory rule reads from this engine (for "is this engine the
        same as that one"): the sizes, the pipeline split, sequence parallelism and every
        ``override_transformer_config`` entry."""
        return tuple((name, _plain(t)) for name, t in self.fields()) + tuple(
            sorted((k, repr(_plain(t))) for k, t in self.transformer_overrides.items())
        )

    def fields(self) -> tuple[tuple[str, Traced], ...]:
        """The engine's settings by the names the report uses."""
        return (
            ("TP", self.tp),
            ("PP", self.pp),
            ("CP", self.cp),
            ("EP", self.ep),
            ("ETP", self.etp_setting),
            ("VPP", self.vpp),
            ("first-stage layers", self.first_stage_layers),
            ("last-stage layers", self.last_stage_layers),
            ("account_for_embedding_in_pipeline_split", self.account_for_embedding),
            ("account_for_loss_in_pipeline_split", self.account_for_loss),
            ("pipeline_model_parallel_layout", self.layout_string),
            ("sequence_parallel", self.sequence_parallel),
        )

    def differences(self, other: MegatronLayout) -> list[tuple[str, Traced | None, Traced | None]]:
        """The settings in which ``other`` differs from this engine: (name, this one's, other's); an
        ``override_transformer_config`` entry only one of them has gives None for the other."""
        out: list[tuple[str, Traced | None, Traced | None]] = [
            (name, mine, theirs)
            for (name, mine), (_, theirs) in zip(self.fields(), other.fields())
            if _plain(mine) != _plain(theirs)
        ]
        shown = {
            "num_layers_in_first_pipeline_stage",
            "num_layers_in_last_pipeline_stage",
            "account_for_embedding_in_pipeline_split",
            "account_for_loss_in_pipeline_split",
            "pipeline_model_parallel_layout",
        }
        for key in sorted(set(self.transformer_overrides) | set(other.transformer_overrides)):
            mine, theirs = self.transformer_overrides.get(key), other.transformer_overrides.get(key)
            if key in shown or (mine is not None and theirs is not None and _plain(mine) == _plain(theirs)):
                continue
            out.append((f"override_transformer_config.{key}", mine, theirs))
        return out

    def dp(self, world: Traced[int]) -> Traced[int]:
        """DP = world / (TP·PP·CP) (Megatron-Core: data_parallel_size excludes CP)."""
        model = (
            self.tp.value * self.pp.value * self.cp.value if all(t.known for t in (self.tp, self.pp, self.cp)) else None
        )
        value = world.value // model if world.known and model and world.value % model == 0 else None
        return Traced.derived(value, "DP = world / (TP·PP·CP)", world, self.tp, self.pp, self.cp)

    def edp(self, world: Traced[int]) -> Traced[int]:
        """EDP = world / (ETP·EP·PP) (Megatron-Core's expert data parallel size)."""
        etp = self.etp
        grid = etp.value * self.ep.value * self.pp.value if all(t.known for t in (etp, self.ep, self.pp)) else None
        value = world.value // grid if world.known and grid and world.value % grid == 0 else None
        return Traced.derived(value, "EDP = world / (ETP·EP·PP)", world, etp, self.ep, self.pp)


def _plain(t: Traced | None) -> object:
    """A traced value for comparison: the value, or the reason it is unknown."""
    if t is None:
        return None
    return t.value if t.known else ("?", t.unknown)


@dataclass(frozen=True, slots=True, kw_only=True)
class FsdpLayout:
    """One FSDP / FSDP2 engine's layout (verl: ``<role>.fsdp_config.*``, the critic's ``critic.fsdp.*``).

    ``sp`` is the Ulysses sequence-parallel size the engine uses (verl's deprecated role-level key,
    when > 1, overrides the engine's: FSDPActorConfig.__post_init__). ``fsdp_size`` -1 (or any
    value ≥ world) shards over the whole world; a smaller value shards over groups of that size and
    replicates across them (verl/workers/engine/fsdp/utils.py create_device_mesh). DP = world / sp
    (FSDPEngine.get_data_parallel_size).
    """

    role: str
    key_prefix: str  # the engine config section, e.g. actor_rollout_ref.actor.fsdp_config
    strategy: Traced[str]  # fsdp | fsdp2
    sp: Traced[int]
    fsdp_size: Traced[int]
    model_dtype: Traced[str]
    param_offload: Traced[bool]
    optimizer_offload: Traced[bool]
    offload_policy: Traced[bool]
    sp_key: str = ""  # the key that decided ``sp`` (the role-level one when it overrides the engine's)
    size_key: str = ""  # the key that decided ``fsdp_size`` (the actor's where the ref shares its mesh)

    def dp(self, world: Traced[int]) -> Traced[int]:
        """DP = world / sp (verl FSDPEngine.get_data_parallel_size); None when sp does not divide the world."""
        sp = self.sp
        value = world.value // sp.value if world.known and sp.known and world.value % sp.value == 0 else None
        return Traced.derived(value, "DP = world / Ulysses SP", world, sp)

    def shard(self, world: Traced[int]) -> Traced[int]:
        """The size of one FSDP sharding group: fsdp_size, or the world when it is -1 or ≥ world."""
        size = self.fsdp_size
        value = None
        if world.known and size.known:
            value = world.value if size.value < 0 or size.value >= world.value else size.value
        return Traced.derived(value, "FSDP shard group = fsdp_size (-1 or ≥ world: the world)", world, size)

    def replicate(self, world: Traced[int]) -> Traced[int]:
        """How many replicas of each shard (HSDP's outer dimension): world / shard group."""
        shard = self.shard(world)
        value = world.value // shard.value if shard.known and shard.value and world.value % shard.value == 0 else None
        return Traced.derived(value, "FSDP replicas = world / shard group", world, shard)


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutLayout:
    """The rollout engine's parallel sizes (verl: ``actor_rollout_ref.rollout.*``).

    ``gpus`` is set when the rollout has GPUs of its own (slime's ``--rollout-num-gpus``); None means
    it shares the trainer's world (verl's hybrid engine). With SGLang's DP attention
    (``dp_attention``) DP splits the engine's TP group instead of multiplying its GPUs.
    """

    engine: Traced[str]
    tp: Traced[int]
    dp: Traced[int]
    pp: Traced[int]
    ep: Traced[int] | None = None
    dp_attention: Traced[bool] | None = None
    gpus: Traced[int | None] | None = None

    @property
    def dp_in_engine(self) -> bool:
        """Whether DP lies inside one engine's TP group (SGLang DP attention) rather than beside it."""
        return self.dp_attention is not None and self.dp_attention.known and bool(self.dp_attention.value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLayout:
    """An inference server verl starts besides the trainer: the reward model or a distillation teacher.

    Each is a vLLM/SGLang rollout of its own (verl 0.9.1: ``reward.reward_model.rollout`` and
    ``distillation.teacher_models.<name>.inference`` are RolloutConfig sections) on a resource pool of
    ``nnodes`` × ``devices_per_node`` (the trainer's when ``pool_key`` is None), in replicas of
    TP·DP·PP devices.
    """

    role: str  # "reward model" or "teacher <name>"
    key_prefix: str  # the RolloutConfig section
    engine: Traced[str]
    tp: Traced[int]
    dp: Traced[int]
    pp: Traced[int]
    ep: Traced[int]
    nnodes: Traced[int]
    devices_per_node: Traced[int]
    pool_key: str | None  # the section whose nnodes / n_gpus_per_node give the pool; None: the trainer's
    num_replicas: Traced[int | None] | None = None  # a teacher's configured replica count (several teachers)
    switch: Traced | None = None  # the setting that starts this server on its pool (enable_resource_pool, enabled)

    @property
    def replica_size(self) -> Traced[int]:
        """Devices per replica: TP·DP·PP (verl: rollout_world_size / per_replica_world_size)."""
        known = all(t.known for t in (self.tp, self.dp, self.pp))
        value = self.tp.value * self.dp.value * self.pp.value if known else None
        return Traced.derived(value, "devices per replica = TP·DP·PP", self.tp, self.dp, self.pp)

    @property
    def pool(self) -> Traced[int]:
        n, g = self.nnodes, self.devices_per_node
        value = n.value * g.value if n.known and g.known else None
        return Traced.derived(value, "pool = nnodes · n_gpus_per_node", n, g)


@dataclass(frozen=True, slots=True)
class Quantization:
    """A checkpoint's quantization_config as read (models/quantization.py); a field not written is None."""

    method: str | None
    bits: int | None = None
    group_size: int | None = None
    weight_block_size: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFacts:
    """Architecture facts the rules need, named as in HF config.json (Megatron names in comments)."""

    name: str
    source: str  # "config.json at PATH" or "built-in preset NAME"
    origin: Origin
    num_hidden_layers: int | None  # Megatron num_layers
    num_attention_heads: int | None
    num_key_value_heads: int | None  # Megatron num_query_groups
    hidden_size: int | None = None
    num_experts: int | None = None  # Megatron num_moe_experts; None for dense models
    num_experts_per_tok: int | None = None
    vision_model_type: str | None = None  # the top-level model_type of a model with a vision_config
    linear_attention: bool = False  # some layers are linear attention (layer_types has "linear_attention")
    vocab_size: int | None = None
    max_position_embeddings: int | None = None
    model_type: str | None = None
    mla: bool = False
    config: dict = field(default_factory=dict, compare=False, repr=False)  # the HF config (text part) as read
    rope_scaling: dict | None = None  # HF rope_scaling (or transformers-5 rope_parameters); None: none
    model_max_length: int | None = None
    quantization: Quantization | None = None  # config.json's quantization_config (models/quantization.py)
    vision_config: dict | None = field(default=None, compare=False, repr=False)  # a VL model's vision tower
    text_key: str | None = None  # where a VL config keeps its language model: text_config, llm_config, ...
    # config.json fields the model's source does not record (a catalogue entry mapped from litgpt): unknown,
    # never the transformers default
    unknown: frozenset[str] = frozenset()

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    def max_positions(self) -> int | None:
        """max_position_embeddings; UnknownValue when the model's source does not record it."""
        if self.max_position_embeddings is None and "max_position_embeddings" in self.unknown:
            why = f"not recorded by {self.source}; give the model's config.json with --model-config"
            raise UnknownValue(f"{self.name}'s max_position_embeddings", Traced(None, self.origin, why))
        return self.max_position_embeddings


# Where each framework takes the node count, devices per node and device kind from (None: not a setting).
CLUSTER_KEYS = {
    "verl": ("trainer.nnodes", "trainer.n_gpus_per_node", "trainer.device"),
    "megatron-lm": ("torchrun --nnodes", "torchrun --nproc-per-node", None),
    "verl-sft": ("torchrun --nnodes", "torchrun --nproc-per-node", None),
    "megatron-core": ("nodes", "devices per node", None),
    "slime": ("--actor-num-nodes", "--actor-num-gpus-per-node", None),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """Everything shardcheck knows about one launch, resolved the way the framework resolves it."""

    path: str
    framework: str
    framework_version: str
    entry: str
    version_source: str = "default"  # how framework_version was chosen: flag | config | path | installed | pinned |
    #                                  inferred | default (frameworks/verl/versions.py)
    accepted_versions: tuple[str, ...] = ()  # bundled versions whose config accepts every override
    version_reason: str = ""  # one line: why this version
    carried_verl: str | None = None  # the version file of the verl the script's repository carries (vendored)
    # --verl-path (version_source "path"): (directory, the bundled version its config tree equals or is nearest
    # to, whether it equals it) (frameworks/verl/verl_path.py)
    verl_path: tuple[str, str, bool] | None = None
    defaults_read: frozenset[str] = frozenset()  # framework keys read at their defaults (not set by the script)
    megatron_core_version: str = "0.16"  # the megatron-core minor the layout rules follow
    megatron_core_reason: str = ""  # why that minor (frameworks/megatron/versions.py)
    # the rollout engines' versions the VLLM-* / SGLANG-* rules follow and why (frameworks/verl/engine_versions.py;
    # None: not known)
    vllm_version: str | None = None
    vllm_reason: str = ""
    sglang_version: str | None = None
    sglang_reason: str = ""
    config_name: str
    config_source: str
    cluster: Cluster
    strategy: Traced[str]
    layouts: tuple[MegatronLayout, ...]  # the Megatron engines built: actor, ref and critic when verl builds them
    ref_used: Traced[bool]  # the ref's log-probs are computed (verl's need_reference_policy)
    # verl: the ref is the actor with its LoRA adapters disabled, and no ref engine is built (None: not verl)
    ref_in_actor: Traced[bool] | None = None
    critic_used: Traced[bool | None] | None = None  # verl's need_critic (None: the framework has no critic)
    model_path: Traced[str]
    model: ModelFacts | None
    model_problem: str | None
    notes: tuple[Problem, ...] = ()  # problems found reading and resolving the input
    open_arguments: tuple[Origin, ...] = ()  # arguments of unknown content: they may set any key
    rollout: RolloutLayout | None = None
    suppressions: dict[int, frozenset[str]] = field(default_factory=dict)  # script line -> disabled rule ids
    suppression_ids: tuple[tuple[int, str], ...] = ()  # (line, id as written) of the disable comments
    values: dict[str, Traced] = field(default_factory=dict)  # framework keys the batch/rollout rules read
    device_choice: str | None = None  # --device NAME for the memory estimate (None: the default for trainer.device)
    host_memory_bytes: int | None = None  # --host-memory per node, for MEM-HOST
    sample_tokens: tuple[int, int | None] | None = None  # --sample-tokens MEAN[,MAX] for dynamic batch size
    fsdp_layouts: tuple[FsdpLayout, ...] = ()  # FSDP engines built: actor, ref, critic (empty for Megatron)
    # Values the rules compute once per job and share (the memory estimate). Not an __init__ argument, so
    # every Job, dataclasses.replace's copies included, starts with its own empty dict: a changed job (a
    # planner candidate) never reads the estimate of the job it was made from. run_rules' judged copy, which
    # only adds notes, shares its job's dict (rules/registry.py).
    run_cache: dict = field(default_factory=dict, init=False, compare=False, repr=False)
    servers: tuple[ServerLayout, ...] = ()  # inference servers built besides the rollout: reward model, teachers

    @property
    def cluster_keys(self) -> tuple[str, str, str | None]:
        """The framework's own names for nodes, devices per node and device kind, for messages."""
        return CLUSTER_KEYS.get(self.framework, CLUSTER_KEYS["verl"])

    @property
    def world_name(self) -> str:
        nodes, devices, _ = self.cluster_keys
        return f"world size ({nodes} · {devices})"

    def value(self, key: str) -> Traced:
        """A framework setting by its key (e.g. ``data.train_batch_size``); unknown when not read."""
        found = self.values.get(key)
        if found is None:
            return Traced(None, Origin(kind="default", text=key), f"{key} is not read for this framework")
        return found

    def layout(self, role: str) -> MegatronLayout | None:
        return next((lay for lay in self.layouts if lay.role == role), None)

    def fsdp_layout(self, role: str) -> FsdpLayout | None:
        return next((lay for lay in self.fsdp_layouts if lay.role == role), None)

    def trainer_dp(self, role: str = "actor") -> Traced[int] | None:
        """The data-parallel size a training role's batches are split over, for either engine.

        FSDP: world / Ulysses SP of that role's engine. Megatron: world / (TP·PP·CP) of the engine
        that built the parallel state (one per process, see ``group_owner``). None when no engine
        of either kind is modelled for the role.
        """
        fsdp = self.fsdp_layout(role)
        if fsdp is not None:
            return fsdp.dp(self.cluster.world)
        owner = self.group_owner
        return owner.dp(self.cluster.world) if owner is not None and self.layout(role) is not None else None

    def sequence_split(self, role: str = "actor") -> Traced[int] | None:
        """How many ranks share one sequence's tokens: Ulysses SP (FSDP) or CP (Megatron)."""
        fsdp = self.fsdp_layout(role)
        if fsdp is not None:
            return fsdp.sp
        owner = self.group_owner
        return owner.cp if owner is not None and self.layout(role) is not None else None

    @property
    def group_owner(self) -> MegatronLayout | None:
        """The engine whose sizes build the actor's and ref's process groups: verl builds the ref first,
        when it builds one.

        verl/workers/engine_workers.py ActorRolloutRefWorker.init_model builds the reference model
        before the actor; verl/workers/engine/megatron/transformer_impl.py _init_device_mesh returns
        early when ``mpu.is_initialized()``, so the first engine's sizes are the ones used. A colocated
        Megatron critic is built earlier still; VERL-MC-ONE-INIT reports when its sizes differ.
        """
        ref = self.layout("ref")
        if ref is not None:
            return ref
        return self.layout("actor")
