"""The Megatron-LM (and slime) flags a layout plan sets, and the job those flags make.

A plan's flags are appended to the launch command (argparse: the last one wins). ``apply`` sets them in the
job's flag values and builds the layout again with ``megatron_layout``, the resolution ``check`` uses.
A value argparse cannot take back by appending (no ``--recompute-granularity none``, no way to unset
``--recompute-method`` or ``--decoder-first-pipeline-num-layers``) is set back by **removing** the flag from the
launch (``removals``: the plan says which words to delete, and where; the proof re-reads the script without them).
A flag argparse can only switch on (``--use-distributed-optimizer``, ``--use-tp-pp-dp-mapping``) is not switched
off: ``expressible`` rejects those changes, as it rejects unsetting a flag the launch's own words do not give.
"""

from __future__ import annotations

from dataclasses import replace

from shardcheck.frameworks.megatron_lm.flags import FlagReading
from shardcheck.frameworks.megatron_lm.resolve import megatron_layout
from shardcheck.job import Job
from shardcheck.origin import Origin, Traced

FLAGS = {
    "tp": "--tensor-model-parallel-size",
    "pp": "--pipeline-model-parallel-size",
    "cp": "--context-parallel-size",
    "ep": "--expert-model-parallel-size",
    "etp": "--expert-tensor-parallel-size",
    "vpp": "--num-virtual-stages-per-pipeline-rank",
    "first": "--decoder-first-pipeline-num-layers",
    "last": "--decoder-last-pipeline-num-layers",
    "recompute_granularity": "--recompute-granularity",
    "recompute_method": "--recompute-method",
    "recompute_num_layers": "--recompute-num-layers",
    "distributed_optimizer": "--use-distributed-optimizer",
    "order": "--use-tp-pp-dp-mapping",
}
SWITCHES = ("distributed_optimizer", "order")  # store_true flags
KNOBS = frozenset(FLAGS)
ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")  # Megatron-LM's default, and --use-tp-pp-dp-mapping
OFFLOAD = (None,)
ROLLOUT = False  # slime's rollout engines keep the script's sizes


def current(job: Job) -> dict[str, object]:
    lay = job.layout("actor")
    out: dict[str, object] = {}
    if lay is not None:
        for knob, attr in (
            ("tp", "tp"),
            ("pp", "pp"),
            ("cp", "cp"),
            ("ep", "ep"),
            ("etp", "etp_setting"),
            ("vpp", "vpp"),
            ("first", "first_stage_layers"),
            ("last", "last_stage_layers"),
        ):
            t = getattr(lay, attr)
            out[knob] = t.value if t.known else None
        for name in ("recompute_granularity", "recompute_method", "recompute_num_layers"):
            t = lay.transformer_overrides.get(name)
            out[name] = t.value if t is not None and t.known else None
        out["order"] = lay.order
    t = job.value(FLAGS["distributed_optimizer"])
    out["distributed_optimizer"] = bool(t.value) if t.known else None
    return out


UNSETTABLE = ("first", "last", "recompute_granularity", "recompute_method", "recompute_num_layers")


def expressible(job: Job, changes: dict[str, object]) -> bool:
    """Whether lines can make ``changes``: appended flags, and removed ones for a value set back to unset (only a
    flag the launch's own words give can be removed); a store_true flag is not switched off."""
    for knob, value in changes.items():
        if knob in SWITCHES and value in (False, ORDERS[0]):
            return False
        if value is None and knob != "vpp" and (knob not in UNSETTABLE or _given(job, knob) is None):
            return False
    return True


def _given(job: Job, knob: str) -> Origin | None:
    """Where the launch's words give the knob's flag (None: they do not; its value is the default)."""
    t = job.values.get(FLAGS[knob])
    return t.origin if t is not None and t.origin.kind == "script" else None


def removals(job: Job, changes: dict[str, object]) -> list[tuple[str, bool, str]]:
    """(flag, takes a value, where) of each flag the launch must lose for ``changes``: a value set back to unset."""
    out = []
    for knob, value in changes.items():
        if value is None and knob in UNSETTABLE:
            where = _given(job, knob)
            out.append((FLAGS[knob], True, (where.location if where is not None else None) or "the launch"))
    return out


def _value(knob: str, value):
    if knob == "order":
        return value == ORDERS[1]
    if knob == "vpp" and value is None:
        return 1  # --num-virtual-stages-per-pipeline-rank 1: no interleaving (validate_args)
    return value


def apply(job: Job, changes: dict[str, object]) -> Job:
    values = dict(job.values)
    for knob, value in changes.items():
        flag = FLAGS[knob]
        v = _value(knob, value)
        values[flag] = Traced(v, Origin(kind="default", text=f"shardcheck plan: {flag} {v}"))
    layout = megatron_layout(FlagReading(values=values), [])
    layout = replace(layout, key_prefix=job.layouts[0].key_prefix) if job.layouts else layout
    return replace(job, layouts=(layout,), values=values)


def lines(job: Job, changes: dict[str, object]) -> list[str]:
    out = []
    for knob, value in changes.items():
        if knob in SWITCHES:
            out.append(FLAGS[knob])
        elif value is not None or knob == "vpp":
            out.append(f"{FLAGS[knob]} {_value(knob, value)}")
    return out
