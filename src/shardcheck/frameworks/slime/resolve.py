"""Resolve a slime launch (``ray job submit ... -- python3 train.py --actor-num-nodes 8 ...``).

slime (THUDM/slime): the trainer's world is ``--actor-num-nodes × --actor-num-gpus-per-node``
(slime/backends/megatron_utils/arguments.py ``megatron_parse_args`` sets ``args.world_size`` so),
and Megatron-LM's own ``validate_args`` runs on it; the rollout runs on ``--rollout-num-gpus`` GPUs
(with ``--colocate`` and none given: the actor's, slime/utils/arguments.py ``slime_validate_args``)
in engines of ``--rollout-num-gpus-per-engine`` GPUs each (slime/utils/http_utils.py
``get_rollout_num_engines``: rollout_num_gpus // per engine). SGLang's DP attention (``--sglang-dp-size``)
splits an engine's TP group; it does not multiply the engine's GPUs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from shardcheck.frameworks.megatron_lm.flags import DEFAULT_MINOR, read_flags
from shardcheck.frameworks.megatron_lm.resolve import flag_notes, megatron_layout, model_from_flags
from shardcheck.frameworks.slime.flags import DEFAULT_OF, slime_flags
from shardcheck.inputs.launch import Launch
from shardcheck.job import Cluster, Job, MegatronLayout, RolloutLayout
from shardcheck.origin import Origin, Traced
from shardcheck.problems import Problem

SLIME_SCRIPTS = frozenset({"train.py", "train_async.py"})
_SLIME_HINTS = (
    "--actor-num-nodes",
    "--actor-num-gpus-per-node",
    "--rollout-num-gpus",
    "--rollout-batch-size",
    "--hf-checkpoint",
    "--colocate",
)


def is_slime_entry(launch: Launch) -> bool:
    """slime's train.py / train_async.py: named so, with at least one of slime's own flags."""
    if launch.script is None or launch.script.rsplit("/", 1)[-1] not in SLIME_SCRIPTS:
        return False
    return any((w.text or "").split("=", 1)[0] in _SLIME_HINTS for w in launch.args)


def ray_cluster_gpus(commands, launch: Launch) -> Traced | None:
    """The GPUs of the Ray cluster the script itself starts, when that is certain: exactly one
    ``ray start --head --num-gpus N`` that always runs and no other ``ray start`` anywhere in the script's
    commands (a worker joining, even inside an ``ssh``/``pdsh`` string, makes the cluster larger than the
    script says). None otherwise (a cluster started elsewhere, ``--num-gpus`` unknown or left to Ray's detection).
    A rollout on external engines (``--rollout-external-engine-addrs``) needs no cluster GPUs: None."""
    if any((w.text or "").split("=", 1)[0] == "--rollout-external-engine-addrs" for w in launch.args):
        return None
    heads, others = [], 0
    for command in commands:
        texts = [w.text for w in command.fields]
        base = (texts[0] or "").rsplit("/", 1)[-1] if texts else ""
        if base == "ray" and len(texts) > 1 and texts[1] == "start":
            if "--head" in texts and command.condition is None:
                heads.append(command)
            else:
                others += 1
        elif any("ray start" in " ".join(seg.text or " " for seg in w.segs) for w in command.fields[1:]):
            others += 1  # e.g. ssh HOST "ray start --address=..." (known parts of the words)
    if len(heads) != 1 or others:
        return None
    words = heads[0].fields
    for i, w in enumerate(words):
        text = w.text or ""
        if text == "--num-gpus" and i + 1 < len(words):
            value = words[i + 1]
        elif text.startswith("--num-gpus="):
            value = w
        else:
            continue
        digits = (value.text or "").split("=", 1)[-1]
        if value.text is None or not (digits.isascii() and digits.isdigit()):
            return None  # not known statically: the cluster is not judged
        return Traced(int(digits), value.origin)
    return None


def resolve_slime(
    launch: Launch,
    path: str,
    *,
    model_config: str | None = None,
    megatron_core: str | None = None,
    commands=(),
) -> Job:
    """``megatron_core``: the megatron-core minor whose Megatron-LM flags slime parses (else DEFAULT_MINOR);
    ``commands``: the script's commands (the Ray cluster it starts)."""
    flags = read_flags(launch.args, slime_flags(megatron_core or DEFAULT_MINOR), DEFAULT_OF)
    notes = flag_notes(flags)
    layout = megatron_layout(flags, notes)
    layouts = _roles(layout, flags, path, notes)
    model, problem, named = model_from_flags(flags, path, notes, model_config=model_config)
    g = flags.get
    cluster = Cluster(
        nnodes=g("--actor-num-nodes"),
        devices_per_node=g("--actor-num-gpus-per-node"),
        device=Traced("gpu", Origin(kind="default", text="GPUs")),
    )
    values = dict(flags.values)
    values["rollout GPUs"] = _rollout_gpus(flags)
    cluster_gpus = ray_cluster_gpus(commands, launch)
    if cluster_gpus is not None:
        values["ray cluster GPUs"] = cluster_gpus
    rollout = RolloutLayout(
        engine=Traced("sglang", Origin(kind="default", text="slime's rollout engine: SGLang")),
        tp=g("--rollout-num-gpus-per-engine"),
        dp=g("--sglang-dp-size"),
        pp=g("--sglang-pp-size"),
        ep=g("--sglang-ep-size"),
        dp_attention=g("--sglang-enable-dp-attention"),
        gpus=values["rollout GPUs"],
    )
    return Job(
        path=path,
        framework="slime",
        framework_version="main",
        entry=launch.entry,
        config_name="-",
        config_source="slime + Megatron-LM flags (slime/utils/arguments.py)",
        cluster=cluster,
        strategy=Traced("megatron", Origin(kind="default", text="slime's Megatron backend")),
        layouts=layouts,
        ref_used=Traced(False, Origin(kind="default", text="one process-group build")),
        model_path=named,
        model=model,
        model_problem=problem,
        notes=tuple(notes),
        open_arguments=tuple(flags.open_arguments),
        rollout=rollout,
        values=values,
    )


# The parallel sizes a --megatron-config-path role entry may set (args attribute names), and the layout field.
_ROLE_SIZES = {
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp",
    "expert_model_parallel_size": "ep",
    "expert_tensor_parallel_size": "etp_setting",
}
_ROLE_FILE_CAP = 1 << 20


def _roles(layout: MegatronLayout, flags, path: str, notes: list[Problem]) -> tuple[MegatronLayout, ...]:
    """The actor, and the critic slime builds for ``--advantage-estimator ppo`` (on the actor's GPUs, with the
    actor's arguments), each with the sizes its ``--megatron-config-path`` entry overrides
    (slime/utils/arguments.py parse_megatron_role_args / _apply_megatron_role_overrides;
    slime/ray/placement_group.py)."""
    estimator = flags.get("--advantage-estimator")
    roles = ["actor"] + (["critic"] if not estimator.known or estimator.value == "ppo" else [])
    config = flags.get("--megatron-config-path")
    entries, why = {}, None
    if not config.known:
        why = f"--megatron-config-path is unknown ({config.unknown})"
    elif config.value is not None:
        entries, why = _role_entries(str(config.value), path)
    out = []
    for role in roles:
        lay = replace(layout, role=role)
        if why is not None:
            reason = f"{why}; its role entries may set the {role}'s sizes"
            lay = replace(lay, **{f: Traced(None, config.origin, reason) for f in _ROLE_SIZES.values()})
        for key, value in entries.get(role, {}).items():
            if key in _ROLE_SIZES:
                origin = Origin(
                    kind="script",
                    path=str(config.value),
                    line=None,
                    text=f"{role} entry of {config.value}: {key}: {value}",
                    via=(config.origin,),
                )
                lay = replace(lay, **{_ROLE_SIZES[key]: Traced(value, origin)})
        out.append(lay)
    return tuple(out)


def _role_entries(name: str, script: str) -> tuple[dict[str, dict], str | None]:
    """``{role: overrides}`` from a --megatron-config-path YAML (read as data, yaml.safe_load), or why not."""
    file = Path(name)
    if not file.is_absolute():
        file = Path(script).resolve().parent / file
    from shardcheck.inputs import files, read_policy

    if not files.is_regular(file):
        return {}, f"--megatron-config-path {name} is not a readable file here"
    refused = read_policy.refusal(file)  # a file the script names: the source policy
    if refused is not None:
        return {}, f"--megatron-config-path {name} is not read: {refused}"
    import yaml

    try:
        doc = yaml.safe_load(files.read_regular_text(file, limit=_ROLE_FILE_CAP, what="")) or {}
    except (files.UnreadableFile, ValueError, yaml.YAMLError, RecursionError) as exc:
        return {}, f"--megatron-config-path {name} cannot be read ({type(exc).__name__})"
    entries = doc.get("megatron") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        return {}, f"--megatron-config-path {name} has no top-level 'megatron' list"
    out: dict[str, dict] = {}
    for entry in entries:
        if isinstance(entry, dict) and entry.get("role") in ("actor", "critic"):
            overrides = entry.get("overrides") or entry.get("args") or {}
            if isinstance(overrides, dict):
                out[entry["role"]] = overrides
    return out, None


def _rollout_gpus(flags) -> Traced:
    given = flags.get("--rollout-num-gpus")
    colocate = flags.get("--colocate")
    if not given.known or given.value is not None:
        return given
    if not colocate.known:
        return Traced(None, colocate.origin, colocate.unknown)
    if not colocate.value:
        return given  # None: no --rollout-num-gpus and not colocated
    nodes, gpus = flags.get("--actor-num-nodes"), flags.get("--actor-num-gpus-per-node")
    value = nodes.value * gpus.value if nodes.known and gpus.known else None
    return Traced.derived(
        value, "--colocate: rollout GPUs = --actor-num-nodes × --actor-num-gpus-per-node", colocate, nodes, gpus
    )


# -- the framework interface (frameworks/interface.py) ------------------------------------------


def detect(launch: Launch) -> bool:
    """Whether ``launch`` runs slime's train.py / train_async.py."""
    return is_slime_entry(launch)


def resolve(
    launch: Launch, reading, path: str, *, model_config: str | None = None, megatron_core: str | None = None
) -> Job:
    """The Job slime would build from the launch's flags."""
    return resolve_slime(
        launch,
        path,
        model_config=model_config,
        megatron_core=megatron_core,
        commands=reading.commands if reading else (),
    )
