"""Resolve a launch of one of verl's SFT trainers into a Job (framework ``verl-sft``).

Two trainers, each a Hydra app with its own config (their ``@hydra.main``, read from each wheel into the catalogue):

- ``verl.trainer.fsdp_sft_trainer`` (verl 0.4.0 … 0.7.0), config ``sft_trainer``: one FSDP model over the whole
  torchrun world; Ulysses sequence parallelism splits it into a (dp, sp) mesh (``run_sft``:
  ``init_device_mesh(mesh_shape=(world_size // sp, sp))``); ``FSDPSFTTrainer._normalize_config_bsz`` asserts the
  global batch divides by DP and the per-DP batch by ``micro_batch_size_per_gpu``; ``_build_model_optimizer``
  asserts ``use_remove_padding`` when SP > 1 (verl/trainer/fsdp_sft_trainer.py, verl 0.7.0).
- ``verl.trainer.sft_trainer`` (verl 0.6.0 …), config ``sft_trainer_engine`` with the groups ``engine`` /
  ``optim`` / ``model`` (``engine=megatron optim=megatron`` on the command line): the training engine of that
  group over the torchrun world; each DP rank loads ``train_batch_size // dp`` samples a step
  (``SFTTrainer._build_dataloader``, verl/trainer/sft_trainer.py, verl 0.9.1).

The world is torchrun's (``initialize_global_process_group``); ``trainer.nnodes`` / ``trainer.n_gpus_per_node`` of
these configs are not what the trainers run on.
"""

from __future__ import annotations

from shardcheck.errors import UsageError
from shardcheck.frameworks.torchrun import exported_values, torchrun_cluster
from shardcheck.frameworks.value_kinds import ANY, COUNT, FLAG, NAME, checked
from shardcheck.frameworks.verl import custom_config, verl_path
from shardcheck.frameworks.verl.config_tree import VerlDefaults, apply_overrides, bundled_defaults
from shardcheck.frameworks.verl.job_fields import command_line_notes, entry_absent, job_fields, read_model
from shardcheck.frameworks.verl.resolve import config_notes, engine_layout, read_size, read_value
from shardcheck.frameworks.verl.verl_path import VerlPathRequest
from shardcheck.frameworks.verl.versions import (
    catalogue,
    choose,
    entry_config,
    entry_files,
    versions_with_entry,
)
from shardcheck.inputs.hydra_overrides import OverrideItem
from shardcheck.inputs.launch import Launch
from shardcheck.job import FsdpLayout, Job
from shardcheck.origin import Origin, Traced
from shardcheck.problems import Kind, Problem

FSDP_SFT = "verl.trainer.fsdp_sft_trainer"
ENGINE_SFT = "verl.trainer.sft_trainer"
ENTRIES = (FSDP_SFT, ENGINE_SFT)
# The config each trainer's @hydra.main names (the catalogue's ``entries`` say which versions have it).
CONFIG_NAMES = {FSDP_SFT: "sft_trainer", ENGINE_SFT: "sft_trainer_engine"}
FSDP_STRATEGIES = ("fsdp", "fsdp2")
# The keys the SFT rules read, per trainer (verl 0.7.0 sft_trainer.yaml; verl 0.9.1 sft_trainer_engine.yaml).
VALUE_KEYS = {
    FSDP_SFT: ("data.train_batch_size", "data.micro_batch_size_per_gpu", "use_remove_padding"),
    ENGINE_SFT: ("data.train_batch_size", "data.micro_batch_size_per_gpu", "data.use_dynamic_bsz"),
}
VALUE_KINDS = {"data.train_batch_size": COUNT, "data.micro_batch_size_per_gpu": COUNT}
# The engine dataclass's ``strategy`` default, for an engine YAML without the key (engine/megatron.yaml):
# verl/workers/config/engine.py (verl 0.9.1) McoreEngineConfig "megatron", FSDPEngineConfig "fsdp",
# VeOmniEngineConfig "veomni", TorchtitanEngineConfig "torchtitan", AutomodelEngineConfig "automodel".
ENGINE_STRATEGY = {
    "verl.workers.config.McoreEngineConfig": "megatron",
    "verl.workers.config.FSDPEngineConfig": "fsdp",
    "verl.workers.config.VeOmniEngineConfig": "veomni",
    "verl.workers.config.TorchtitanEngineConfig": "torchtitan",
    "verl.workers.config.AutomodelEngineConfig": "automodel",
}


def _engine_strategy(config, notes: list[Problem]) -> Traced:
    """``engine.strategy``, or the default of the dataclass its ``_target_`` names when the YAML leaves it out."""
    if config.is_missing("engine.strategy"):
        target = config.get("engine._target_")
        if target.known and target.value in ENGINE_STRATEGY:
            value = ENGINE_STRATEGY[target.value]
            return Traced(value, Origin(kind="default", text=f"default of {target.value}: strategy = {value}"))
    return read_value(config, "engine.strategy", NAME, notes)


def detect(launch: Launch) -> bool:
    return launch.module in ENTRIES


def _group_choices(
    items: tuple[OverrideItem, ...], groups: set[str]
) -> tuple[tuple[OverrideItem, ...], tuple[OverrideItem, ...]]:
    """(key overrides, group choices): ``engine=megatron`` selects an option of the group ``engine``."""
    keys, choices = [], []
    for item in items:
        group = item.key.removeprefix("override ").split("@")[0]
        if group in groups and item.kind in ("change", "force_add") and isinstance(item.value, str):
            choices.append(item)
        else:
            keys.append(item)
    return tuple(keys), tuple(choices)


def _default(value, text: str) -> Traced:
    return Traced(value, Origin(kind="default", text=text))


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
    from shardcheck.inputs.hydra_overrides import parse_hydra_args

    module = launch.module or ""
    hydra = parse_hydra_args(launch.args, env)
    notes = command_line_notes(hydra)
    name = CONFIG_NAMES[module]
    having = versions_with_entry(module)
    newest = next((v for v in reversed(catalogue().versions) if v in having), catalogue().versions[-1])
    groups = {n.split("/")[0] for n in entry_files(newest, "verl/trainer/config") if "/" in n}
    overrides, choices = _group_choices(hydra.overrides, groups if module == ENGINE_SFT else set())
    chosen_groups = {c.key.removeprefix("override ").split("@")[0] for c in choices}
    # a key under a group chosen on the command line is judged against that option, not the default one
    inferable = tuple(o for o in overrides if o.key.split(".")[0] not in chosen_groups)
    choice = choose(name, inferable, requested=verl_version, pinned=pinned)
    version = choice.version
    given = verl_path.load(verl_version.directory) if isinstance(verl_version, VerlPathRequest) else None
    own = given.entry_config(module) if given is not None else None
    if given is not None and own is not None:  # --verl-path: the directory's own config, composed by Hydra
        folder, name = own
        label = f"verl at {given.given}"
        try:
            tree = custom_config.compose_files(given.entry_files(folder), name, [c.text for c in choices], label)
        except custom_config.CustomConfigUnread as exc:
            if not choices:
                raise UsageError(f"--verl-path {given.given}: {exc.reason}") from None
            notes.append(Problem(Kind.HYDRA_REJECTED, choices[0].word, {"text": choices[0].text, "reason": exc.reason}))
            tree = custom_config.compose_files(given.entry_files(folder), name, [], label)
        source = f"{folder}/{name}.yaml of {label} composed by Hydra ({given.recognised})"
        defaults = VerlDefaults(tree, given.label, source, name)
    else:
        if module not in version_doc_entries(version):
            notes.append(entry_absent(launch, module, version, having))
            version = newest
        folder, name = entry_config(module, version) or ("verl/trainer/config", name)
        if choices:
            label = f"verl {version}"
            try:
                tree = custom_config.compose_files(entry_files(version, folder), name, [c.text for c in choices], label)
            except custom_config.CustomConfigUnread as exc:
                notes.append(
                    Problem(Kind.HYDRA_REJECTED, choices[0].word, {"text": choices[0].text, "reason": exc.reason})
                )
                tree = bundled_defaults(name, version).tree
            source = f"verl {version}'s {folder}/{name}.yaml composed by Hydra with {' '.join(c.text for c in choices)}"
            defaults = VerlDefaults(tree, version, source, name)
        else:
            defaults = bundled_defaults(name, version)
    config = apply_overrides(defaults, overrides)
    notes.extend(config_notes(config))
    cluster = torchrun_cluster(launch, exported_values(reading, launch), notes)
    if module == FSDP_SFT:
        strategy = read_value(config, "model.strategy", NAME, notes)
        fsdp = FsdpLayout(
            role="actor",
            key_prefix="model.fsdp_config",
            strategy=strategy,
            sp=read_size(config.get("ulysses_sequence_parallel_size"), "ulysses_sequence_parallel_size", notes),
            fsdp_size=_default(-1, f"verl {version} fsdp_sft_trainer: one FSDP mesh over the whole world"),
            model_dtype=read_value(config, "model.fsdp_config.model_dtype", NAME, notes),
            param_offload=read_value(config, "model.fsdp_config.offload_params", FLAG, notes),
            optimizer_offload=read_value(config, "model.fsdp_config.cpu_offload", FLAG, notes),
            offload_policy=_default(False, "fsdp_sft_trainer: no offload policy"),
            sp_key="ulysses_sequence_parallel_size",
        )
        fsdp_layouts, layouts = (fsdp,), ()
        model_key = "model.partial_pretrain"
    else:
        strategy = _engine_strategy(config, notes)
        fsdp_layouts, layouts = (), ()
        if strategy.known and strategy.value in FSDP_STRATEGIES:
            fsdp_layouts = (
                FsdpLayout(
                    role="actor",
                    key_prefix="engine",
                    strategy=strategy,
                    sp=read_size(
                        config.get("engine.ulysses_sequence_parallel_size"),
                        "engine.ulysses_sequence_parallel_size",
                        notes,
                    ),
                    fsdp_size=read_value(config, "engine.fsdp_size", ANY, notes),
                    model_dtype=read_value(config, "engine.model_dtype", NAME, notes),
                    param_offload=read_value(config, "engine.param_offload", FLAG, notes),
                    optimizer_offload=read_value(config, "engine.optimizer_offload", FLAG, notes),
                    offload_policy=read_value(config, "engine.offload_policy", FLAG, notes),
                    sp_key="engine.ulysses_sequence_parallel_size",
                ),
            )
        elif strategy.known and strategy.value == "megatron":
            layouts = (engine_layout(config, "actor", notes, base="engine"),)
        model_key = "model.path"
    model_path, model, problem = read_model(config, model_key, notes, model_config, path)
    values = {key: checked(key, config.get(key), VALUE_KINDS.get(key, ANY), notes) for key in VALUE_KEYS[module]}
    return Job(
        path=path,
        framework="verl-sft",
        **job_fields(choice, config, defaults, hydra, config_name=name, version=version),
        entry=launch.entry,
        cluster=cluster,
        strategy=strategy,
        layouts=layouts,
        ref_used=_default(False, "an SFT trainer builds one model"),
        critic_used=None,
        model_path=model_path,
        model=model,
        model_problem=problem,
        notes=tuple(notes),
        values=values,
        fsdp_layouts=fsdp_layouts,
    )


def version_doc_entries(version: str) -> set[str]:
    """The Hydra entry points verl ``version`` has (the catalogue's ``entries``)."""
    from shardcheck.frameworks.verl.versions import version_doc

    return set(version_doc(version).get("entries", {}))
