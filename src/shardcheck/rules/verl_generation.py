"""verl's generation entry points (framework ``verl-gen``): what ``main_generation`` and ``main_generation_server``
assert or need at start-up (frameworks/verl/gen/resolve.py)."""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.frameworks.verl.gen.resolve import GENERATION, OUTPUT, PREFIX, SAMPLES, SERVER, WORLD_SIZES_SINCE
from shardcheck.frameworks.verl.versions import SYNC_ROLLOUT_REMOVED, at_least, span, versions_with_entry
from shardcheck.job import Job
from shardcheck.rules.base import Finding, finding, need, rule, where


def _module(job: Job) -> str:
    return SERVER if SERVER in job.entry else GENERATION


@rule(
    "VERL-GEN-SAMPLES", "error", "Generation samples: at least one, and one at temperature 0", frameworks=("verl-gen",)
)
def generation_samples(job: Job) -> Iterator[Finding]:
    """
    Both generation entry points draw `n` samples per prompt (`data.n_samples` for `main_generation`,
    `actor_rollout_ref.rollout.n` for `main_generation_server`); greedy decoding (temperature 0) gives the
    same answer every time, so they refuse more than one.

    Why:
    `AssertionError: When temperature=0, n_samples must be 1.` or `AssertionError: n_samples should always
    >= 1` before any server starts.

    Fix:
    One sample at temperature 0, or a temperature above 0.

    Source:
    verl/trainer/main_generation.py main_task (verl 0.4.0 … 0.7.0); verl/trainer/main_generation_server.py main
    (verl 0.9.1).
    """
    module = _module(job)
    samples_t = job.value(SAMPLES[module])
    temp_t = job.value(f"{PREFIX[module]}.temperature")
    samples, temperature = need(samples_t, SAMPLES[module]), need(temp_t, f"{PREFIX[module]}.temperature")
    if temperature == 0.0 and samples != 1:
        yield finding(
            "VERL-GEN-SAMPLES",
            f"When temperature=0, n_samples must be 1. ({SAMPLES[module]} = {samples})",
            where(samples_t, temp_t),
            fix=f"{SAMPLES[module]}=1, or {PREFIX[module]}.temperature above 0",
        )
    elif isinstance(samples, int) and samples < 1:
        yield finding(
            "VERL-GEN-SAMPLES",
            f"n_samples should always >= 1 ({SAMPLES[module]} = {samples})",
            where(samples_t),
            fix=f"{SAMPLES[module]}=1",
        )


@rule(
    "VERL-GEN-OUTPUT",
    "error",
    "main_generation_server writes to data.output_path, which verl's config does not have",
    frameworks=("verl-gen",),
)
def generation_output(job: Job) -> Iterator[Finding]:
    """
    `main_generation_server` composes main_ppo's `ppo_trainer` config, which has no `data.output_path`, and reads
    that key only after every response is generated, to save them.

    Why:
    The whole generation runs, then `config.data.output_path` fails (`ConfigAttributeError: Key 'output_path'
    is not in struct`): nothing is saved.

    Fix:
    Add the key on the command line: `+data.output_path=/path/to/out.parquet`.

    Source:
    verl/trainer/main_generation_server.py main (`config.data.output_path`, verl 0.6.0 … 0.9.1);
    verl/trainer/config/ppo_trainer.yaml `data` (no output_path).
    """
    if _module(job) != SERVER:
        return
    output = job.value(OUTPUT)
    if not output.known and output.unknown and "is not in verl" in output.unknown:
        yield finding(
            "VERL-GEN-OUTPUT",
            f"{OUTPUT} is not in verl {job.framework_version}'s ppo_trainer config: the responses are generated, "
            "then saving them fails (ConfigAttributeError)",
            where(job.cluster.nnodes, job.cluster.devices_per_node, job.model_path, job.value(SAMPLES[SERVER])),
            fix=f"+{OUTPUT}=/path/to/output.parquet",
        )


@rule(
    "VERL-GEN-WORLD",
    "error",
    "main_generation's world must divide by the rollout's size",
    frameworks=("verl-gen",),
)
def generation_world(job: Job) -> Iterator[Finding]:
    """
    `main_generation` starts one rollout worker per GPU of `trainer.nnodes · trainer.n_gpus_per_node` and builds
    the rollout's device mesh over them: the world must divide by the rollout's size (TP up to verl 0.5.0;
    TP · DP · PP from 0.6.0, a missing key counting 1).

    Why:
    `AssertionError: rollout world_size: W is not divisible by infer_tp: T` (≤ 0.5.0) or `… by
    infer_world_size: S` (0.6.0 …) when the workers build the model.

    Fix:
    Choose a rollout size dividing the world, or a world the rollout size divides.

    Source:
    verl/workers/fsdp_workers.py ActorRolloutRefWorker._build_rollout (verl 0.4.0 … 0.7.0).
    """
    if _module(job) != GENERATION:
        return
    ro = PREFIX[GENERATION]
    world = need(job.cluster.world, job.world_name)
    tp_t = job.value(f"{ro}.tensor_model_parallel_size")
    tp = need(tp_t, f"{ro}.tensor_model_parallel_size")
    if at_least(job.framework_version, WORLD_SIZES_SINCE):
        dp_t, pp_t = job.value(f"{ro}.data_parallel_size"), job.value(f"{ro}.pipeline_model_parallel_size")
        size = tp * need(dp_t, f"{ro}.data_parallel_size") * need(pp_t, f"{ro}.pipeline_model_parallel_size")
        said, cited = f"infer_world_size: {size}", (tp_t, dp_t, pp_t)
    else:
        size, said, cited = tp, f"infer_tp: {tp}", (tp_t,)
    if world % size:
        yield finding(
            "VERL-GEN-WORLD",
            f"rollout world_size: {world} is not divisible by {said}",
            where(*cited, job.cluster.devices_per_node),
            fix=f"{ro}.tensor_model_parallel_size dividing {world}",
        )


@rule(
    "VERL-GEN-REPLICAS",
    "error",
    "main_generation_server starts world // rollout TP replicas",
    frameworks=("verl-gen",),
)
def generation_replicas(job: Job) -> Iterator[Finding]:
    """
    `main_generation_server` starts `world // rollout TP` standalone rollout replicas and splits the prompts
    over them with `np.array_split`. A TP above the world gives none; a TP that does not divide the world leaves
    the remainder of the GPUs idle (a warning).

    Why:
    No replica: `ValueError: number sections must be larger than 0.` once the servers are up. Idle GPUs: no
    error, a slower run.

    Fix:
    A rollout TP dividing `trainer.nnodes · trainer.n_gpus_per_node`.

    Source:
    verl/trainer/main_generation_server.py start_server and generate (verl 0.6.0 … 0.9.1); numpy
    array_split.
    """
    if _module(job) != SERVER:
        return
    ro = PREFIX[SERVER]
    world = need(job.cluster.world, job.world_name)
    tp_t = job.value(f"{ro}.tensor_model_parallel_size")
    tp = need(tp_t, f"{ro}.tensor_model_parallel_size")
    replicas = world // tp
    if replicas == 0:
        yield finding(
            "VERL-GEN-REPLICAS",
            f"rollout TP {tp} is above the world size {world}: world // TP = 0 replicas, and splitting the "
            "prompts over them fails (ValueError: number sections must be larger than 0.)",
            where(tp_t, job.cluster.devices_per_node),
            fix=f"{ro}.tensor_model_parallel_size={world} or less, dividing it",
        )
    elif world % tp:
        yield finding(
            "VERL-GEN-REPLICAS",
            f"{replicas} replicas of rollout TP {tp} on {world} devices: {world - replicas * tp} stay idle",
            where(tp_t, job.cluster.devices_per_node),
            fix=f"{ro}.tensor_model_parallel_size dividing {world}",
            severity="warning",
        )


# What each rollout does when main_generation asks it for sequences synchronously once sync mode is gone (verl 0.7.0:
# verl/workers/rollout/base.py _ROLLOUT_REGISTRY has only ("vllm", "async") and ("sglang", "async")).
_NO_SYNC = {
    "vllm": 'vLLMAsyncRollout.generate_sequences raises NotImplementedError ("vLLMAsyncRollout does not support '
    'synchronous generate_sequences()") once the model is loaded',
    "sglang": "the SGLang ServerAdapter has no generate_sequences: BaseRollout's raises NotImplementedError once the "
    "model is loaded",
    "hf": 'get_rollout_class asserts "Rollout hf with mode async not found" while the workers build the model',
}


@rule(
    "VERL-GEN-SYNC",
    "error",
    "main_generation needs a synchronous rollout, which verl 0.7.0 no longer has",
    frameworks=("verl-gen",),
)
def generation_sync(job: Job) -> Iterator[Finding]:
    """
    `main_generation` calls the rollout worker's `generate_sequences` synchronously. verl 0.7.0 removed the
    synchronous rollouts: `mode: sync` is refused, and none of the async ones generates that way, so
    `main_generation` of verl 0.7.0 cannot produce a response with any rollout (verl's own
    `generation.yaml` says so, issue #4682). Up to 0.6.1 the sync rollouts exist. Under an inferred verl version
    this is a warning: the older releases that have `main_generation` work.

    Why:
    `mode=sync`: `ValueError: Rollout mode 'sync' has been removed.` (RolloutConfig). vLLM or SGLang:
    `NotImplementedError` at the first batch, after the model is loaded. `hf`: an `AssertionError` while the
    workers build it.

    Versions:
    verl 0.7.0 (the last release with `main_generation`); 0.4.0 … 0.6.1 generate synchronously.

    Fix:
    Run `main_generation` of verl ≤ 0.6.1, or `verl.trainer.main_generation_server` (0.6.0 on).

    Source:
    verl/trainer/main_generation.py (`wg.generate_sequences`), verl/workers/fsdp_workers.py
    `_build_rollout` (`get_rollout_class(name, mode)`), verl/workers/rollout/base.py `_ROLLOUT_REGISTRY` and
    `BaseRollout.generate_sequences`, verl/workers/rollout/vllm_rollout/vllm_rollout.py
    `vLLMAsyncRollout.generate_sequences`, verl/workers/config/rollout.py `RolloutConfig.__post_init__`,
    verl/trainer/config/generation.yaml (verl 0.7.0).
    """
    if _module(job) != GENERATION or not at_least(job.framework_version, SYNC_ROLLOUT_REMOVED):
        return
    ro = PREFIX[GENERATION]
    name_t, mode_t = job.value(f"{ro}.name"), job.value(f"{ro}.mode")
    name, mode = need(name_t, f"{ro}.name"), need(mode_t, f"{ro}.mode")
    working = [v for v in versions_with_entry(GENERATION) if not at_least(v, SYNC_ROLLOUT_REMOVED)]
    if mode == "sync":
        message = "Rollout mode 'sync' has been removed (RolloutConfig)"
        origin = where(mode_t, name_t)
    else:
        message = _NO_SYNC.get(str(name), f"no async rollout {name!r} generates synchronously")
        origin = where(name_t, mode_t)
    # the version judged decides, however it was chosen (VERL-VERSIONS-DIFFER names the releases that differ)
    yield finding(
        "VERL-GEN-SYNC",
        f"verl {job.framework_version}'s main_generation cannot generate: {message}",
        origin,
        fix=f"run main_generation of verl {span(working)}, or verl.trainer.main_generation_server",
    )
