"""The Python API under the CLI: ``shardcheck.check(path, env=...) -> Result``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from shardcheck.errors import InputError, NoLaunchError
from shardcheck.job import ConfigNote, FsdpLayout, Job, MegatronLayout
from shardcheck.origin import Traced
from shardcheck.settings import SEVERITY_RANK, Settings, load_settings


@dataclass
class Result:
    """The verdict on one script: its resolved job, the findings, and the rules skipped."""

    path: str
    job: Job | None = None
    findings: list = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    error: str | None = None  # the one-line reason when the input cannot be used at all
    settings: Settings = field(default_factory=Settings)
    error_kind: str | None = None  # with error: "unreadable", "no-launch", "unusable" or "usage"

    @property
    def status(self) -> str:
        """``judged``; ``skipped`` (no launch command in the file); ``failed`` (the input cannot be used)."""
        if self.error is None:
            return "judged"
        return "skipped" if self.error_kind == "no-launch" else "failed"

    @property
    def valid(self) -> bool | None:
        """True: no error. False: an error (or an unusable input). None: no error found, but a value
        some rule needs is unknown (VALUE-UNKNOWN), so the verdict is undecided, never guessed; also
        None for a file skipped for having no launch command."""
        if self.status == "skipped":
            return None
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
        """2: the file could not be read (or a setting or option used); 1: a finding at or above fail-on; else 0."""
        if self.error_kind in ("unreadable", "usage"):
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
          host_memory: int | None = None, text: bytes | None = None,
          args: tuple[str, ...] = (), sample_tokens: tuple[int, int | None] | None = None) -> Result:
    """Read the launch script at ``path`` statically and judge it (``device``: the memory rules' device
    preset, default the one for trainer.device; ``host_memory``: RAM per node in bytes, for MEM-HOST;
    ``text``: the script's contents when they do not come from ``path``, e.g. standard input).

    ``settings``: the project settings to use; default those of the nearest ``pyproject.toml`` above
    the script. A file without a launch command gives a Result with status ``skipped`` and one
    INPUT-NO-LAUNCH finding; an unusable input one INPUT-UNREADABLE or INPUT-UNUSABLE error."""
    from shardcheck.errors import SettingsError, UnreadableInput, UsageError

    shown = display or str(path)
    try:
        settings = settings or load_settings(Path(path).resolve().parent)
    except SettingsError as exc:
        return _unusable(shown, str(exc), "usage", Settings())
    try:
        job = resolve_script(path, env, model_config=model_config, display=shown, text=text, args=args)
        if device is not None:
            from shardcheck.memory.devices import find_device

            find_device(device)  # an unknown name is bad input, reported before any rule runs
        from dataclasses import replace

        job = replace(job, device_choice=device, host_memory_bytes=host_memory, sample_tokens=sample_tokens)
        from shardcheck.rules.registry import run_rules

        findings, skipped = run_rules(job)
    except NoLaunchError as exc:
        return _unusable(shown, str(exc), "no-launch", settings)
    except UnreadableInput as exc:
        return _unusable(shown, str(exc), "unreadable", settings)
    except UsageError as exc:
        return _unusable(shown, str(exc), "usage", settings)
    except InputError as exc:
        return _unusable(shown, str(exc), "unusable", settings)
    except RecursionError:
        return _unusable(shown, f"{shown}:1: nested too deeply for shardcheck to read; simplify the script",
                         "unusable", settings)
    from shardcheck.rules.grouping import group_findings

    findings = [f for f in findings if settings.reports(f.rule, path) and not _suppressed(f, job)]
    findings += _id_findings(job, settings, path)
    findings.sort(key=lambda f: (SEVERITY_RANK[f.severity], f.line or 0, f.rule))
    return Result(shown, job, group_findings(findings), skipped, settings=settings)


_KIND_RULE = {"no-launch": "INPUT-NO-LAUNCH", "unreadable": "INPUT-UNREADABLE", "unusable": "INPUT-UNUSABLE",
              "usage": "INPUT-UNUSABLE"}


def _unusable(shown: str, message: str, kind: str, settings: Settings) -> Result:
    """A Result for an input that cannot be judged, with the one finding that says why."""
    import re

    from shardcheck.origin import Origin
    from shardcheck.rules.registry import all_rules, finding

    all_rules()  # registers the INPUT-* rules
    m = re.match(r"^(.+?):(\d+): ", message)
    origin = Origin(kind="script", path=m.group(1), line=int(m.group(2))) if m else Origin(kind="cli", path=shown)
    text = message[m.end():] if m else message.removeprefix(f"{shown}: ")
    rule_id = _KIND_RULE[kind]
    found = [finding(rule_id, text, origin)] if settings.reports(rule_id) else []
    return Result(shown, None, found, error=message, settings=settings, error_kind=kind)


def _id_findings(job: Job, settings: Settings, path) -> list:
    """SUPPRESS-UNKNOWN-ID warnings: ids in the script's disable comments and in the settings that name no rule."""
    from shardcheck.origin import Origin
    from shardcheck.rules.registry import finding, id_problem

    if not settings.reports("SUPPRESS-UNKNOWN-ID", path):
        return []
    out = []
    for line, written in job.suppression_ids:
        problem = id_problem(written, "`# shardcheck: disable=`", prefix_ok=False)
        if problem is not None:
            out.append(finding("SUPPRESS-UNKNOWN-ID", problem[0], Origin(kind="script", path=job.path, line=line),
                               fix=problem[1]))
    for message, fix, source, line in settings.id_problems():
        origin = Origin(kind="script", path=source, line=line or 1) if source else Origin(kind="cli", text=message)
        out.append(finding("SUPPRESS-UNKNOWN-ID", message, origin, fix=fix))
    return out


def _suppressed(finding, job: Job) -> bool:
    """A ``# shardcheck: disable=ID`` comment on the finding's line or the line before it, or covering a
    line the finding's value passed through (the launch command that used a variable set elsewhere)."""
    from shardcheck.rules.registry import current_id

    if finding.origin is None:
        return False
    for line in _script_lines(finding.origin, job.path):
        ids = job.suppressions.get(line, frozenset())
        if "ALL" in ids or finding.rule in {current_id(i) for i in ids}:
            return True
    return False


def _script_lines(origin, path: str) -> set[int]:
    """Every line of ``path`` an origin (or a step on its way) was written on."""
    lines: set[int] = set()
    stack = [origin]
    while stack:
        o = stack.pop()
        if o.path == path and o.line is not None:
            lines.add(o.line)
        stack.extend(o.via)
    return lines


def resolve_script(path: str | Path, env: dict[str, str] | None = None, *, model_config: str | None = None,
                   display: str | None = None, text: bytes | None = None,
                   args: tuple[str, ...] = ()) -> Job:
    """The resolved Job of the script's (first) verl launch; InputError when there is none."""
    from shardcheck.frameworks.verl.resolve import is_verl_entry, resolve_verl, unmodelled_verl_entry
    from shardcheck.inputs.bash import read_bash, read_bash_text
    from shardcheck.inputs.hydra_overrides import parse_hydra_args
    from shardcheck.inputs.launch import find_launches

    shown = display or str(path)
    if text is not None:
        reading = read_bash_text(text, shown, env, real_path=Path(path), args=args)
    else:
        reading = read_bash(path, env, display=shown, args=args)
    found = find_launches(reading.commands)
    launches = [launch for launch in found if is_verl_entry(launch)]
    from dataclasses import replace

    _stop_at_unterminated(reading, found)
    flag_job = _resolve_flag_launch(found, reading, shown, model_config) if not launches else None
    if flag_job is not None:
        return replace(flag_job, notes=_shell_notes(reading) + flag_job.notes, suppressions=reading.suppressions,
                       suppression_ids=reading.suppression_ids)
    if not launches:
        other = next((launch for launch in found if unmodelled_verl_entry(launch)), None)
        if other is not None:
            raise NoLaunchError(f"{other.origin.location}: {other.module} is not modelled yet; skipped (shardcheck "
                                "reads verl.trainer.main_ppo launches)")
        syntax = next((d for d in reading.diagnostics if d.code in ("SHELL-SYNTAX", "SHELL-ARITH")), None)
        if syntax is not None:
            raise InputError(f"{syntax.origin.location}: {syntax.message}")
        modules = [launch for launch in found if launch.module and launch.module.split(".")[0] not in _TOOL_MODULES]
        if modules:
            names = ", ".join(dict.fromkeys(launch.module for launch in modules))
            raise NoLaunchError(f"{modules[0].origin.location}: not modelled: {names} (python -m); skipped (shardcheck "
                                "reads verl.trainer.main_ppo, Megatron-LM's pretrain_*.py and slime's train.py launches)")
        raise NoLaunchError(
            f"{shown}:1: no launch command; skipped (shardcheck reads verl's python3 -m verl.trainer.main_ppo, "
            "Megatron-LM's torchrun pretrain_gpt.py and slime's python3 train.py launches)"
        )
    launch = launches[0]
    hydra = parse_hydra_args(launch.args)
    job = resolve_verl(launch, hydra, shown, model_config=model_config)
    return replace(job, notes=_shell_notes(reading) + job.notes, suppressions=reading.suppressions,
                   suppression_ids=reading.suppression_ids)


def _shell_notes(reading) -> tuple[ConfigNote, ...]:
    """The reader's diagnostics, and a SHELL-ENV-UNUSED note for each ``--env`` name the script never reads."""
    import difflib

    from shardcheck.origin import Origin

    notes = [ConfigNote(rule=d.code, message=d.message, origin=d.origin) for d in reading.diagnostics]
    wanted = {name.upper(): name for name in reading.env_wanted}
    for name in reading.env_unread:
        close = wanted.get(name.upper()) or next(iter(difflib.get_close_matches(name, list(wanted.values()), 1, 0.7)),
                                                 None)
        read = f"; it reads {', '.join('$' + n for n in reading.env_wanted[:6])}" if reading.env_wanted else \
            "; it reads no environment variable"
        notes.append(ConfigNote(
            rule="SHELL-ENV-UNUSED", origin=Origin(kind="cli", path=reading.path, text=f"--env {name}"),
            message=f"--env {name}: {reading.path} never reads ${name}, so the value changes nothing{read}",
            fix=f"did you mean --env {close}=...?" if close else "remove it, or use the name the script reads"))
    return tuple(notes)


# ``python -m`` modules that are tools, not training launches: never named as "not modelled".
_TOOL_MODULES = frozenset({"pip", "venv", "ensurepip", "http", "json", "site", "uv", "pytest", "torch"})


def _stop_at_unterminated(reading, found) -> None:
    """An unterminated quote or expansion before the end of the first launch: bash reads to the end of the
    file looking for its end and stops with a syntax error, so the launch never runs (exit 2, one line)."""
    if not found:
        return
    last = max((f.origin.line or 0 for f in found[0].command.fields), default=0)
    for d in reading.diagnostics:
        if d.code == "SHELL-SYNTAX" and d.message.startswith("unterminated") and d.origin.path == reading.path \
                and (d.origin.line or 0) <= last:
            raise InputError(f"{d.origin.location}: {d.message}")


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
    from shardcheck.rules.registry import run_rules

    findings, _ = run_rules(job)
    layout, grid, rollout = mesh_grid(job)
    keep = ("MCORE-PS-", "VALUE-", "MODEL-")
    return MeshResult(path, job, layout, grid, [f for f in findings if f.rule.startswith(keep)], rollout)


def mesh_grid(job: Job):
    """(the group-building engine's layout, its rank grid or None, the rollout replicas or a reason or None)."""
    from shardcheck.mesh.grid import Grid, build_grid
    from shardcheck.mesh.placement import rollout_replicas

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
    return layout, grid, rollout


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
           display: str | None = None, device: str | None = None, host_memory: int | None = None,
           sample_tokens: tuple[int, int | None] | None = None) -> MemoryResult:
    """What each device holds for the script's job: training stages, rollout, host."""
    from shardcheck.memory.estimate import estimate

    result = check(path, env, model_config=model_config, display=display, device=device, host_memory=host_memory,
                   sample_tokens=sample_tokens)
    if result.error is not None:
        return MemoryResult(result.path, error=result.error)
    return MemoryResult(result.path, estimate(result.job, device),
                        [f for f in result.findings if f.rule.startswith("MEM-")])
