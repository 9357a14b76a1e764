"""The Python API under the CLI: ``shardcheck.check(path, env=...) -> Result``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from shardcheck.errors import InputError
from shardcheck.job import ConfigNote, FsdpLayout, Job, MegatronLayout
from shardcheck.origin import Traced
from shardcheck.settings import SEVERITY_RANK, Settings, load_settings

if TYPE_CHECKING:
    from shardcheck.rules.registry import Finding


@dataclass
class Result:
    """The verdict on one script: its resolved job, the findings, and the rules skipped."""

    path: str
    job: Job | None = None
    findings: list = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    error: str | None = None  # the one-line reason when the input cannot be used at all
    settings: Settings = field(default_factory=Settings)

    @property
    def valid(self) -> bool | None:
        """True: no error. False: an error (or an unusable input). None: no error found, but a value
        some rule needs is unknown (VALUE-UNKNOWN), so the verdict is undecided, never guessed."""
        if self.error is not None or any(f.severity == "error" and not f.conditional for f in self.findings):
            return False
        if any(f.rule == "VALUE-UNKNOWN" or f.severity == "error" for f in self.findings):
            return None
        return True

    @property
    def layout_valid(self) -> bool | None:
        """Whether the training engine would initialise and build the layout (Megatron-Core's MCORE-* rules,
        the FSDP engine's mesh and Ulysses rules), apart from other start-up errors such as an unknown
        config key; None when the input could not be used."""
        if self.job is None:
            return None
        layout_errors = [f for f in self.findings if f.severity == "error" and f.rule.startswith(LAYOUT_RULES)]
        if any(not f.conditional for f in layout_errors):
            return False
        return None if layout_errors or any(f.rule == "VALUE-UNKNOWN" for f in self.findings) else True

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 2
        return 1 if any(self.settings.fails(f.severity) for f in self.findings) else 0

    def layout_summary(self, role: str = "actor") -> dict | None:
        """Sizes of one engine as plain values (None where unknown), for reports."""
        if self.job is None:
            return None
        fsdp = self.job.fsdp_layout(role)
        if fsdp is not None:
            return summarize_fsdp_layout(self.job, fsdp)
        layout = self.job.layout(role)
        return summarize_layout(self.job, layout) if layout is not None else None


# Rules whose errors mean the training engine itself cannot build the layout.
LAYOUT_RULES = ("MCORE-", "VERL-FSDP-SP-WORLD", "VERL-FSDP-SP-HEADS", "VERL-FSDP-SIZE")


# The layout fields only one engine has: None in the other's summary.
FSDP_ONLY = ("sp", "fsdp_size", "shard", "replicate", "model_dtype", "param_offload", "optimizer_offload",
             "offload_policy")
MEGATRON_ONLY = ("tp", "pp", "cp", "ep", "etp", "etp_setting", "edp", "vpp", "layers_per_stage")


def summarize_fsdp_layout(job: Job, layout: FsdpLayout) -> dict:
    """An FSDP engine's sizes in the same shape as a Megatron one's; the Megatron-only fields are None."""
    world = job.cluster.world

    def v(t: Traced):
        return t.value if t.known else None

    return {
        "strategy": v(layout.strategy),
        "world": v(world),
        "nnodes": v(job.cluster.nnodes),
        "devices_per_node": v(job.cluster.devices_per_node),
        "sp": v(layout.sp),
        "fsdp_size": v(layout.fsdp_size),
        "dp": v(layout.dp(world)),
        "shard": v(layout.shard(world)),
        "replicate": v(layout.replicate(world)),
        "model_dtype": v(layout.model_dtype),
        "param_offload": v(layout.param_offload),
        "optimizer_offload": v(layout.optimizer_offload),
        "offload_policy": v(layout.offload_policy),
        **dict.fromkeys(MEGATRON_ONLY),
    }


def summarize_layout(job: Job, layout: MegatronLayout) -> dict:
    from shardcheck.frameworks.megatron.pipeline import Split
    from shardcheck.rules.megatron_model import layer_split

    world = job.cluster.world

    def v(t: Traced):
        return t.value if t.known else None

    stages = None
    if job.model is not None and job.model.num_hidden_layers:
        split = layer_split(layout, job.model.num_hidden_layers)
        if isinstance(split, Split):
            stages = list(split.stages)
    return {
        "strategy": "megatron",
        "world": v(world),
        "nnodes": v(job.cluster.nnodes),
        "devices_per_node": v(job.cluster.devices_per_node),
        **dict.fromkeys(FSDP_ONLY),
        "tp": v(layout.tp),
        "pp": v(layout.pp),
        "cp": v(layout.cp),
        "ep": v(layout.ep),
        "etp": v(layout.etp),
        "etp_setting": v(layout.etp_setting),
        "dp": v(layout.dp(world)),
        "edp": v(layout.edp(world)),
        "vpp": v(layout.vpp),
        "layers_per_stage": stages,
    }


def check(path: str | Path, env: dict[str, str] | None = None, *, model_config: str | None = None,
          display: str | None = None, settings: Settings | None = None, device: str | None = None,
          host_memory: int | None = None, verl_version: str | None = None,
          megatron_core_version: str | None = None) -> Result:
    """Read the launch script at ``path`` statically and judge it (``device``: the memory rules' device
    preset, default the one for trainer.device; ``host_memory``: RAM per node in bytes, for MEM-HOST;
    ``verl_version`` / ``megatron_core_version``: the versions to judge against, else chosen as
    frameworks/verl/versions.py and frameworks/megatron/versions.py say)."""
    from dataclasses import replace

    shown = display or str(path)
    try:
        settings = settings or load_settings(Path(path).resolve().parent)
        job = resolve_script(path, env, model_config=model_config, display=shown,
                             verl_version=_requested_verl(verl_version, settings),
                             megatron_core_version=megatron_core_version)
        if device is not None:
            from shardcheck.memory.devices import find_device

            find_device(device)  # an unknown name is bad input, reported before any rule runs
        job = replace(job, device_choice=device, host_memory_bytes=host_memory)
        from shardcheck.rules.registry import run_rules

        findings, skipped = run_rules(job)
        if job.framework == "verl" and job.version_source == "inferred" and len(job.accepted_versions) > 1:
            findings = _across_versions(job, findings, lambda v: replace(resolve_script(
                path, env, model_config=model_config, display=shown, verl_version=(v, "the accepted versions"),
                megatron_core_version=megatron_core_version), device_choice=device, host_memory_bytes=host_memory))
    except InputError as exc:
        return Result(shown, error=str(exc))
    except RecursionError:
        return Result(shown, error=f"{shown}:1: nested too deeply for shardcheck to read; simplify the script")
    findings = [f for f in findings if settings.reports(f.rule) and not _suppressed(f, job)]
    findings.sort(key=lambda f: (SEVERITY_RANK[f.severity], f.line or 0, f.rule))
    return Result(shown, job, findings, skipped, settings=settings)


def _suppressed(finding, job: Job) -> bool:
    """A ``# shardcheck: disable=ID`` comment on the finding's line or the line before it."""
    if finding.line is None or finding.path != job.path:
        return False
    ids = job.suppressions.get(finding.line, frozenset())
    return finding.rule in ids or "ALL" in ids


def _across_versions(job: Job, findings: list, judge) -> list:
    """Under an inferred verl version, an error that does not hold for every version accepting the script is a
    warning naming those it holds for; an error of another accepted version is added as such a warning.

    Versions that read the same defaults and behave alike (versions.behaviour) are judged once."""
    from dataclasses import replace

    from shardcheck.frameworks.verl.versions import behaviour, span
    from shardcheck.rules.registry import run_rules

    groups: dict[tuple, list[str]] = {}
    for version in job.accepted_versions:
        groups.setdefault(behaviour(version, job.config_name, job.defaults_read), []).append(version)
    if len(groups) == 1:
        return findings

    def key(f) -> tuple:
        return f.rule, f.line, f.role

    mine = behaviour(job.framework_version, job.config_name, job.defaults_read)
    errors: dict[tuple, dict[tuple, object]] = {mine: {key(f): f for f in findings if f.severity == "error"}}
    for sig, versions in groups.items():
        if sig != mine:
            errors[sig] = {key(f): f for f in run_rules(judge(versions[-1]))[0] if f.severity == "error"}
    out = []
    for f in findings:
        if f.severity == "error":
            holds = [v for sig, vs in groups.items() if key(f) in errors[sig] for v in vs]
            if len(holds) < len(job.accepted_versions):
                others = [v for v in job.accepted_versions if v not in holds]
                f = replace(f, severity="warning", message=f"{f.message} [holds for verl {span(holds)}, not for "
                                                           f"{span(others)}; give --verl-version to decide]")
        out.append(f)
    seen = set(errors[mine])
    for sig, versions in groups.items():
        for k, f in errors[sig].items():
            if k in seen:
                continue
            seen.add(k)
            holds = [v for s2, vs in groups.items() if k in errors[s2] for v in vs]
            out.append(replace(f, severity="warning", message=f"under verl {span(holds)}: {f.message} [not for "
                               f"verl {job.framework_version}, the version judged; give --verl-version to decide]"))
    return out


def _requested_verl(flag: str | None, settings: Settings) -> tuple[str, str] | None:
    if flag is not None:
        return flag, "--verl-version"
    import os

    if os.environ.get("SHARDCHECK_VERL_VERSION"):
        return os.environ["SHARDCHECK_VERL_VERSION"], "SHARDCHECK_VERL_VERSION"
    if settings.verl_version is not None:
        return settings.verl_version, f"verl-version in {settings.source}"
    return None


def resolve_script(path: str | Path, env: dict[str, str] | None = None, *, model_config: str | None = None,
                   display: str | None = None, verl_version: tuple[str, str] | None = None,
                   megatron_core_version: str | None = None, memo: dict | None = None) -> Job:
    """The resolved Job of the script's (first) verl launch; InputError when there is none.

    ``verl_version``: (version, where it was given); ``megatron_core_version``: a minor such as ``0.12``;
    ``memo``: a dict that keeps the script's reading between calls on the same script and environment."""
    job = _resolve_script(path, env, model_config=model_config, display=display, verl_version=verl_version,
                          memo={} if memo is None else memo)
    from dataclasses import replace

    from shardcheck.frameworks.megatron.versions import choose

    mcore = choose(megatron_core_version, job.framework_version if job.framework == "verl" else None)
    return replace(job, megatron_core_version=mcore.version, megatron_core_reason=mcore.reason)


def _resolve_script(path: str | Path, env: dict[str, str] | None, *, model_config: str | None,
                    display: str | None, verl_version: tuple[str, str] | None, memo: dict) -> Job:
    from shardcheck.frameworks.verl.resolve import is_verl_entry, resolve_verl, unmodelled_verl_entry
    from shardcheck.inputs.bash import read_bash
    from shardcheck.inputs.hydra_overrides import parse_hydra_args
    from shardcheck.inputs.launch import find_launches

    shown = display or str(path)
    if "reading" not in memo:
        memo["reading"] = read_bash(path, env, display=shown)
    reading = memo["reading"]
    found = find_launches(reading.commands)
    launches = [launch for launch in found if is_verl_entry(launch)]
    from dataclasses import replace

    flag_job = _resolve_flag_launch(found, reading, shown, model_config) if not launches else None
    if flag_job is not None:
        shell_notes = tuple(ConfigNote(rule=d.code, message=d.message, origin=d.origin) for d in reading.diagnostics)
        return replace(flag_job, notes=shell_notes + flag_job.notes, suppressions=reading.suppressions)
    if not launches:
        other = next((launch for launch in found if unmodelled_verl_entry(launch)), None)
        if other is not None:
            raise InputError(f"{other.origin.location}: {other.module} is not modelled yet; shardcheck reads "
                             "verl.trainer.main_ppo launches")
        syntax = next((d for d in reading.diagnostics if d.code == "SHELL-SYNTAX"), None)
        if syntax is not None:
            raise InputError(f"{syntax.origin.location}: {syntax.message}")
        raise InputError(
            f"{shown}:1: no recognised launch command (python3 -m verl.trainer.main_ppo ..., torchrun "
            "pretrain_gpt.py ..., slime's python3 train.py ...); shardcheck reads verl, Megatron-LM and slime "
            "launch scripts"
        )
    launch = launches[0]
    if "hydra" not in memo:
        memo["hydra"] = parse_hydra_args(launch.args)
    hydra = memo["hydra"]
    from shardcheck.frameworks.verl.versions import find_pin

    pinned = find_pin(Path(path)) if verl_version is None and Path(path).is_file() else None
    job = resolve_verl(launch, hydra, shown, model_config=model_config, verl_version=verl_version, pinned=pinned)
    shell_notes = tuple(ConfigNote(rule=d.code, message=d.message, origin=d.origin) for d in reading.diagnostics)

    return replace(job, notes=shell_notes + job.notes, suppressions=reading.suppressions)


def _resolve_flag_launch(found, reading, shown: str, model_config: str | None) -> Job | None:
    """The Job of the first Megatron-LM (pretrain_gpt.py, -m megatron...) or slime (train.py) launch."""
    from shardcheck.frameworks.megatron_lm.resolve import exported_values, is_megatron_lm_entry, resolve_megatron_lm
    from shardcheck.frameworks.slime.resolve import is_slime_entry, resolve_slime

    for launch in found:
        if is_slime_entry(launch):
            return resolve_slime(launch, shown, model_config=model_config)
        if is_megatron_lm_entry(launch):
            return resolve_megatron_lm(launch, shown, exported_values(reading, launch), model_config=model_config)
    return None


@dataclass
class VersionRow:
    """One version's verdict in ``check --versions``."""

    framework: str  # verl | megatron-core
    versions: tuple[str, ...]  # one verl version; megatron-core: a run of minors with the same verdict
    accepted: bool | None  # verl: whether its config accepts every override (None for megatron-core rows)
    valid: bool | None
    first: Finding | None  # the first error (None when valid)


@dataclass
class VersionMatrix:
    path: str
    rows: list[VersionRow] = field(default_factory=list)
    chosen: str | None = None  # the verl version plain `check` judges with, and why
    reason: str = ""
    megatron_core_verl: str | None = None  # the verl version the megatron-core rows are judged with
    error: str | None = None


def version_matrix(path: str | Path, env: dict[str, str] | None = None, *, model_config: str | None = None,
                   display: str | None = None, megatron_core_version: str | None = None) -> VersionMatrix:
    """The script judged against every bundled verl version, and, under the verl version plain ``check`` picks,
    against every megatron-core minor (runs of minors with the same layout verdict merged)."""
    from dataclasses import replace

    from shardcheck.frameworks.megatron.versions import MINORS
    from shardcheck.frameworks.verl.versions import catalogue
    from shardcheck.rules.registry import run_rules

    shown = display or str(path)
    memo: dict = {}

    def judged(job: Job) -> tuple[bool | None, Finding | None]:
        findings, _ = run_rules(job)
        findings.sort(key=lambda f: (SEVERITY_RANK[f.severity], f.line or 0, f.rule))
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            return (None if all(f.conditional for f in errors) else False), errors[0]
        return True, None

    try:
        base = resolve_script(path, env, model_config=model_config, display=shown,
                              megatron_core_version=megatron_core_version, memo=memo)
    except InputError as exc:
        return VersionMatrix(shown, error=str(exc))
    matrix = VersionMatrix(shown, chosen=base.framework_version, reason=base.version_reason)
    if base.framework == "verl":
        for version in catalogue().versions:
            job = resolve_script(path, env, model_config=model_config, display=shown,
                                 verl_version=(version, "--versions"), megatron_core_version=megatron_core_version,
                                 memo=memo)
            valid, first = judged(job)
            matrix.rows.append(VersionRow("verl", (version,), version in base.accepted_versions, valid, first))
    matrix.megatron_core_verl = base.framework_version
    if base.layouts:
        for minor in MINORS:
            job = replace(base, megatron_core_version=minor)
            layout_errors = [f for f in run_rules(job)[0] if f.rule.startswith("MCORE-PS-") and f.severity == "error"]
            row = VersionRow("megatron-core", (minor,), None, not layout_errors, layout_errors[0] if layout_errors
                             else None)
            last = matrix.rows[-1] if matrix.rows and matrix.rows[-1].framework == "megatron-core" else None
            if last is not None and last.valid == row.valid and _same(last.first, row.first):
                last.versions += (minor,)
            else:
                matrix.rows.append(row)
    return matrix


def _same(a: Finding | None, b: Finding | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a.rule == b.rule)


@dataclass
class MeshResult:
    """The rank map of one engine's layout: its grid (or the errors that stop it), nodes, rollout."""

    path: str
    job: Job
    layout: MegatronLayout | None
    grid: object | None  # shardcheck.mesh.grid.Grid
    findings: list
    rollout: object | None = None  # RolloutReplicas, or a one-line reason

    @property
    def errors(self) -> list:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def exit_code(self) -> int:
        if self.layout is None and self.job.fsdp_layouts:
            return 1 if self.errors else 0  # an FSDP job: no Megatron-Core groups to map
        return 1 if self.errors or self.grid is None else 0


def mesh(job: Job, path: str = "<sizes>") -> MeshResult:
    """The rank grid of the engine that builds the process groups (the ref when verl builds one)."""
    from shardcheck.mesh.grid import Grid, build_grid
    from shardcheck.mesh.placement import rollout_replicas
    from shardcheck.rules.registry import run_rules

    findings, _ = run_rules(job)
    layout = job.group_owner
    grid = None
    if layout is not None and job.cluster.world.known and all(
            t.known for t in (layout.tp, layout.pp, layout.cp, layout.ep, layout.etp_setting, layout.vpp)):
        built = build_grid(world=job.cluster.world.value, tp=layout.tp.value, pp=layout.pp.value, cp=layout.cp.value,
                           ep=layout.ep.value, etp=layout.etp_setting.value, vpp=layout.vpp.value, order=layout.order)
        grid = built if isinstance(built, Grid) else None
    rollout = None
    ro = job.rollout
    ro_world = ro.gpus if ro is not None and ro.gpus is not None else job.cluster.world
    if ro is not None and ro_world.known and ro_world.value and all(t.known for t in (ro.tp, ro.dp, ro.pp)):
        engine = ro.engine.value if ro.engine.known else "rollout"
        rollout = rollout_replicas(ro_world.value, str(engine), ro.tp.value, 1 if ro.dp_in_engine else ro.dp.value,
                                   ro.pp.value)
    keep = ("MCORE-PS-", "VALUE-", "MODEL-")
    return MeshResult(path, job, layout, grid, [f for f in findings if f.rule.startswith(keep)], rollout)


@dataclass
class MemoryResult:
    """The memory estimate of one script, and the MEM-* findings of its check."""

    path: str
    estimate: object | None = None  # shardcheck.memory.estimate.MemoryEstimate
    findings: list = field(default_factory=list)
    error: str | None = None

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 2
        return 1 if any(f.severity == "error" for f in self.findings) else 0


def memory(path: str | Path, env: dict[str, str] | None = None, *, model_config: str | None = None,
           display: str | None = None, device: str | None = None, host_memory: int | None = None) -> MemoryResult:
    """What each device holds for the script's job: training stages, rollout, host."""
    from shardcheck.memory.estimate import estimate

    result = check(path, env, model_config=model_config, display=display, device=device, host_memory=host_memory)
    if result.error is not None:
        return MemoryResult(result.path, error=result.error)
    return MemoryResult(result.path, estimate(result.job, device),
                        [f for f in result.findings if f.rule.startswith("MEM-")])
