"""A Job built from sizes given directly (``--tp 2 --pp 16 ...``), for layouts without a script."""

from __future__ import annotations

from shardcheck.job import Cluster, Job, MegatronLayout, ModelFacts
from shardcheck.origin import Origin, Traced


def job_from_sizes(
    *,
    world: int,
    devices_per_node: int | None = None,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    ep: int = 1,
    etp: int | None = None,
    vpp: int | None = None,
    first_stage_layers: int | None = None,
    last_stage_layers: int | None = None,
    model: ModelFacts | None = None,
    order: str = "tp-cp-ep-dp-pp",
) -> Job:
    """A Megatron-Core job with one engine of the given sizes (ETP None = follow TP, as Megatron does)."""
    given = Origin(kind="cli", text="given directly")

    def t(value):
        return Traced(value, given)

    g = devices_per_node or world
    nnodes = world // g if world % g == 0 else None
    cluster = Cluster(
        nnodes=Traced(nnodes, given, None if nnodes else f"world {world} is not a multiple of {g} devices per node"),
        devices_per_node=t(g),
        device=t("gpu"),
    )
    if nnodes is None:  # keep the world exact even when it does not fill whole nodes
        cluster = Cluster(nnodes=t(world), devices_per_node=t(1), device=t("gpu"))
    layout = MegatronLayout(
        role="actor",
        key_prefix="megatron",
        tp=t(tp),
        pp=t(pp),
        cp=t(cp),
        ep=t(ep),
        etp_setting=t(etp),
        vpp=t(vpp),
        first_stage_layers=t(first_stage_layers),
        last_stage_layers=t(last_stage_layers),
        account_for_embedding=t(False),
        account_for_loss=t(False),
        layout_string=t(None),
        sequence_parallel=t(tp > 1),
        order=order,
    )
    return Job(
        path="<sizes>",
        framework="megatron-core",
        framework_version="0.16.1",
        entry="initialize_model_parallel",
        config_name="-",
        config_source="given directly",
        cluster=cluster,
        strategy=t("megatron"),
        layouts=(layout,),
        ref_used=t(False),
        model_path=Traced(None, given, "no model given"),
        model=model,
        model_problem=None,
    )
