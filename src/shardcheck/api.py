"""The Python API under the CLI: ``shardcheck.check(path, env=...) -> Result``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from shardcheck.errors import InputError, NoLaunchError
from shardcheck.job import FsdpLayout, Job, MegatronLayout
from shardcheck.origin import Traced
from shardcheck.problems import Kind, Problem
from shardcheck.settings import SEVERITY_RANK, Settings, load_settings, script_folder

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
    error_kind: str | None = None  # with error: "unreadable", "no-launch", "unusable", "usage" or "internal"
    suppressed: list = field(default_factory=list)  # findings a disable comment or the settings hide
    # the script read again with words added to its launch command, as this result's job was (plan/fixes.py
    # proves fixes with it); None for an input that was not resolved
    reread: Callable[[tuple[str, ...]], Job] | None = field(default=None, repr=False, compare=False)
    nearest: list = field(default_factory=list)  # the planner's nearest valid layouts, when no single key fixes

    @property
    def status(self) -> str:
        """``judged``; ``skipped`` (no launch command in the file); ``failed`` (the input cannot be used)."""
        if self.error is None:
            return "judged"
        return "skipped" if self.error_kind == "no-launch" else "failed"

    @property
    def verdict(self):
        """The one verdict every report format shows (shardcheck.verdict)."""
        from shardcheck.verdict import verdict_of

        return verdict_of(self)

    @property
    def valid(self) -> bool | None:
        """True: no error. False: an error (also one that holds as read, which an unknown argument could
        change), or an unusable input. None: no error found, but a value some rule needs is unknown
        (VALUE-UNKNOWN), so the verdict is undecided, never guessed; also None for a file skipped for having no
        launch command."""
        return self.verdict.valid

    @property
    def layout_valid(self) -> bool | None:
        """Whether the training engine would initialise and build the layout (Megatron-Core's MCORE-* rules,
        the FSDP engine's mesh and Ulysses rules), apart from other start-up errors such as an unknown
        config key; None when the input could not be used."""
        if self.job is None:
            return None
        # a suppressed layout error still means the engine cannot build the layout
        layout_errors = [
            f for f in self.findings + self.suppressed if f.severity == "error" and f.rule.startswith(LAYOUT_RULES)
        ]
        if any(not f.conditional for f in layout_errors):
            return False
        return None if layout_errors or any(f.rule == "VALUE-UNKNOWN" for f in self.findings) else True

    @property
    def exit_code(self) -> int:
        """4: an internal error of shardcheck while judging it (INTERNAL-ERROR); 2: the file could not be read
        (or a setting or option used); 1: a finding at or above fail-on; else 0."""
        if self.error_kind == "internal" or any(f.rule == "INTERNAL-ERROR" for f in self.findings):
            return 4
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
FSDP_ONLY = (
    "sp",
    "fsdp_size",
    "shard",
    "replicate",
    "model_dtype",
    "param_offload",
    "optimizer_offload",
    "offload_policy",
)
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
        split = layer_split(layout, job.model.num_hidden_layers, job.megatron_core_version)
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


def check(
    path: str | Path,
    env: dict[str, str] | None = None,
    *,
    model_config: str | None = None,
    display: str | None = None,
    settings: Settings | None = None,
    device: str | None = None,
    host_memory: int | None = None,
    text: bytes | None = None,
    args: tuple[str, ...] = (),
    sample_tokens: tuple[int, int | None] | None = None,
    verl_version: str | None = None,
    megatron_core_version: str | None = None,
    allow_source: tuple[str | Path, ...] = (),
    verl_path: str | None = None,
    vllm_version: str | None = None,
    sglang_version: str | None = None,
    online: bool = False,
) -> Result:
    """Read the launch script at ``path`` statically and judge it (``device``: the memory rules' device
    preset, default the one for trainer.device; ``host_memory``: RAM per node in bytes, for MEM-HOST;
    ``text``: the script's contents when they do not come from ``path``, e.g. standard input;
    ``verl_version`` / ``megatron_core_version``: the versions to judge against, else chosen as
    frameworks/verl/versions.py and frameworks/megatron/versions.py say; ``verl_path``: a verl directory whose
    config tree to judge against, read as data (frameworks/verl/verl_path.py); ``vllm_version`` /
    ``sglang_version``: the rollout engines' versions, else those the verl version pins (engine_versions.py)).

    ``settings``: the project settings to use (``--config``); default those of the nearest ``pyproject.toml``
    from the script up to the top of its git work tree. ``allow_source``: directories ``source`` may read
    besides the script's own tree; ``online`` (or the setting): a model found nowhere else is read from the Hugging
    Face Hub (models/hub.py). A file without a launch command gives a Result with status ``skipped`` and one
    INPUT-NO-LAUNCH finding; an unusable input one INPUT-UNREADABLE or INPUT-UNUSABLE error."""
    from shardcheck.errors import SettingsError

    shown = display or str(path)
    try:
        settings = settings or load_settings(script_folder(path))
    except SettingsError as exc:
        return unusable_result(shown, str(exc), "usage", Settings())
    versions = version_options(
        settings,
        verl_version=verl_version,
        verl_path=verl_path,
        megatron_core_version=megatron_core_version,
        vllm_version=vllm_version,
        sglang_version=sglang_version,
    )
    from shardcheck.models import hub

    online = online or settings.online
    with hub.online(online):
        return _check(
            path,
            env,
            shown=shown,
            settings=settings,
            versions=versions,
            model_config=model_config,
            device=device,
            host_memory=host_memory,
            text=text,
            args=args,
            sample_tokens=sample_tokens,
            megatron_core_version=megatron_core_version,
            allow_source=allow_source,
            vllm_version=vllm_version,
            sglang_version=sglang_version,
            online=online,
        )


def _check(
    path,
    env,
    *,
    shown,
    settings,
    versions,
    model_config,
    device,
    host_memory,
    text,
    args,
    sample_tokens,
    megatron_core_version,
    allow_source,
    vllm_version,
    sglang_version,
    online,
) -> Result:
    """check() with its settings and versions chosen, inside the Hub's on/off block."""
    from dataclasses import replace

    from shardcheck.errors import UnreadableInput, UsageError

    try:
        from shardcheck.inputs.shell_probe import machine_for
        from shardcheck.memory.devices import kind_of

        machine = machine_for(device, settings, kind_of)  # answers the script's accelerator probes
        device = device if device is not None else settings.device
        job = resolve_script(
            path,
            env,
            model_config=model_config,
            display=shown,
            text=text,
            args=args,
            allow_source=allow_source,
            machine=machine,
            **versions,
        )
        if device is not None:
            from shardcheck.memory.devices import find_device

            find_device(device)  # an unknown name is bad input, reported before any rule runs
        job = replace(job, device_choice=device, host_memory_bytes=host_memory, sample_tokens=sample_tokens)
        from shardcheck.rules.registry import run_rules

        findings, skipped = run_rules(job)
        verl_job = job.framework in ("verl", "verl-gen")
        if verl_job and job.version_source == "inferred" and len(job.accepted_versions) > 1:
            note = _versions_note(
                job,
                findings,
                lambda v: replace(
                    resolve_script(
                        path,
                        env,
                        model_config=model_config,
                        display=shown,
                        text=text,
                        args=args,
                        verl_version=(v, "the accepted versions"),
                        megatron_core_version=megatron_core_version,
                        allow_source=allow_source,
                        engine_versions=(vllm_version, sglang_version),
                        machine=machine,
                    ),
                    device_choice=device,
                    host_memory_bytes=host_memory,
                    sample_tokens=sample_tokens,
                ),
            )
            findings += [note] if note is not None else []
    except NoLaunchError as exc:
        return unusable_result(shown, str(exc), "no-launch", settings)
    except UnreadableInput as exc:
        return unusable_result(shown, str(exc), "unreadable", settings)
    except UsageError as exc:
        return unusable_result(shown, str(exc), "usage", settings)
    except InputError as exc:
        return unusable_result(shown, str(exc), "unusable", settings)
    except RecursionError:
        return unusable_result(
            shown, f"{shown}:1: nested too deeply for shardcheck to read; simplify the script", "unusable", settings
        )
    from shardcheck.rules.grouping import group_findings

    hidden = [f for f in findings if not settings.reports(f.rule, path) or _suppressed(f, job)]
    findings = [f for f in findings if settings.reports(f.rule, path) and not _suppressed(f, job)]
    findings += _id_findings(job, settings, path)
    findings.sort(key=lambda f: (SEVERITY_RANK[f.severity], f.line or 0, f.rule))

    reread = Reread(
        path,
        env,
        {
            "model_config": model_config,
            "display": shown,
            "text": text,
            "args": args,
            "allow_source": allow_source,
            "machine": machine,
            **versions,
        },
        {"device_choice": device, "host_memory_bytes": host_memory, "sample_tokens": sample_tokens},
        online,
    )
    return Result(shown, job, group_findings(findings), skipped, settings=settings, suppressed=hidden, reread=reread)


@dataclass(frozen=True)
class Reread:
    """The script read again as ``check`` read it, with words added to its launch command (a plain object,
    so that a Result still pickles for worker processes)."""

    path: str | Path
    env: dict[str, str] | None
    resolve: dict
    job: dict
    online: bool = False  # --online: the Hub may be asked again

    def __call__(self, words: tuple[str, ...]) -> Job:
        from dataclasses import replace

        from shardcheck.models import hub

        with hub.online(self.online):
            again = resolve_script(self.path, self.env, extra_args=words, **self.resolve)
        return replace(again, **self.job)


_KIND_PROBLEM = {
    "no-launch": Kind.INPUT_NO_LAUNCH,
    "unreadable": Kind.INPUT_UNREADABLE,
    "unusable": Kind.INPUT_UNUSABLE,
    "usage": Kind.INPUT_UNUSABLE,
    "internal": Kind.INTERNAL_ERROR,
}


def unusable_result(shown: str, message: str, kind: str, settings: Settings) -> Result:
    """A Result for an input that cannot be judged, with the one finding that says why."""
    import re

    from shardcheck.origin import Origin
    from shardcheck.rules.registry import render

    m = re.match(r"^(.+?):(\d+): ", message)
    origin = Origin(kind="script", path=m.group(1), line=int(m.group(2))) if m else Origin(kind="cli", path=shown)
    text = message[m.end() :] if m else message.removeprefix(f"{shown}: ")
    said = render(Problem(_KIND_PROBLEM[kind], origin, {"message": text}))
    found = [said] if settings.reports(said.rule) else []
    return Result(shown, None, found, error=message, settings=settings, error_kind=kind)


def _id_findings(job: Job, settings: Settings, path) -> list:
    """SUPPRESS-UNKNOWN-ID warnings: ids in the script's disable comments and in the settings that name no rule."""
    from shardcheck.origin import Origin
    from shardcheck.rules.ids import SUGGESTIONS
    from shardcheck.rules.registry import id_problem, render, rule_id

    if not settings.reports(rule_id(Kind.UNKNOWN_RULE_ID), path):
        return []
    out = []
    for line, written in job.suppression_ids:
        problem = id_problem(written, "`# shardcheck: disable=`", prefix_ok=False, suggest=len(out) < SUGGESTIONS)
        if problem is not None:
            out.append(
                render(
                    Problem(
                        Kind.UNKNOWN_RULE_ID,
                        Origin(kind="script", path=job.path, line=line),
                        {"message": problem[0], "fix": problem[1]},
                    )
                )
            )
    for message, fix, source, line in settings.id_problems():
        origin = Origin(kind="script", path=source, line=line or 1) if source else Origin(kind="cli", text=message)
        out.append(render(Problem(Kind.UNKNOWN_RULE_ID, origin, {"message": message, "fix": fix})))
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


def _versions_note(job: Job, findings: list, judge) -> Finding | None:
    """Under an inferred verl version, one VERL-VERSIONS-DIFFER note naming the other accepted releases whose
    verdict differs from the judged one's (they start where it fails, or fail where it starts), with the
    layout value that differs there. The judged version's findings stand as they are.

    Versions that read the same defaults and behave alike (versions.behaviour) are judged once."""
    from shardcheck.frameworks.verl.versions import behaviour, span
    from shardcheck.origin import Origin
    from shardcheck.rules.registry import render, run_rules

    groups: dict[tuple, list[str]] = {}
    for version in job.accepted_versions:
        groups.setdefault(behaviour(version, job.config_name, job.defaults_read), []).append(version)
    mine = behaviour(job.framework_version, job.config_name, job.defaults_read)
    fails_here = any(f.severity == "error" for f in findings)
    starts: list[str] = []
    fails: list[str] = []
    anchor = next((f.origin for f in findings if f.severity == "error" and f.origin is not None), None)
    why: dict[str, list[str]] = {"starts": [], "fails": []}
    for sig, versions in groups.items():
        if sig == mine:
            continue
        other = judge(versions[-1])
        theirs = [f for f in run_rules(other)[0] if f.severity == "error"]
        if fails_here == bool(theirs):
            continue
        how = "fails" if theirs else "starts"
        anchor = anchor or next((f.origin for f in theirs if f.origin is not None), None)
        (fails if theirs else starts).extend(versions)
        said = _layout_differences(job, other)
        if not said:
            errors = theirs or [f for f in findings if f.severity == "error"]
            said = [f"{'' if theirs else 'no '}{', '.join(dict.fromkeys(f.rule for f in errors))} there"]
        why[how].extend(w for w in said if w not in why[how])
    differs = [(span(vs), how, "; ".join(why[how])) for vs, how in ((starts, "starts"), (fails, "fails")) if vs]
    if not differs:
        return None
    # at the judged version's first error (or the other versions'): the line whose verdict differs
    origin = anchor or Origin(kind="cli", path=job.path, text="the verl version inferred")
    return render(Problem(Kind.VERSIONS_DIFFER, origin, {"judged": job.framework_version, "differs": differs}))


def _layout_differences(job: Job, other: Job) -> list[str]:
    """``ETP defaults to 1 there`` for each engine size that another version's defaults make different."""
    out = []
    for role in ("actor", "critic", "ref"):
        mine, theirs = job.layout(role), other.layout(role)
        if mine is None or theirs is None:
            continue
        for name in ("tp", "pp", "cp", "ep", "etp", "vpp"):
            a, b = getattr(mine, name), getattr(theirs, name)
            if a.known and b.known and a.value != b.value:
                verb = "defaults to" if b.origin.kind == "default" else "is"
                said = f"{name.upper()} {verb} {b.value} there"
                if said not in out:
                    out.append(said)
    return out


def version_options(
    settings: Settings,
    *,
    verl_version: str | None = None,
    verl_path: str | None = None,
    megatron_core_version: str | None = None,
    vllm_version: str | None = None,
    sglang_version: str | None = None,
) -> dict:
    """The versions given on the command line or in the settings, as ``resolve_script`` takes them."""
    return {
        "verl_version": _requested_verl(verl_version, settings, verl_path),
        "megatron_core_version": megatron_core_version,
        "engine_versions": (vllm_version, sglang_version),
    }


def _requested_verl(flag: str | None, settings: Settings, path: str | None = None):
    """(version, where it was given), a VerlPathRequest (``--verl-path``), or None: the command line first
    (``--verl-version`` and ``--verl-path`` together are refused by the CLI), then the environment, then the
    settings' verl-version or verl-path."""
    from shardcheck.frameworks.verl.verl_path import VerlPathRequest

    if flag is not None:
        return flag, "--verl-version"
    if path is not None:
        return VerlPathRequest(path, "--verl-path")
    import os

    if os.environ.get("SHARDCHECK_VERL_VERSION"):
        return os.environ["SHARDCHECK_VERL_VERSION"], "SHARDCHECK_VERL_VERSION"
    if settings.verl_version is not None:
        return settings.verl_version, f"verl-version in {settings.source}"
    if settings.verl_path is not None:
        return VerlPathRequest(settings.verl_path, f"verl-path in {settings.source}")
    return None


def resolve_script(
    path: str | Path,
    env: dict[str, str] | None = None,
    *,
    model_config: str | None = None,
    display: str | None = None,
    text: bytes | None = None,
    args: tuple[str, ...] = (),
    extra_args: tuple[str, ...] = (),
    drop_args: tuple[tuple[str, bool], ...] = (),
    verl_version: tuple[str, str] | None = None,
    megatron_core_version: str | None = None,
    memo: dict | None = None,
    allow_source: tuple[str | Path, ...] = (),
    engine_versions: tuple[str | None, str | None] = (None, None),
    machine=None,
) -> Job:
    """The resolved Job of the script's (first) verl launch; InputError when there is none.

    ``extra_args``: words added at the end of the launch command (``shardcheck plan`` proves its override
    lines this way: Hydra overrides for verl, flags for Megatron-LM and slime, where the last one wins);
    ``drop_args``: (flag, takes a value) pairs removed from the launch first, each occurrence with its value word
    (a Megatron-LM plan that sets a flag back to unset: argparse has no way to unset one by appending).
    ``verl_version``: (version, where it was given); ``megatron_core_version``: a minor such as ``0.12``;
    ``memo``: a dict that keeps the script's reading between calls on the same script and environment;
    ``allow_source``: folders the files a script names may lie in besides its own tree; ``engine_versions``: the
    requested vLLM and SGLang versions (else those the verl version pins); ``machine``: the cluster that answers
    the script's accelerator probes (inputs/shell_probe.py)."""
    from shardcheck.inputs.read_policy import policy_for

    with policy_for(path, allow_source):  # every file the script names is read under the source policy
        job = _resolve_script(
            path,
            env,
            model_config=model_config,
            display=display,
            text=text,
            args=args,
            extra_args=extra_args,
            drop_args=drop_args,
            verl_version=verl_version,
            megatron_core_version=megatron_core_version,
            memo={} if memo is None else memo,
            allow_source=allow_source,
            machine=machine,
        )
    from dataclasses import replace

    from shardcheck.frameworks.megatron.versions import choose
    from shardcheck.frameworks.verl.versions import find_container_tag, implied_megatron_core

    verl_job = job.framework in ("verl", "verl-sft", "verl-gen")
    tag = (
        find_container_tag(Path(path), want="mcore")
        if verl_job and megatron_core_version is None and text is None and Path(path).is_file()
        else None
    )
    mcore = choose(
        megatron_core_version,
        implied_megatron_core(job.framework_version) if verl_job else None,
        pinned=(tag.versions["mcore"], f"the container tag {tag.image} at {tag.where}") if tag is not None else None,
    )
    job = replace(job, megatron_core_version=mcore.version, megatron_core_reason=mcore.reason)
    from shardcheck.frameworks.verl.verl_path import VerlPathRequest, load

    if isinstance(verl_version, VerlPathRequest) and job.version_source == "path":
        match = load(verl_version.directory).match
        job = replace(job, verl_path=(verl_version.directory, match.version, match.exact))
    if job.framework in ("verl", "verl-gen"):
        from shardcheck.frameworks.verl import engine_versions as ev

        readable = text is None and Path(path).is_file()

        def tagged(engine: str) -> tuple[str, str] | None:
            found = find_container_tag(Path(path), want=engine) if readable else None
            return (found.versions[engine], f"the container tag {found.image} at {found.where}") if found else None

        vllm = ev.choose("vllm", engine_versions[0], job.framework_version, tagged("vllm"))
        sglang = ev.choose("sglang", engine_versions[1], job.framework_version, tagged("sglang"))
        job = replace(
            job,
            vllm_version=vllm.version,
            vllm_reason=vllm.reason,
            sglang_version=sglang.version,
            sglang_reason=sglang.reason,
        )
    return job


def _resolve_script(
    path: str | Path,
    env: dict[str, str] | None,
    *,
    model_config: str | None,
    display: str | None,
    text: bytes | None,
    args: tuple[str, ...],
    extra_args: tuple[str, ...],
    verl_version: tuple[str, str] | None,
    megatron_core_version: str | None = None,
    drop_args: tuple[tuple[str, bool], ...] = (),
    memo: dict,
    allow_source: tuple[str | Path, ...],
    machine=None,
) -> Job:
    from shardcheck.frameworks.interface import detect, resolve
    from shardcheck.frameworks.megatron.versions import choose
    from shardcheck.frameworks.verl.resolve import unmodelled_reason, unmodelled_verl_entry
    from shardcheck.inputs.bash import read_bash, read_bash_text
    from shardcheck.inputs.launch import find_launches

    shown = display or str(path)
    if "reading" not in memo:
        if text is not None:
            memo["reading"] = read_bash_text(
                text, shown, env, real_path=Path(path), args=args, allow_source=allow_source, machine=machine
            )
        else:
            memo["reading"] = read_bash(path, env, display=shown, args=args, allow_source=allow_source, machine=machine)
    reading = memo["reading"]
    found = find_launches(reading.commands)
    if drop_args:
        found = [_without_flags(launch, drop_args) for launch in found]
    if extra_args:
        found = [_with_args(launch, extra_args) for launch in found]
    detected = [(launch, detect(launch)) for launch in found]
    # verl's launch first, wherever it stands; else the first Megatron-LM or slime launch
    launches = [launch for launch, framework in detected if framework == "verl"]
    from dataclasses import replace

    _stop_at_unterminated(reading, found)
    flag_launch = next(((launch, framework) for launch, framework in detected if framework is not None), None)
    # verl's SFT trainers choose a verl version as main_ppo does (a flag, a pin, else inference)
    sft_options = {}
    if flag_launch is not None and flag_launch[1] in ("verl-sft", "verl-gen"):
        from shardcheck.frameworks.verl.versions import find_pin

        sft_readable = verl_version is None and text is None and Path(path).is_file()
        # a verl the script's repository carries is the one its SFT / generation launch runs, as for main_ppo
        sft_carried = _carried_verl(Path(path), reading, flag_launch[0]) if sft_readable else (None, None, None)
        given_pin = find_pin(Path(path)) if sft_readable and sft_carried[0] is None else None
        sft_options = {"verl_version": sft_carried[0] or verl_version, "pinned": given_pin, "env": env}
    flag_job = (
        resolve(
            flag_launch[1],
            flag_launch[0],
            reading,
            shown,
            model_config=model_config,
            # Megatron-LM's and slime's flags are those of this megatron-core minor; verl's SFT its verl version
            **(sft_options or {"megatron_core": choose(megatron_core_version).version}),
            # a Megatron-LM fork's flags are read from its code in the script's repository (megatron_lm/forks.py)
            **({"script_file": Path(path)} if flag_launch[1] == "megatron-lm" and text is None else {}),
        )
        if not launches and flag_launch is not None
        else None
    )
    if flag_job is not None:
        if sft_options:
            flag_job = _as_vendored(flag_job, *sft_carried)
        return replace(
            flag_job,
            notes=_shell_notes(reading) + flag_job.notes,
            suppressions=reading.suppressions,
            suppression_ids=reading.suppression_ids,
        )
    if not launches:
        other = next((launch for launch in found if unmodelled_verl_entry(launch)), None)
        if other is not None:
            raise NoLaunchError(f"{other.origin.location}: {unmodelled_reason(other.module)}; skipped")
        syntax = next((d for d in reading.diagnostics if d.kind in _BASH_REJECTS), None)
        if syntax is not None:
            from shardcheck.rules.registry import render

            raise InputError(f"{syntax.origin.location}: {render(syntax).message}")
        modules = [launch for launch in found if launch.module and launch.module.split(".")[0] not in _TOOL_MODULES]
        if modules:
            names = ", ".join(dict.fromkeys(launch.module for launch in modules))
            raise NoLaunchError(
                f"{modules[0].origin.location}: not modelled: {names} (python -m); skipped (shardcheck "
                "reads verl.trainer.main_ppo, Megatron-LM's pretrain_*.py and slime's train.py launches)"
            )
        if reading.unrun:  # the launch is there, but bash never runs it (after `exit`, in an uncalled function)
            raise NoLaunchError(f"{reading.unrun[0]}; no launch command runs; skipped")
        raise NoLaunchError(
            f"{shown}:1: no launch command; skipped (shardcheck reads verl's python3 -m verl.trainer.main_ppo, "
            "Megatron-LM's torchrun pretrain_gpt.py and slime's python3 train.py launches)"
        )
    from shardcheck.frameworks.verl.versions import find_pin

    readable = verl_version is None and text is None and Path(path).is_file()
    carried, carried_version, unloadable = (
        _carried_verl(Path(path), reading, launches[0]) if readable else (None, None, None)
    )
    if carried is not None:
        verl_version = carried
    pinned = find_pin(Path(path)) if readable and carried is None else None
    job = resolve(
        "verl",
        launches[0],
        reading,
        shown,
        model_config=model_config,
        verl_version=verl_version,
        pinned=pinned,
        memo=memo,
        env=env,
    )
    job = _as_vendored(job, carried, carried_version, unloadable)
    return replace(
        job,
        notes=_shell_notes(reading) + job.notes,
        suppressions=reading.suppressions,
        suppression_ids=reading.suppression_ids,
    )


def _as_vendored(job: Job, carried, carried_version: str | None, unloadable: str | None) -> Job:
    """The job judged with the verl its repository carries marked ``vendored``; or, when that copy does not load,
    the line saying so added to its version reason (``_carried_verl``'s three values)."""
    from dataclasses import replace

    if carried is not None and job.version_source == "path":
        from shardcheck.frameworks.verl.verl_path import load

        match = load(carried.directory).match
        return replace(
            job,
            version_source="vendored",
            verl_path=(carried.directory, match.version, match.exact),
            carried_verl=carried_version,
        )
    if unloadable is not None:
        return replace(job, version_reason=f"{job.version_reason}; {unloadable}")
    return job


def _carried_verl(path: Path, reading, launch):
    """(a VerlPathRequest for the verl the script's repository carries, its version file's text, None), or
    (None, None, the one line saying why a carried copy does not load), or (None, None, None)
    (frameworks/verl/vendored.py)."""
    from shardcheck.errors import UsageError
    from shardcheck.frameworks.verl.vendored import find_carried, not_judged
    from shardcheck.frameworks.verl.verl_path import VerlPathRequest, load

    entries = _pythonpath(reading, launch)
    found = find_carried(path, entries)
    if found is None:
        return None, None, None
    skipped = not_judged(found.version)
    older = (
        " (older than every bundled release: "
        + (f"{', '.join(skipped)} not judged: it does not make it; " if skipped else "")
        + "the other rules follow the nearest release's behaviour)"
    )
    where = f"carried verl {found.version}{older if found.older_than_catalogue else ''}, {found.found_by}"
    try:
        _ = load(str(found.root)).match  # reads and matches the tree: a copy that does not load fails here
    except UsageError as exc:
        return (
            None,
            None,
            f"the carried verl at {found.root} does not load ({exc}); the version is chosen as without it",
        )
    return VerlPathRequest(str(found.root), where), found.version, None


def _pythonpath(reading, launch) -> tuple[str, ...]:
    """The ``PYTHONPATH`` entries the script writes out (exported, or ``PYTHONPATH=... cmd``); an entry with a part
    the script does not know (``$PYTHONPATH``, ``$ROOT/x``) is left out."""
    fields = [value for name, value in launch.command.env if name == "PYTHONPATH"]
    var = reading.variables.get("PYTHONPATH")
    if not fields and var is not None and var.exported and var.as_scalar() is not None:
        fields = [var.as_scalar()]
    if not fields:
        return ()
    text = "".join(seg.text if seg.unknown is None and seg.text is not None else "\x00" for seg in fields[-1].segs)
    return tuple(e for e in text.split(":") if e and "\x00" not in e)


def _shell_notes(reading) -> tuple[Problem, ...]:
    """The reader's diagnostics, and a SHELL-ENV-UNUSED note for each ``--env`` name the script never reads."""
    import difflib

    from shardcheck.origin import Origin

    notes = list(reading.diagnostics)
    wanted = {name.upper(): name for name in reading.env_wanted}
    for name in reading.env_unread:
        close = wanted.get(name.upper()) or next(
            iter(difflib.get_close_matches(name, list(wanted.values()), 1, 0.7)), None
        )
        notes.append(
            Problem(
                Kind.ENV_UNUSED,
                Origin(kind="cli", path=reading.path, text=f"--env {name}"),
                {"name": name, "path": reading.path, "wanted": list(reading.env_wanted), "close": close},
            )
        )
    return tuple(notes)


# What bash itself rejects before the launch: the script cannot be judged as a whole.
_BASH_REJECTS = (Kind.SHELL_SYNTAX, Kind.SHELL_PLACEHOLDER, Kind.SHELL_ARITH)
# ``python -m`` modules that are tools, not training launches: never named as "not modelled".
_TOOL_MODULES = frozenset({"pip", "venv", "ensurepip", "http", "json", "site", "uv", "pytest", "torch"})


def _stop_at_unterminated(reading, found) -> None:
    """An unterminated quote or expansion before the end of the first launch: bash reads to the end of the
    file looking for its end and stops with a syntax error, so the launch never runs (exit 2, one line)."""
    if not found:
        return
    last = max((f.origin.line or 0 for f in found[0].command.fields), default=0)
    for d in reading.diagnostics:
        if (
            d.kind is Kind.SHELL_SYNTAX
            and d["reason"].startswith("unterminated")
            and d.origin.path == reading.path
            and (d.origin.line or 0) <= last
        ):
            from shardcheck.rules.registry import render

            raise InputError(f"{d.origin.location}: {render(d).message}")


def _without_flags(launch, flags: tuple[tuple[str, bool], ...]):
    """The launch without each occurrence of ``flags`` (``--flag value``, ``--flag=value``, or a switch alone)."""
    from dataclasses import replace

    takes = dict(flags)
    kept = []
    args = launch.args
    i = 0
    while i < len(args):
        text = args[i].text or ""
        name = text.partition("=")[0]
        if name in takes:
            value = (
                takes[name] and "=" not in text and i + 1 < len(args) and not args[i + 1].render("").startswith("--")
            )
            i += 2 if value else 1
            continue
        kept.append(args[i])
        i += 1
    return replace(launch, args=tuple(kept))


def _with_args(launch, words: tuple[str, ...]):
    """The launch with ``words`` appended to its arguments (origin: shardcheck plan)."""
    from dataclasses import replace

    from shardcheck.inputs.shell_values import Field, Seg
    from shardcheck.origin import Origin

    fields = []
    for word in words:
        origin = Origin(kind="default", text=f"shardcheck plan: {word}")
        fields.append(Field(segs=(Seg(text=word, origin=origin),), origin=origin))
    return replace(launch, args=launch.args + tuple(fields))


@dataclass
class VersionRow:
    """One version's verdict in ``check --versions``."""

    framework: str  # verl | megatron-core
    versions: tuple[str, ...]  # one verl version; megatron-core: a run of minors with the same verdict
    accepted: bool | None  # verl: whether its config accepts every override (None for megatron-core rows)
    valid: bool | None
    first: Finding | None  # the first error (None when valid)
    directory: str | None = None  # framework "verl-path": the --verl-path tree judged (versions: its label)


@dataclass
class VersionMatrix:
    path: str
    rows: list[VersionRow] = field(default_factory=list)
    chosen: str | None = None  # the verl version plain `check` judges with, and why
    reason: str = ""
    megatron_core_verl: str | None = None  # the verl version the megatron-core rows are judged with
    error: str | None = None


def version_matrix(
    path: str | Path,
    env: dict[str, str] | None = None,
    *,
    model_config: str | None = None,
    display: str | None = None,
    megatron_core_version: str | None = None,
    allow_source: tuple[str | Path, ...] = (),
    verl_path: str | None = None,
) -> VersionMatrix:
    """The script judged against every bundled verl version, and, under the verl version plain ``check`` picks,
    against every megatron-core minor (runs of minors with the same layout verdict merged). ``verl_path``: a
    ``--verl-path`` tree, judged as one more row (framework ``verl-path``) and the one plain ``check`` picks."""
    from dataclasses import replace

    from shardcheck.frameworks.megatron.versions import MINORS
    from shardcheck.frameworks.verl.verl_path import VerlPathRequest
    from shardcheck.frameworks.verl.versions import catalogue
    from shardcheck.rules.registry import run_rules

    shown = display or str(path)
    memo: dict = {}

    def judged(job: Job) -> tuple[bool | None, Finding | None]:
        findings, _ = run_rules(job)
        findings.sort(key=lambda f: (SEVERITY_RANK[f.severity], f.line or 0, f.rule))
        errors = [f for f in findings if f.severity == "error"]
        return (False, errors[0]) if errors else (True, None)  # as verdict.py: an error as read is an error

    try:
        base = resolve_script(
            path,
            env,
            model_config=model_config,
            display=shown,
            verl_version=VerlPathRequest(verl_path, "--verl-path") if verl_path is not None else None,
            megatron_core_version=megatron_core_version,
            memo=memo,
            allow_source=allow_source,
        )
    except InputError as exc:
        return VersionMatrix(shown, error=str(exc))
    matrix = VersionMatrix(shown, chosen=base.framework_version, reason=base.version_reason)
    if base.framework == "verl":
        for version in catalogue().versions:
            job = resolve_script(
                path,
                env,
                model_config=model_config,
                display=shown,
                verl_version=(version, "--versions"),
                megatron_core_version=megatron_core_version,
                memo=memo,
                allow_source=allow_source,
            )
            valid, first = judged(job)
            matrix.rows.append(VersionRow("verl", (version,), version in base.accepted_versions, valid, first))
        if verl_path is not None and base.version_source == "path":
            valid, first = judged(base)
            unknown = {"VERL-CFG-UNKNOWN-KEY", "HYDRA-OVERRIDE"}
            accepted = not any(f.rule in unknown and f.severity == "error" for f in run_rules(base)[0])
            matrix.rows.append(
                VersionRow("verl-path", (base.framework_version,), accepted, valid, first, directory=verl_path)
            )
    matrix.megatron_core_verl = base.framework_version
    if base.layouts:
        for minor in MINORS:
            job = replace(base, megatron_core_version=minor)
            layout_errors = [f for f in run_rules(job)[0] if f.rule.startswith("MCORE-PS-") and f.severity == "error"]
            row = VersionRow(
                "megatron-core", (minor,), None, not layout_errors, layout_errors[0] if layout_errors else None
            )
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
    if (
        layout is not None
        and job.cluster.world.known
        and all(t.known for t in (layout.tp, layout.pp, layout.cp, layout.ep, layout.etp_setting, layout.vpp))
    ):
        built = build_grid(
            world=job.cluster.world.value,
            tp=layout.tp.value,
            pp=layout.pp.value,
            cp=layout.cp.value,
            ep=layout.ep.value,
            etp=layout.etp_setting.value,
            vpp=layout.vpp.value,
            order=layout.order,
        )
        grid = built if isinstance(built, Grid) else None
    rollout = None
    ro = job.rollout
    ro_world = ro.gpus if ro is not None and ro.gpus is not None else job.cluster.world
    if ro is not None and ro_world.known and ro_world.value and all(t.known for t in (ro.tp, ro.dp, ro.pp)):
        engine = ro.engine.value if ro.engine.known else "rollout"
        rollout = rollout_replicas(
            ro_world.value, str(engine), ro.tp.value, 1 if ro.dp_in_engine else ro.dp.value, ro.pp.value
        )
    return layout, grid, rollout


@dataclass
class MemoryResult:
    """The memory estimate of one script, and the MEM-* findings of its check."""

    path: str
    estimate: object | None = None  # shardcheck.memory.estimate.MemoryEstimate
    findings: list = field(default_factory=list)
    error: str | None = None
    step: object | None = None  # shardcheck.estimate.step_time.StepTime: the model's seconds per step
    version: str | None = None  # which framework version's defaults the estimate used, and why
    internal: bool = False  # the error is an internal error of shardcheck (exit status 4)

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 4 if self.internal else 2
        return 1 if any(f.severity == "error" for f in self.findings) else 0


def memory(
    path: str | Path,
    env: dict[str, str] | None = None,
    *,
    model_config: str | None = None,
    display: str | None = None,
    device: str | None = None,
    host_memory: int | None = None,
    sample_tokens: tuple[int, int | None] | None = None,
    settings: Settings | None = None,
    allow_source: tuple[str | Path, ...] = (),
    **versions: str | None,
) -> MemoryResult:
    """What each device holds for the script's job: training stages, rollout, host. ``versions``: ``check``'s
    ``verl_version``, ``verl_path``, ``megatron_core_version``, ``vllm_version``, ``sglang_version``."""
    from shardcheck.memory.estimate import estimate

    result = check(
        path,
        env,
        model_config=model_config,
        display=display,
        device=device,
        host_memory=host_memory,
        sample_tokens=sample_tokens,
        settings=settings,
        allow_source=allow_source,
        **versions,
    )
    if result.error is not None:
        return MemoryResult(result.path, error=result.error)
    est = estimate(result.job, device)
    step = None
    if est.train is not None and result.job.layout("actor") is not None:
        from shardcheck.estimate.step_time import predict

        step, _ = predict(result.job)
    job = result.job
    version = job.version_reason or (f"{job.framework} {job.framework_version}" if job.framework_version else None)
    return MemoryResult(
        result.path,
        est,
        [f for f in result.findings if f.rule.startswith(("MEM-", "VALUE-BAD-"))],
        step=step,
        version=version,
    )
