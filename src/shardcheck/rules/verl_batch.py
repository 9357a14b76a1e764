"""verl's batch logic for the Megatron and FSDP engines (verl 0.9.1, v1 trainer).

Both engines run under the same engine workers. One update mini-batch is
``ppo_mini_batch_size · rollout.n`` samples, split over the trainer DP (``Job.trainer_dp``): Megatron
world / (TP·PP·CP) (CP excluded), FSDP world / Ulysses SP (FSDPEngine.get_data_parallel_size) —
verl/trainer/ppo/v1/trainer_base.py ``_update_actor`` and
verl/workers/engine_workers.py ``TrainingWorker.train_mini_batch``. Each step's batch of
``train_batch_size · n`` samples is first padded with dummy samples up to a multiple of
lcm(DP, mini · n) (``_get_required_batch_multiple``, ``upsample_batch_to_divisible_size``).
Micro-batches are ``*_micro_batch_size_per_gpu`` samples, or packed up to
``*_max_token_len_per_gpu · CP`` (Megatron) or ``· SP`` (FSDP) tokens with dynamic batch size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from shardcheck.frameworks.verl.critic_batches import critic_packing
from shardcheck.frameworks.verl.vendored import BATCH_AT_LEAST_MINI, not_judged
from shardcheck.frameworks.verl.versions import legacy_workers
from shardcheck.job import Job
from shardcheck.rules.base import Finding, NotJudged, finding, need, rule, where
from shardcheck.rules.divisors import divisors

A = "actor_rollout_ref.actor"
REF = "actor_rollout_ref.ref"
RO = "actor_rollout_ref.rollout"
C = "critic"
# budgets that are CriticConfig fields verl's YAML leaves out (verl 0.6.0 on): set with `+key=`
_FIELD_ONLY = (f"{C}.ppo_infer_max_token_len_per_gpu",)


def _trained(job: Job) -> bool:
    """A job whose actor engine (Megatron or FSDP) is modelled."""
    return job.trainer_dp("actor") is not None


def _fsdp(job: Job) -> bool:
    return job.fsdp_layout("actor") is not None


def _dp(job: Job, role: str = "actor") -> int:
    name = "trainer DP (world / Ulysses SP)" if job.fsdp_layout(role) else "Megatron DP (world / (TP·PP·CP))"
    dp = need(job.trainer_dp(role), name)
    if dp is None:  # the layout does not tile the world: MCORE-PS-WORLD / VERL-FSDP-SP-WORLD report it
        raise NotJudged
    return dp


def _static(job: Job) -> bool:
    return not need(job.value(f"{A}.use_dynamic_bsz"), f"{A}.use_dynamic_bsz")


def engine_workers(job: Job, role: str = "actor") -> bool:
    """Whether verl's engine workers (engine_workers.py TrainingWorker / ActorRolloutRefWorker) run ``role``
    (versions.legacy_workers: always from 0.8.0; in 0.7.x the actor with ``trainer.use_legacy_worker_impl=disable``;
    a Megatron critic, the only critic trained here, never before 0.8.0)."""
    setting = job.value("trainer.use_legacy_worker_impl")
    known_setting = setting.value if setting.known else None
    fsdp = job.fsdp_layout(role) is not None
    return not legacy_workers(job.framework_version, role, known_setting, fsdp=fsdp)


def _samples(job: Job) -> tuple[int, int, int]:
    """(train_batch_size · n, mini · n, n)."""
    n = need(job.value(f"{RO}.n"), f"{RO}.n")
    tbs = need(job.value("data.train_batch_size"), "data.train_batch_size")
    mini = need(job.value(f"{A}.ppo_mini_batch_size"), f"{A}.ppo_mini_batch_size")
    return tbs * n, mini * n, n


@dataclass(frozen=True, slots=True)
class Trainee:
    """A model verl trains: the actor (Megatron or FSDP engine), and a Megatron critic when one is used.

    ``static`` is the config's own ``use_dynamic_bsz`` being off (what verl's config validation
    reads); ``engine_dynamic`` whether the engine packs micro-batches by tokens; for the critic both
    depend on the verl version (``critic_packing``).
    """

    role: str
    prefix: str
    dp: int
    cp: int  # ranks sharing one sequence: Megatron CP, or FSDP's Ulysses SP
    static: bool
    engine_dynamic: bool
    token_keys: tuple[str, ...]  # the budgets of its passes (each must hold the longest sample)
    split: str = "CP"  # what ``cp`` is called in messages ("SP" for FSDP)

    def mini(self, job: Job) -> tuple[int, object]:
        """(ppo_mini_batch_size · n, the traced mini batch)."""
        mini_t = job.value(f"{self.prefix}.ppo_mini_batch_size")
        return need(mini_t, f"{self.prefix}.ppo_mini_batch_size") * need(job.value(f"{RO}.n"), f"{RO}.n"), mini_t


def critic_used(job: Job) -> bool:
    """verl/trainer/ppo/utils.py need_critic (resolved into ``Job.critic_used``)."""
    return job.critic_used is not None and bool(need(job.critic_used, "critic built (critic.enable / adv_estimator)"))


def trainees(job: Job) -> list[Trainee]:
    """The actor, then the critic when verl uses one (with its own Megatron sizes, DP = world / (TP·PP·CP))."""
    split = "SP" if _fsdp(job) else "CP"
    cp = need(job.sequence_split("actor"), "ulysses_sequence_parallel_size" if _fsdp(job) else "context_parallel_size")
    out = [
        Trainee("actor", A, _dp(job), cp, _static(job), not _static(job), (f"{A}.ppo_max_token_len_per_gpu",), split)
    ]
    if not critic_used(job) or need(job.value(f"{C}.strategy"), f"{C}.strategy") != "megatron":
        return out
    sizes = [
        need(job.value(f"{C}.megatron.{k}_parallel_size"), f"{C}.megatron.{k}_parallel_size")
        for k in ("tensor_model", "pipeline_model", "context")
    ]
    world = need(job.cluster.world, "world size")
    if any(not isinstance(v, int) or v < 1 for v in sizes) or world % math.prod(sizes):
        return out  # the critic's layout does not tile the world: not judged here
    static = not need(job.value(f"{C}.use_dynamic_bsz"), f"{C}.use_dynamic_bsz")
    dynamic, keys = critic_packing(job, static)
    out.append(Trainee("critic", C, world // math.prod(sizes), sizes[2], static, dynamic, keys))
    return out


def padded_batch(job: Job) -> tuple[int, int]:
    """(samples per step after verl's v1 padding, the multiple it pads to)."""
    batch, mini, _ = _samples(job)
    multiple = math.lcm(_dp(job), mini)
    return -(-batch // multiple) * multiple, multiple


def _pass_samples(job: Job) -> list[tuple[str, int, str]]:
    """Each pass's (micro-batch key, samples per DP rank, pass name).

    The update pass takes mini · n / DP samples per rank; the old-log-prob and ref passes take the
    whole padded step batch / DP.
    """
    dp = _dp(job)
    _, mini, _ = _samples(job)
    batch, _ = padded_batch(job)
    passes = [(f"{A}.ppo_micro_batch_size_per_gpu", mini // dp, "update")]
    passes.append((f"{RO}.log_prob_micro_batch_size_per_gpu", batch // dp, "old log-prob"))
    if job.ref_used.value:
        ref_dp = _dp(job, "ref") if job.trainer_dp("ref") is not None else dp
        if batch % ref_dp == 0:  # the batch is padded for the actor's DP; an FSDP ref may have another SP
            passes.append((f"{REF}.log_prob_micro_batch_size_per_gpu", batch // ref_dp, "ref log-prob"))
    return passes


def _micro_passes(job: Job) -> list[tuple[str, int, str, object, int]]:
    """Each static-batch pass with a micro batch set: (key, samples per DP rank, pass, traced, micro).

    Passes whose micro batch is unset are VERL-ACT-MBS / VERL-CFG-LOGPROB-MBS findings and are left out.
    """
    out = []
    for key, per_rank, what in _pass_samples(job):
        micro_t = job.value(key)
        micro = need(micro_t, key)
        if micro is not None and micro > 0:
            out.append((key, per_rank, what, micro_t, micro))
    return out


@rule("VERL-ACT-MBS", "error", "Static batch size needs exactly one actor micro-batch key", frameworks=("verl",))
def actor_micro_batch(job: Job) -> Iterator[Finding]:
    """
    Without dynamic batch size each trainer rank (Megatron or FSDP) cuts its share of a mini-batch
    into micro-batches of `actor.ppo_micro_batch_size_per_gpu` samples; the key must be set, and
    not together with the deprecated `ppo_micro_batch_size`.

    Why:
    With neither set (verl's default), Megatron's `validate_config` fails at start with `TypeError:
    unsupported operand type(s) for *: 'int' and 'NoneType'` (utils/config.py, minimal_bsz); FSDP's
    `ActorConfig.__post_init__` asserts `[actor] Please set at least one of ...`. With both set it
    raises `[actor] You have set both 'actor.ppo_micro_batch_size' AND
    'actor.ppo_micro_batch_size_per_gpu'`. With only the deprecated key, the engine worker asserts
    `ppo_micro_batch_size_per_gpu is not None` at init.

    Versions:
    Only the deprecated key set: an error on the engine workers (verl 0.8.0 on, and 0.7.x with
    `trainer.use_legacy_worker_impl=disable`); the legacy workers, the default before, convert it to the
    per-GPU size at init (fsdp_workers.py, verl 0.4.0 … 0.7.1).

    Fix:
    Set `ppo_micro_batch_size_per_gpu`, or `actor_rollout_ref.actor.use_dynamic_bsz=True`.

    The same holds for the critic when verl uses one (`critic.enable`, or adv_estimator gae):
    `CriticConfig.__post_init__` raises `[critic] Please set at least one of
    'critic.micro_batch_size' or 'critic.micro_batch_size_per_gpu'.` (or `You have set both`; or,
    with only the deprecated `ppo_micro_batch_size`, `[critic] ppo_mini_batch_size (X) must be
    divisible by ppo_micro_batch_size (Y)`).

    Source:
    verl/utils/config.py validate_config; verl/workers/config/actor.py ActorConfig.__post_init__;
    verl/workers/config/critic.py CriticConfig.__post_init__; verl/trainer/ppo/utils.py need_critic;
    verl/workers/engine_workers.py ActorRolloutRefWorker.init_model (verl 0.9.1).
    """
    if not _trained(job):
        return
    for t in trainees(job):
        if not t.static:
            continue
        p = t.prefix
        per_gpu = job.value(f"{p}.ppo_micro_batch_size_per_gpu")
        legacy = job.value(f"{p}.ppo_micro_batch_size")
        has_new = need(per_gpu, f"{p}.ppo_micro_batch_size_per_gpu") is not None
        has_old = need(legacy, f"{p}.ppo_micro_batch_size") is not None
        if has_new and has_old:
            yield finding(
                "VERL-ACT-MBS",
                f"[{t.role}] You have set both '{t.role}.ppo_micro_batch_size' AND "
                f"'{t.role}.ppo_micro_batch_size_per_gpu' (verl {t.role.title()}Config)",
                where(legacy, per_gpu),
                fix=f"remove {p}.ppo_micro_batch_size",
                role=t.role,
            )
        elif not has_new and not has_old and t.role == "critic":
            yield finding(
                "VERL-ACT-MBS",
                "[critic] Please set at least one of 'critic.micro_batch_size' or "
                "'critic.micro_batch_size_per_gpu'. (verl CriticConfig)",
                where(per_gpu, job.value(f"{p}.use_dynamic_bsz")),
                fix=f"{p}.ppo_micro_batch_size_per_gpu=1, or {p}.use_dynamic_bsz=True",
                role=t.role,
            )
        elif not has_new and t.role == "critic":
            mini = need(job.value(f"{p}.ppo_mini_batch_size"), f"{p}.ppo_mini_batch_size")
            if mini % legacy.value:
                yield finding(
                    "VERL-ACT-MBS",
                    f"[critic] ppo_mini_batch_size ({mini}) must be divisible by "
                    f"ppo_micro_batch_size ({legacy.value}) (verl CriticConfig)",
                    where(legacy),
                    fix=f"set {p}.ppo_micro_batch_size_per_gpu instead (the former is deprecated)",
                    role=t.role,
                )
        elif _fsdp(job) and t.role == "actor" and not has_new and not has_old:
            # FSDP: validate_config's minimal batch is n_gpus (no micro factor), so the dataclass raises first.
            yield finding(
                "VERL-ACT-MBS",
                "[actor] Please set at least one of 'actor.ppo_micro_batch_size' or "
                "'actor.ppo_micro_batch_size_per_gpu' if use_dynamic_bsz is not enabled. "
                "(verl ActorConfig.__post_init__)",
                where(per_gpu, job.value(f"{p}.use_dynamic_bsz")),
                fix=f"{p}.ppo_micro_batch_size_per_gpu=1, or {p}.use_dynamic_bsz=True",
                role=t.role,
            )
        elif _fsdp(job) and t.role == "actor" and not has_new:
            if not engine_workers(job):
                continue  # the legacy FSDP worker converts the deprecated key (see Versions)
            yield finding(
                "VERL-ACT-MBS",
                f"only the deprecated {p}.ppo_micro_batch_size is set: the engine reads "
                "ppo_micro_batch_size_per_gpu, and ActorRolloutRefWorker.init_model asserts "
                "it is not None",
                where(legacy),
                fix=f"{p}.ppo_micro_batch_size_per_gpu=1, or {p}.use_dynamic_bsz=True",
                role=t.role,
            )
        elif not has_new and t.role == "actor":
            yield finding(
                "VERL-ACT-MBS",
                f"{p}.ppo_micro_batch_size_per_gpu is not set and use_dynamic_bsz is off: "
                "verl's validate_config fails with TypeError (int * None)",
                where(per_gpu, job.value(f"{p}.use_dynamic_bsz")),
                fix=f"{p}.ppo_micro_batch_size_per_gpu=1, or {p}.use_dynamic_bsz=True",
                role=t.role,
            )


@rule("VERL-CFG-REAL-BSZ", "error", "train_batch_size · n must divide by DP · actor micro batch", frameworks=("verl",))
def real_batch(job: Job) -> Iterator[Finding]:
    """
    verl's start-up check: the samples of a step, `train_batch_size · rollout.n`, must divide by
    the smallest batch all DP ranks can take: Megatron `DP · ppo_micro_batch_size_per_gpu` (DP
    excludes CP); FSDP (any strategy but megatron) the number of GPUs, whatever SP and micro are.

    Why:
    `validate_config` asserts `real_train_batch_size (X) must be divisible by minimal possible batch
    size (Y)` before Ray starts.

    Fix:
    Make train_batch_size · n a multiple of DP · micro.

    Source:
    verl/utils/config.py validate_config (verl 0.9.1; `minimal_bsz = n_gpus` when the strategy is not megatron).
    """
    if not _trained(job) or not _static(job):
        return
    batch, _, _ = _samples(job)
    if _fsdp(job):
        minimal = need(job.cluster.world, "world size")
        how = f"the {minimal} GPUs"
    else:
        micro = need(job.value(f"{A}.ppo_micro_batch_size_per_gpu"), f"{A}.ppo_micro_batch_size_per_gpu")
        if micro is None:
            return  # VERL-ACT-MBS
        minimal = _dp(job) * micro
        how = f"DP {_dp(job)} · micro {micro}"
    if batch % minimal:
        yield finding(
            "VERL-CFG-REAL-BSZ",
            f"real_train_batch_size ({batch}) must be divisible by minimal possible batch size ({minimal}) "
            f"(verl: train_batch_size · n = {batch}; {how})",
            where(job.value("data.train_batch_size"), job.value(f"{RO}.n")),
            fix=f"a train_batch_size · n that is a multiple of {minimal}",
        )


@rule("VERL-ACT-TBS-MINI", "error", "train_batch_size must be at least ppo_mini_batch_size", frameworks=("verl",))
def batch_at_least_mini(job: Job) -> Iterator[Finding]:
    """
    Both count prompts; a step must hold at least one mini-batch (static batch size).

    Why:
    `ActorConfig.validate` raises `train_batch_size (X) must be >= actor.ppo_mini_batch_size (Y)`.

    Fix:
    Lower ppo_mini_batch_size or raise train_batch_size.

    The critic's `ppo_mini_batch_size` likewise, when a critic is used (`CriticConfig.validate`).
    Not judged on a carried verl older than 0.3, which has no such check.

    Source:
    verl/workers/config/actor.py ActorConfig.validate; verl/workers/config/critic.py CriticConfig.validate (verl 0.9.1);
    first in verl/trainer/ppo/ray_trainer.py at v0.3.0.post1.
    """
    if not _trained(job):
        return
    if BATCH_AT_LEAST_MINI in not_judged(job.carried_verl):
        raise NotJudged  # a carried verl before 0.3 has no such check; the version line says so (vendored.py)
    tbs = need(job.value("data.train_batch_size"), "data.train_batch_size")
    for t in trainees(job):
        mini_t = job.value(f"{t.prefix}.ppo_mini_batch_size")
        mini = need(mini_t, f"{t.prefix}.ppo_mini_batch_size")
        if t.static and tbs < mini:
            yield finding(
                "VERL-ACT-TBS-MINI",
                f"train_batch_size ({tbs}) must be >= {t.role}.ppo_mini_batch_size ({mini})",
                where(mini_t, job.value("data.train_batch_size")),
                fix=f"{t.prefix}.ppo_mini_batch_size={tbs} or less",
                role=t.role,
            )


@rule("VERL-ENG-MINI-DP", "error", "ppo_mini_batch_size · n must divide by the trainer DP", frameworks=("verl",))
def mini_divides_dp(job: Job) -> Iterator[Finding]:
    """
    Each update mini-batch (`ppo_mini_batch_size · rollout.n` samples) is split evenly over the
    Megatron DP ranks (world / (TP·PP·CP)). verl's padding does not help here.

    Why:
    `TrainingWorker.train_mini_batch` asserts `Got mini_batch_size=X and
    self.engine.get_data_parallel_size()=Y` at the first update, after the rollout of step 1.

    Fix:
    Raise ppo_mini_batch_size (or n), or shrink DP by raising TP/PP/CP.

    The critic's update (`critic.ppo_mini_batch_size · n` over the critic engine's DP, from
    `critic.megatron.*`) is checked the same way when a critic is used.

    Versions:
    The engine workers' check: verl 0.8.0 on, and 0.7.x with `trainer.use_legacy_worker_impl=disable`.
    The legacy workers (the default up to 0.7.1) instead floor-divide: `ppo_mini_batch_size *= n;
    //= DP` (FSDP: world / Ulysses SP), and only the FSDP worker then asserts `ppo_mini_batch_size 0
    should be larger than 0 after normalization` (fsdp_workers.py ActorRolloutRefWorker.__init__,
    verl 0.4.0 … 0.7.1); the legacy Megatron workers check neither.

    Source:
    verl/workers/engine_workers.py TrainingWorker.train_mini_batch; verl/trainer/ppo/v1/trainer_base.py
    _update_critic (verl 0.9.1).
    """
    if not _trained(job):
        return
    for t in trainees(job):
        mini, mini_t = t.mini(job)
        if not engine_workers(job, t.role):
            if t.role == "actor" and _fsdp(job) and mini // t.dp == 0:
                yield finding(
                    "VERL-ENG-MINI-DP",
                    f"ppo_mini_batch_size 0 should be larger than 0 after normalization ({t.prefix}.ppo_mini_batch_size"
                    f" · n = {mini} floor-divided by the trainer DP {t.dp}; verl {job.framework_version}'s legacy "
                    "FSDP worker)",
                    where(mini_t, job.value(f"{RO}.n")),
                    fix=f"a {t.prefix}.ppo_mini_batch_size · n of at least {t.dp}",
                    role=t.role,
                )
            continue
        if mini % t.dp:
            yield finding(
                "VERL-ENG-MINI-DP",
                f"[{t.role}] Got mini_batch_size={mini} and "
                f"self.engine.get_data_parallel_size()={t.dp} ({t.prefix}.ppo_mini_batch_size "
                f"· n = {mini} does not divide over DP {t.dp})",
                where(mini_t, job.value(f"{RO}.n")),
                fix=f"a {t.prefix}.ppo_mini_batch_size · n that is a multiple of {t.dp}",
                role=t.role,
            )


@rule(
    "VERL-ENG-MICRO-DIV",
    "error",
    "Per-rank samples must divide by the micro batch (static batch size)",
    frameworks=("verl",),
)
def micro_divides(job: Job) -> Iterator[Finding]:
    """
    On each DP rank the samples of a pass are cut into micro-batches: the update pass takes
    `mini · n / DP` samples per `ppo_micro_batch_size_per_gpu`; the old-log-prob and ref passes
    take the whole padded step batch `B / DP` per `log_prob_micro_batch_size_per_gpu`.

    Why:
    `prepare_micro_batches` asserts `data size must be divisible by force_group_size *
    micro_batch_size_per_gpu` at the first pass of step 1.

    Fix:
    Choose micro-batch sizes that divide the per-rank sample counts.

    Versions:
    The engine workers' check: verl 0.8.0 on, and 0.7.x with `trainer.use_legacy_worker_impl=disable`.
    The legacy workers (the default up to 0.7.1) split each pass with `split(micro)` and check only
    the FSDP update: `normalized ppo_mini_batch_size X should be divisible by
    ppo_micro_batch_size_per_gpu Y`, X = ppo_mini_batch_size · n floor-divided by DP
    (fsdp_workers.py ActorRolloutRefWorker.__init__, verl 0.4.0 … 0.7.1); the legacy Megatron
    workers check none (workers/actor/megatron_actor.py `split`).

    Source:
    verl/workers/engine/utils.py prepare_micro_batches (verl 0.9.1).
    """
    if not _trained(job):
        return
    if not engine_workers(job):
        yield from _legacy_micro(job)
        return
    if not _static(job):
        return
    for key, per_rank, what, micro_t, micro in _micro_passes(job):
        if per_rank % micro:
            good = divisors(per_rank)
            yield finding(
                "VERL-ENG-MICRO-DIV",
                f'{what} pass: {per_rank} samples per DP rank, micro batch {micro} (verl: "data size must be '
                'divisible by force_group_size * micro_batch_size_per_gpu")',
                where(micro_t),
                fix=f"{key} in {', '.join(map(str, good[:12]))}",
            )


def _legacy_micro(job: Job) -> Iterator[Finding]:
    """verl ≤ 0.7.1's legacy FSDP worker: the normalized mini batch must divide by the update's micro batch (set
    per GPU, or the deprecated ``ppo_micro_batch_size`` floor-divided by DP), with or without dynamic batch size."""
    if not _fsdp(job):
        return
    dp = _dp(job)
    key = f"{A}.ppo_micro_batch_size_per_gpu"
    micro_t = job.value(key)
    micro = need(micro_t, key)
    if micro is None:
        key = f"{A}.ppo_micro_batch_size"
        micro_t = job.value(key)
        micro = need(micro_t, key)
        micro = None if micro is None else micro // dp
    if micro is None or micro <= 0:
        return  # VERL-ACT-MBS reports a missing micro batch
    normalized = _samples(job)[1] // dp
    if normalized and normalized % micro:
        yield finding(
            "VERL-ENG-MICRO-DIV",
            f"normalized ppo_mini_batch_size {normalized} should be divisible by ppo_micro_batch_size_per_gpu "
            f"{micro} (verl {job.framework_version}'s legacy FSDP worker)",
            where(micro_t),
            fix=f"{key} in {', '.join(map(str, divisors(normalized)[:12]))}",
        )


@rule(
    "VERL-ENG-DYN-TOKENS",
    "error",
    "Dynamic batch size: the token budget per GPU · CP (or SP) must hold the longest sample",
    frameworks=("verl",),
)
def token_budget(job: Job) -> Iterator[Finding]:
    """
    With dynamic batch size, micro-batches are packed up to `*_max_token_len_per_gpu · CP` tokens;
    a sample longer than that (up to `max_prompt_length + max_response_length`) cannot be placed.

    Why:
    `rearrange_micro_batches` asserts `max_token_len must be greater than the sequence length. Got
    max_token_len=X and max_seq_len=Y` at the first pass of step 1 (other ranks may hang).

    Fix:
    Raise the token budgets to at least (prompt + response) / CP.

    The critic's budgets depend on the verl version (see Versions).

    Versions:
    A Megatron critic: before 0.8.0 the legacy CriticWorker packs only with `critic.use_dynamic_bsz`,
    the update by `critic.ppo_max_token_len_per_gpu`, the value pass by
    `critic.forward_max_token_len_per_gpu` (megatron_workers.py, workers/critic/megatron_critic.py,
    verl 0.4.0 … 0.7.1). From 0.8.0 its engine worker always packs (EngineConfig.use_dynamic_bsz
    stays True whatever `critic.use_dynamic_bsz` says): the classic trainer hands it
    `ppo_max_token_len_per_gpu` for the update and `ppo_infer_max_token_len_per_gpu` (a
    CriticConfig field, default 32768, added with `+`) for the values (ppo/ray_trainer.py, verl
    0.8.0 … 0.9.1); the v1 trainer (`trainer.use_v1`, the default from 0.9.0) hands it
    `ppo_infer_max_token_len_per_gpu` for both (ppo/v1/trainer_base.py init_workers, verl 0.9.0, 0.9.1).

    Source:
    verl/utils/seqlen_balancing.py rearrange_micro_batches; verl/workers/engine/megatron/transformer_impl.py;
    verl/trainer/ppo/v1/trainer_base.py init_workers (critic engine config); verl/workers/config/engine.py
    EngineConfig (verl 0.9.1).
    """
    if not _trained(job):
        return
    longest = need(job.value("data.max_prompt_length"), "data.max_prompt_length") + need(
        job.value("data.max_response_length"), "data.max_response_length"
    )
    budgets = []
    for t in trainees(job):
        if not t.engine_dynamic:
            continue
        budgets.extend((t, key) for key in t.token_keys)
        if t.role == "actor":
            budgets.append((t, f"{RO}.log_prob_max_token_len_per_gpu"))
            if job.ref_used.value:
                budgets.append((t, f"{REF}.log_prob_max_token_len_per_gpu"))
    for t, key in budgets:
        budget_t = job.value(key)
        budget = need(budget_t, key)
        if budget * t.cp < longest:
            yield finding(
                "VERL-ENG-DYN-TOKENS",
                f"{key} {budget} · {t.split} {t.cp} = {budget * t.cp} tokens < the longest sample {longest} "
                f'(verl: "max_token_len must be greater than the sequence length")',
                where(budget_t, job.value("data.max_response_length"), job.value(f"{t.prefix}.use_dynamic_bsz")),
                fix=f"{'+' if budget_t.origin.first_script_line() is None and key in _FIELD_ONLY else ''}"
                f"{key}={-(-longest // t.cp)} or more",
                role=t.role,
            )


@rule("VERL-BAL-DP", "warning", "verl pads each step's batch with dummy samples", frameworks=("verl",))
def padding_waste(job: Job) -> Iterator[Finding]:
    """
    verl's v1 trainer pads every step's `train_batch_size · n` samples with dummy samples up to a
    multiple of lcm(DP, ppo_mini_batch_size · n) instead of failing; the padding is computed and
    thrown away.

    Why:
    No error: wasted compute every step.

    Fix:
    Choose train_batch_size so no padding is needed.

    Source:
    verl/trainer/ppo/v1/trainer_base.py _get_required_batch_multiple, _balance_batch;
    verl/utils/padding_utils.py (verl 0.9.1).
    """
    if not _trained(job) or not need(job.value("trainer.use_v1"), "trainer.use_v1"):
        return
    batch, _, _ = _samples(job)
    padded, multiple = padded_batch(job)
    if padded > batch:
        yield finding(
            "VERL-BAL-DP",
            f"{batch} samples a step are padded to {padded} (a multiple of lcm(DP, mini · n) = {multiple}): "
            f"{padded - batch} dummy samples ({(padded - batch) / padded:.0%} of each step) are wasted",
            where(job.value("data.train_batch_size")),
            fix=f"a train_batch_size · n that is a multiple of {multiple}",
        )


@rule(
    "VERL-CFG-LOGPROB-MBS",
    "error",
    "Static batch size: the rollout and ref need a log-prob micro batch",
    frameworks=("verl",),
)
def log_prob_micro_batch(job: Job) -> Iterator[Finding]:
    """
    Without dynamic batch size the old-log-prob pass (rollout) and the ref pass (when the ref is
    built) take `log_prob_micro_batch_size_per_gpu` samples at a time; exactly one of it and the
    deprecated `log_prob_micro_batch_size` must be set, and only `_per_gpu` works in the engine.

    Why:
    `validate_config` raises `[actor_rollout_ref.rollout] Please set at least one of ...` (or
    `You have set both ...`) at start; with only the deprecated key the worker asserts
    `log_prob_micro_batch_size_per_gpu is not None` at init.

    Versions:
    Only the deprecated key set: an error on the engine workers (verl 0.8.0 on, and 0.7.x with
    `trainer.use_legacy_worker_impl=disable`); the legacy workers, the default before, convert it to the
    per-GPU size at init (fsdp_workers.py, verl 0.4.0 … 0.7.1).

    Fix:
    Set `log_prob_micro_batch_size_per_gpu` for the rollout and, when the ref is used, for the ref.

    Source:
    verl/utils/config.py validate_config; verl/workers/engine_workers.py ActorRolloutRefWorker.init_model (verl 0.9.1).
    """
    if not _trained(job) or not _static(job):
        return
    names = [RO] + ([REF] if need(job.ref_used, "whether the ref is built") else [])
    for name in names:
        per_gpu = job.value(f"{name}.log_prob_micro_batch_size_per_gpu")
        legacy = job.value(f"{name}.log_prob_micro_batch_size")
        has_new = need(per_gpu, f"{name}.log_prob_micro_batch_size_per_gpu") is not None
        has_old = need(legacy, f"{name}.log_prob_micro_batch_size") is not None
        if has_new and has_old:
            message = (
                f"[{name}] You have set both '{name}.log_prob_micro_batch_size' AND "
                f"'{name}.log_prob_micro_batch_size_per_gpu'"
            )
        elif not has_new and not has_old:
            message = (
                f"[{name}] Please set at least one of '{name}.log_prob_micro_batch_size' or "
                f"'{name}.log_prob_micro_batch_size_per_gpu'."
            )
        elif not has_new and engine_workers(job):
            message = (
                f"{name}.log_prob_micro_batch_size is deprecated and not read by the engine: "
                f"{name}.log_prob_micro_batch_size_per_gpu is None at worker init"
            )
        else:
            continue
        yield finding(
            "VERL-CFG-LOGPROB-MBS",
            message,
            where(per_gpu, legacy),
            fix=f"{name}.log_prob_micro_batch_size_per_gpu=1 (and drop the deprecated key)",
        )


@rule(
    "VERL-ENG-VPP-MB", "error", "Interleaved pipeline: micro-batches per pass must divide by PP", frameworks=("verl",)
)
def vpp_micro_batches(job: Job) -> Iterator[Finding]:
    """
    With a virtual pipeline (VPP > 1) verl requires the number of micro-batches of every pass to be a
    multiple of `microbatch_group_size_per_vp_stage` G (megatron-core's default: PP). Static batch
    size: update M = (mini · n / DP) / ppo_micro_batch_size_per_gpu; old-log-prob and ref
    M = (padded step batch / DP) / log_prob_micro_batch_size_per_gpu. Dynamic batch size:
    `rearrange_micro_batches` rounds the count up to a multiple of G itself
    (`num_batches_divided_by=G`), which needs at least G samples per rank in every pass.

    Why:
    Static: `MegatronEngine.forward_backward_batch` asserts `micro_batches [...] must be divisible by
    num_batches_divided_by N for megatron backend`; dynamic: `rearrange_micro_batches` raises
    `Cannot satisfy max_token_len while keeping forced groups atomic [...] Requested G non-empty
    micro-batches, but a rank has only M forced groups.` Both at the first pass of step 1.

    Fix:
    Choose micro-batch sizes that give a multiple of PP micro-batches per rank; with dynamic batch
    size raise ppo_mini_batch_size · n to at least PP · DP.

    Source:
    verl/workers/engine/megatron/transformer_impl.py MegatronEngine.forward_backward_batch;
    verl/utils/seqlen_balancing.py rearrange_micro_batches (verl 0.9.1);
    megatron/core/model_parallel_config.py (microbatch_group_size_per_vp_stage defaults to PP).
    """
    if job.group_owner is None or not _trained(job):
        return  # Megatron only: FSDP has no pipeline
    owner = job.group_owner
    vpp = need(owner.vpp, f"{owner.key_prefix}.virtual_pipeline_model_parallel_size")
    if vpp is None or vpp <= 1:
        return
    group_t = owner.transformer_overrides.get("microbatch_group_size_per_vp_stage")
    group = need(group_t, "microbatch_group_size_per_vp_stage") if group_t is not None else None
    group = group or need(owner.pp, f"{owner.key_prefix}.pipeline_model_parallel_size")
    text = f"microbatch_group_size_per_vp_stage {group} (VPP {vpp})"
    if not _static(job):
        for key, per_rank, what in _pass_samples(job):
            if per_rank < group:
                yield finding(
                    "VERL-ENG-VPP-MB",
                    f"{what} pass: {per_rank} samples per rank cannot make the {group} micro-batches of "
                    f'{text} (verl: "Requested {group} non-empty micro-batches, but a rank has only '
                    f'{per_rank} forced groups.")',
                    where(job.value(key), owner.vpp),
                    fix=f"at least {group} samples per DP rank in the {what} pass (raise the batch sizes)",
                )
        return
    for key, per_rank, what, micro_t, micro in _micro_passes(job):
        if per_rank % micro:
            continue  # VERL-ENG-MICRO-DIV
        count = per_rank // micro
        if count % group:
            yield finding(
                "VERL-ENG-VPP-MB",
                f"{what} pass: {count} micro-batches per rank is not a multiple of {text}; verl: "
                f'"micro_batches ... must be divisible by num_batches_divided_by {group} for megatron '
                'backend")',
                where(micro_t, owner.vpp),
                fix=f"a {key} giving a multiple of {group} micro-batches per rank",
            )


@rule("VERL-ENG-DYN-SAME", "error", "The actor and rollout must agree on dynamic batch size", frameworks=("verl",))
def dynamic_same(job: Job) -> Iterator[Finding]:
    """
    verl's worker requires `actor.use_dynamic_bsz == rollout.log_prob_use_dynamic_bsz` (the YAML
    makes the rollout's follow the actor's; setting only one breaks it).

    Why:
    `ActorRolloutRefWorker.init_model` fails a bare `assert` after the training engines are built.

    Fix:
    Remove the rollout's override, or set both the same.

    Versions:
    The engine workers' assert: verl 0.8.0 on, and 0.7.x with `trainer.use_legacy_worker_impl=disable`
    (engine_workers.py, 0.7.0 … 0.9.1); the legacy workers (the default up to 0.7.1) read each key for
    its own pass and assert nothing (fsdp_workers.py, megatron_workers.py).

    Source:
    verl/workers/engine_workers.py ActorRolloutRefWorker.init_model (verl 0.9.1).
    """
    if not _trained(job) or not engine_workers(job):
        return
    actor_t, rollout_t = job.value(f"{A}.use_dynamic_bsz"), job.value(f"{RO}.log_prob_use_dynamic_bsz")
    actor, rollout = need(actor_t, f"{A}.use_dynamic_bsz"), need(rollout_t, f"{RO}.log_prob_use_dynamic_bsz")
    if bool(actor) != bool(rollout):
        yield finding(
            "VERL-ENG-DYN-SAME",
            f"actor.use_dynamic_bsz ({actor}) != rollout.log_prob_use_dynamic_bsz "
            f"({rollout}) (verl asserts they are equal at worker init)",
            where(rollout_t, actor_t),
            fix=f"remove {RO}.log_prob_use_dynamic_bsz (it follows the actor)",
        )
