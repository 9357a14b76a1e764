"""Resolve a launch of one of verl's generation entry points into a Job (framework ``verl-gen``).

Two Hydra apps generate responses for a dataset of prompts and write them to ``data.output_path``; no model is
trained (their ``@hydra.main``, read from each wheel into the catalogue's ``entries``):

- ``verl.trainer.main_generation`` (verl 0.4.0 … 0.7.0), config ``generation``: an ``ActorRolloutRefWorker`` with
  ``role="rollout"`` on every GPU of ``trainer.nnodes · trainer.n_gpus_per_node``; its rollout mesh asserts the
  world divides by the rollout's size (``_build_rollout``: TP up to 0.5.0, TP · DP · PP from 0.6.0;
  verl/workers/fsdp_workers.py); ``main_task`` asserts ``data.n_samples >= 1`` and ``n_samples == 1`` when
  ``rollout.temperature == 0`` (verl/trainer/main_generation.py). Prompts are padded to the world size
  (``pad_dataproto_to_divisor``) and sent ``data.batch_size`` at a time: no batch needs to divide.
- ``verl.trainer.main_generation_server`` (verl 0.6.0 …), config ``ppo_trainer``: ``world // rollout TP``
  standalone rollout replicas (``start_server``), the prompts split over them with ``np.array_split``; the same
  two asserts on ``actor_rollout_ref.rollout.n``; the output goes to ``data.output_path``, a key ``ppo_trainer``
  does not have (verl/trainer/main_generation_server.py, verl 0.9.1).

The rollout keys of ``main_generation_server`` are main_ppo's (``actor_rollout_ref.rollout.*``), so the vLLM and
SGLang rules judge its replicas as main_ppo's; ``main_generation``'s are ``rollout.*`` and only its own rules
read them (its Job has no ``rollout`` layout, which the engine rules need).
"""

from __future__ import annotations

from shardcheck.frameworks.value_kinds import ANY, COUNT, NAME, NAME_OR_NULL, NUMBER, checked
from shardcheck.frameworks.verl import verl_path
from shardcheck.frameworks.verl.config_tree import apply_overrides, bundled_defaults
from shardcheck.frameworks.verl.job_fields import command_line_notes, entry_absent, job_fields, read_model
from shardcheck.frameworks.verl.resolve import (
    ABSENT_DEFAULTS,
    config_notes,
    read_size,
    read_value,
    split_group_choices,
)
from shardcheck.frameworks.verl.verl_path import VerlPathRequest
from shardcheck.frameworks.verl.versions import (
    VersionChoice,
    catalogue,
    choose,
    entry_config,
    span,
    versions_with_entry,
)
from shardcheck.inputs.launch import Launch
from shardcheck.job import Cluster, Job, RolloutLayout
from shardcheck.origin import Origin, Traced
from shardcheck.problems import Problem

GENERATION = "verl.trainer.main_generation"
SERVER = "verl.trainer.main_generation_server"
ENTRIES = (GENERATION, SERVER)
# The keys each entry point reads (its config's names).
PREFIX = {GENERATION: "rollout", SERVER: "actor_rollout_ref.rollout"}
SAMPLES = {GENERATION: "data.n_samples", SERVER: "actor_rollout_ref.rollout.n"}
MODEL = {GENERATION: "model.path", SERVER: "actor_rollout_ref.model.path"}
OUTPUT = "data.output_path"
# The rollout sizes main_generation's worker multiplies (verl/workers/fsdp_workers.py _build_rollout): TP alone up
# to 0.5.0 ("is not divisible by infer_tp"), TP · DP · PP from 0.6.0 ("… by infer_world_size").
WORLD_SIZES_SINCE = "0.6.0"
# main_ppo's rollout keys the vLLM / SGLang rules read, for main_generation_server (verl/resolve.py VALUE_KEYS).
ENGINE_KEYS = (
    "name",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "max_model_len",
    "gpu_memory_utilization",
    "expert_parallel_size",
    "engine_kwargs.sglang.enable_dp_attention",
    "engine_kwargs.vllm",
)


def detect(launch: Launch) -> bool:
    return launch.module in ENTRIES


def _size(config, key: str, notes: list[Problem]) -> Traced:
    """A rollout size; a key this version's config lacks is 1 (RolloutConfig's field default, verl/workers/config/
    rollout.py; the worker reads it from the dataclass)."""
    if config.is_missing(key) and config.setter(key) is None:
        return Traced(1, Origin(kind="default", text=f"{key} is not in verl {config.version}'s config: 1"))
    return read_size(config.get(key), key, notes)


def resolve(
    launch: Launch,
    reading,
    path: str,
    *,
    model_config: str | None = None,
    verl_version=None,
    pinned: tuple[str, str] | None = None,
    memo: dict | None = None,
    env: dict[str, str] | None = None,
) -> Job:
    from shardcheck.inputs.hydra_overrides import parse_hydra_args

    module = launch.module or ""
    hydra = parse_hydra_args(launch.args, env)
    notes = command_line_notes(hydra)
    overrides, _, _ = split_group_choices(hydra.overrides)
    having = versions_with_entry(module)
    newest = having[-1] if having else catalogue().releases[-1]
    name = entry_config(module, newest)[1] if having else ("generation" if module == GENERATION else "ppo_trainer")
    choice = choose(name, overrides, requested=verl_version, pinned=pinned)
    if not choice.strict:  # inferred: only the versions that have this entry point count
        accepted = tuple(v for v in choice.accepted if v in having)
        releases = [v for v in accepted if v in catalogue().releases]
        version = (releases or list(accepted) or list(having) or [newest])[-1]
        choice = VersionChoice(
            version,
            "inferred" if accepted else "default",
            accepted,
            f"verl {version}: the newest version with {module} that accepts every key of this script"
            + (f" (accepted: {span(accepted)})" if accepted else ""),
        )
    version = choice.version
    if isinstance(verl_version, VerlPathRequest):
        given = verl_path.load(verl_version.directory)
        found = given.entry_config(module)
        if found is None:
            notes.append(entry_absent(launch, module, given.label, having))
        defaults = given.defaults(found[1] if found else name)
    else:
        if version not in having:
            notes.append(entry_absent(launch, module, version, having))
            version = newest
        defaults = bundled_defaults(name, version)
    config = apply_overrides(defaults, overrides)
    notes.extend(config_notes(config))
    cluster = Cluster(
        nnodes=read_size(config.get("trainer.nnodes"), "trainer.nnodes", notes),
        devices_per_node=read_size(config.get("trainer.n_gpus_per_node"), "trainer.n_gpus_per_node", notes),
        device=read_value(config, "trainer.device", NAME, notes),
    )
    ro = PREFIX[module]
    engine = read_value(config, f"{ro}.name", NAME, notes)
    sizes = {
        "tp": read_size(config.get(f"{ro}.tensor_model_parallel_size"), f"{ro}.tensor_model_parallel_size", notes),
        "dp": _size(config, f"{ro}.data_parallel_size", notes),
        "pp": _size(config, f"{ro}.pipeline_model_parallel_size", notes),
    }
    model_path, model, problem = read_model(config, MODEL[module], notes, model_config, path)
    values = {
        SAMPLES[module]: checked(SAMPLES[module], config.get(SAMPLES[module]), ANY, notes),
        f"{ro}.temperature": checked(f"{ro}.temperature", config.get(f"{ro}.temperature"), NUMBER, notes),
        f"{ro}.name": engine,
        f"{ro}.tensor_model_parallel_size": sizes["tp"],
        f"{ro}.data_parallel_size": sizes["dp"],
        f"{ro}.pipeline_model_parallel_size": sizes["pp"],
    }
    output = config.get(OUTPUT)
    absent = config.is_missing(OUTPUT) and config.setter(OUTPUT) is None
    values[OUTPUT] = (
        Traced(None, output.origin, f"{OUTPUT} is not in verl {config.version}'s config") if absent else output
    )
    if module == GENERATION:
        values["data.batch_size"] = checked("data.batch_size", config.get("data.batch_size"), COUNT, notes)
        values[f"{ro}.mode"] = read_value(config, f"{ro}.mode", NAME_OR_NULL, notes)
    else:
        for key in ENGINE_KEYS:
            full = f"{ro}.{key}"
            if full not in values:
                traced = config.get(full)
                if not traced.known and config.is_missing(full) and full in ABSENT_DEFAULTS:
                    # a key this release's YAML leaves out: what verl or the engine does without it (as main_ppo)
                    value, text = ABSENT_DEFAULTS[full]
                    traced = Traced(value, Origin(kind="default", text=text))
                values[full] = traced
    rollout = RolloutLayout(engine=engine, **sizes) if module == SERVER else None
    return Job(
        path=path,
        framework="verl-gen",
        **job_fields(choice, config, defaults, hydra, config_name=name),
        entry=launch.entry,
        cluster=cluster,
        strategy=Traced(None, Origin(kind="default", text=f"{module} trains no model"), "no training engine"),
        layouts=(),
        ref_used=Traced(False, Origin(kind="default", text=f"{module} builds no reference model")),
        critic_used=None,
        model_path=model_path,
        model=model,
        model_problem=problem,
        notes=tuple(notes),
        rollout=rollout,
        values=values,
    )
