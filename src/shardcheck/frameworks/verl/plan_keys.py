"""The verl keys a layout plan sets (verl 0.9.1 names), and the job those keys make.

``apply`` sets the keys on an already resolved :class:`~shardcheck.job.Job` the way ``resolve.py`` reads
them (the layout fields and ``job.values``); the planner proves each printed plan by re-reading the
script with the same keys as Hydra overrides through ``resolve_verl`` (plan/search.py ``prove``), and a
test checks the two agree for every planned layout.
"""

from __future__ import annotations

from dataclasses import replace

from shardcheck.job import Job, MegatronLayout, RolloutLayout
from shardcheck.origin import Origin, Traced

A = "actor_rollout_ref.actor.megatron"
REF = "actor_rollout_ref.ref.megatron"
OTC = "override_transformer_config"
RO = "actor_rollout_ref.rollout"

# knob -> (the actor key, the MegatronLayout field it sets or None, whether it is a transformer override)
LAYOUT_KNOBS = {
    "tp": ("tensor_model_parallel_size", "tp"),
    "pp": ("pipeline_model_parallel_size", "pp"),
    "cp": ("context_parallel_size", "cp"),
    "ep": ("expert_model_parallel_size", "ep"),
    "etp": ("expert_tensor_parallel_size", "etp_setting"),
    "vpp": ("virtual_pipeline_model_parallel_size", "vpp"),
}
OTC_KNOBS = {
    "first": ("num_layers_in_first_pipeline_stage", "first_stage_layers"),
    "last": ("num_layers_in_last_pipeline_stage", "last_stage_layers"),
    "recompute_granularity": ("recompute_granularity", None),
    "recompute_method": ("recompute_method", None),
    "recompute_num_layers": ("recompute_num_layers", None),
}
VALUE_KNOBS = {
    "distributed_optimizer": f"{A}.use_distributed_optimizer",
    "param_offload": f"{A}.param_offload",
    "optimizer_offload": f"{A}.optimizer_offload",
    "rollout_tp": f"{RO}.tensor_model_parallel_size",
    "rollout_dp": f"{RO}.data_parallel_size",
    "rollout_ep": f"{RO}.expert_parallel_size",
}
KNOBS = frozenset(LAYOUT_KNOBS) | frozenset(OTC_KNOBS) | frozenset(VALUE_KNOBS)
OFFLOAD = (False, True)  # param_offload and optimizer_offload together
ROLLOUT = True
# Rank order: verl passes Megatron-Core's default to initialize_model_parallel (resolve.py); not a knob.
ORDERS = ("tp-cp-ep-dp-pp",)


def key(knob: str, role_prefix: str = A) -> str:
    if knob in LAYOUT_KNOBS:
        return f"{role_prefix}.{LAYOUT_KNOBS[knob][0]}"
    if knob in OTC_KNOBS:
        return f"{role_prefix}.{OTC}.{OTC_KNOBS[knob][0]}"
    return VALUE_KNOBS[knob]


def current(job: Job) -> dict[str, object]:
    """The knobs' values in the job as resolved (None where unknown or unset)."""
    lay = job.layout("actor")
    out: dict[str, object] = {}
    if lay is not None:
        for knob, (_, attr) in LAYOUT_KNOBS.items():
            t = getattr(lay, attr)
            out[knob] = t.value if t.known else None
        for knob, (name, attr) in OTC_KNOBS.items():
            t = getattr(lay, attr) if attr else lay.transformer_overrides.get(name)
            out[knob] = t.value if t is not None and t.known else None
        out["order"] = lay.order
    for knob, k in VALUE_KNOBS.items():
        t = job.value(k)
        out[knob] = t.value if t.known else None
    return out


def _traced(value, k: str) -> Traced:
    return Traced(value, Origin(kind="default", text=f"shardcheck plan: {k}={_text(value)}"))


def _text(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def _layout(lay: MegatronLayout, changes: dict[str, object], prefix: str) -> MegatronLayout:
    fields: dict[str, object] = {}
    overrides = dict(lay.transformer_overrides)
    for knob, value in changes.items():
        if knob in LAYOUT_KNOBS:
            fields[LAYOUT_KNOBS[knob][1]] = _traced(value, key(knob, prefix))
        elif knob in OTC_KNOBS:
            name, attr = OTC_KNOBS[knob]
            t = _traced(value, key(knob, prefix))
            overrides[name] = t
            if attr:
                fields[attr] = t
    return replace(lay, transformer_overrides=overrides, **fields)


def ref_follows_actor(job: Job, knob: str) -> bool:
    """Whether the ref's key is verl's ``${oc.select:actor...}`` default (True) or set by the script (False)."""
    ref = job.layout("ref")
    if ref is None or knob not in LAYOUT_KNOBS:
        return True
    t = getattr(ref, LAYOUT_KNOBS[knob][1])
    return t.origin.first_script_line() is None


def apply(job: Job, changes: dict[str, object]) -> Job:
    """The job with the knobs in ``changes`` set (actor; the ref's sizes too, as verl's interpolations or
    the ref keys the plan writes make them; the rollout's)."""
    layouts = []
    for lay in job.layouts:
        mine = changes if lay.role == "actor" else {k: v for k, v in changes.items() if k in LAYOUT_KNOBS}
        layouts.append(_layout(lay, mine, A if lay.role == "actor" else REF))
    values = dict(job.values)
    for knob, value in changes.items():
        k = key(knob)
        if k in values:
            values[k] = _traced(value, k)
        if (
            knob == "param_offload"
            and "actor_rollout_ref.ref.megatron.param_offload" in values
            and ref_follows_actor(job, "tp")
        ):
            values["actor_rollout_ref.ref.megatron.param_offload"] = _traced(value, k)
    rollout = job.rollout
    if rollout is not None:
        ro = {}
        if "rollout_tp" in changes:
            ro["tp"] = _traced(changes["rollout_tp"], VALUE_KNOBS["rollout_tp"])
        if "rollout_dp" in changes:
            ro["dp"] = _traced(changes["rollout_dp"], VALUE_KNOBS["rollout_dp"])
        rollout = replace(rollout, **ro) if ro else rollout
    return replace(job, layouts=tuple(layouts), values=values, rollout=rollout)


def lines(job: Job, changes: dict[str, object]) -> list[str]:
    """Hydra overrides that make ``changes`` (``+`` for a key neither verl's config nor the script has:
    the stage sizes, which verl's override_transformer_config does not list)."""
    lay = job.layout("actor")
    out = []
    for knob, value in changes.items():
        keys = [key(knob)]
        if knob in LAYOUT_KNOBS and job.layout("ref") is not None and not ref_follows_actor(job, knob):
            keys.append(key(knob, REF))
        for k in keys:
            attr = OTC_KNOBS[knob][1] if knob in ("first", "last") else None
            plus = "+" if attr and getattr(lay, attr).origin.first_script_line() is None else ""
            out.append(f"{plus}{k}={_text(value)}")
    return out


def rollout_layout(job: Job) -> RolloutLayout | None:
    return job.rollout
