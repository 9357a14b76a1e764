"""torchrun's world, shared by the frameworks launched with it (Megatron-LM's pretrain_*.py, verl's SFT trainers)."""

from __future__ import annotations

from shardcheck.inputs.launch import Launch
from shardcheck.job import Cluster
from shardcheck.origin import Origin, Traced
from shardcheck.problems import Problem


def _default(value, text: str) -> Traced:
    return Traced(value, Origin(kind="default", text=text))


def torchrun_cluster(launch: Launch, exported: dict[str, Traced], notes: list[Problem]) -> Cluster:
    """torchrun's nodes and processes per node (torch/distributed/run.py: both default to 1; the
    ``PET_*`` environment variables stand for the options)."""
    given = launch.launcher_args or {}
    who = "deepspeed" if "deepspeed" in launch.launcher else "torchrun"

    def size(option: str, env: str | None, default: Traced | None = None) -> Traced:
        word = given.get(option)
        if word is not None:
            where = word.value_origin(0).first_script_line() or word.origin
            text = word.text
            if text is None:
                return Traced(None, where, f"{who} {option} is unknown ({word.unknowns[0].unknown})")
            if not (text.isascii() and text.isdigit()):
                return Traced(None, where, f"{who} {option} {text[:40]} is not a fixed number")
            if len(text) > 12:  # past any cluster, and past int()'s 4,300-digit limit for long ones
                return Traced(
                    None, where, f"{who} {option} {text[:20]}… ({len(text)} digits) is past shardcheck's bound"
                )
            if int(text) < 1:
                return Traced(None, where, f"{who} {option} {text} is not a positive number")
            return Traced(
                int(text), Origin(kind="script", path=where.path, line=where.line, text=f"{who} {option} {text}")
            )
        if default is not None:
            return default
        if env in exported:
            t = exported[env]
            if t.known and str(t.value).isascii() and str(t.value).isdigit():
                return Traced(int(t.value), t.origin)
            return Traced(None, t.origin, f"${env} is unknown")
        return _default(1, f"default of torchrun: {option} = 1")

    if "deepspeed" in launch.launcher:
        # deepspeed/launcher/runner.py (DeepSpeed 2d991ba35): --num_nodes and --num_gpus default to -1, every host
        # of the hostfile (/job/hostfile) and every GPU of each: what the launch machine has, not the script
        pool = "deepspeed's hostfile, which the script does not show"
        return Cluster(
            nnodes=size("--num_nodes", None, Traced(None, launch.origin, f"the hosts of {pool}")),
            devices_per_node=size("--num_gpus", None, Traced(None, launch.origin, f"the GPUs of each host in {pool}")),
            device=_default("gpu", "GPUs"),
        )
    in_torchrun = any("torch" in step for step in launch.launcher)
    if not in_torchrun:
        why = "the world size is set by the launcher (WORLD_SIZE), which the script does not show"
        unknown = Traced(None, launch.origin, why)
        return Cluster(nnodes=unknown, devices_per_node=unknown, device=_default("gpu", "GPUs"))
    return Cluster(
        nnodes=size("--nnodes", "PET_NNODES"),
        devices_per_node=size("--nproc-per-node", "PET_NPROC_PER_NODE"),
        device=_default("gpu", "GPUs"),
    )


def exported_values(reading, launch: Launch) -> dict[str, Traced]:
    """The launch's environment as far as the script shows it: exported variables and ``NAME=v cmd``."""
    out: dict[str, Traced] = {}
    for name, var in reading.variables.items():
        value = var.as_scalar()
        if var.exported and value is not None:
            out[name] = Traced(value.text, var.origin, None if value.known else value.unknowns[0].unknown)
    for name, value in launch.command.env:
        out[name] = Traced(value.text, value.origin, None if value.known else value.unknowns[0].unknown)
    return out
