"""Accelerator probes: what a launch script asks the machine it runs on, answered from the cluster the user names.

Scripts pick their device or count their accelerators at run time: ``$(python3 -c 'import torch_npu'
2>/dev/null && echo npu || echo gpu)``, ``$(nvidia-smi -L | wc -l)``, ``python -c "import torch;
print(torch.cuda.device_count())"``, ``npu-smi info``, ``$SLURM_GPUS_ON_NODE``. shardcheck never runs them: a
command substitution is recognised as a probe by what its commands ask (an import of ``torch_npu``, a call of
``device_count()``, ``nvidia-smi`` / ``npu-smi``) and answered from ``--device KIND`` and the settings ``device``,
``nodes``, ``devices-per-node``. Without them the probe's value stays unknown, naming the option that settles it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

_COUNT_TAILS = (("wc", "-l"), ("wc", "--lines"))
_NULL_REDIRECTS = re.compile(r"(?:\d*>>?|&>>?|\d*>&\d+|<)\s*(?:/dev/null|&\d+)?")
_IMPORTS_NPU = re.compile(
    r"\b(?:import\s+(?:[\w.]+\s*,\s*)*torch_npu\b|from\s+torch_npu\b|__import__\(\s*['\"]torch_npu)"
)
_COUNT_CALL = re.compile(r"\btorch\.(cuda|npu)\.device_count\s*\(\s*\)")
_AVAILABLE_CALL = re.compile(r"\btorch\.(cuda|npu)\.is_available\s*\(\s*\)")
_PRINTS = re.compile(r"\bprint\s*\(")


@dataclass(frozen=True, slots=True)
class Machine:
    """The cluster a check is run for: the device kind (cuda | npu), devices per node and nodes, each None when
    not given; ``given`` says how the user named it (``--device h100``), for the report."""

    kind: str | None = None
    devices_per_node: int | None = None
    nodes: int | None = None
    given: str = ""

    @property
    def said(self) -> str:
        return self.given or "--device"


def machine_for(device: str | None, settings, kind_of) -> Machine | None:
    """The Machine of ``--device`` (else the setting ``device``) and the settings ``nodes`` /
    ``devices-per-node``; None when none of them is given. ``kind_of(name)``: the preset's kind (cuda | npu),
    None for a device without one (``--device-memory``)."""
    given: list[str] = []
    kind = None
    choice = device if device is not None else getattr(settings, "device", None)
    if choice is not None and (kind := kind_of(choice)) is not None:
        given.append(f"--device {choice}" if device is not None else f"device = {choice!r} in {settings.source}")
    per_node = getattr(settings, "devices_per_node", None)
    nodes = getattr(settings, "nodes", None)
    if per_node is not None:
        given.append(f"devices-per-node = {per_node}")
    if nodes is not None:
        given.append(f"nodes = {nodes}")
    if kind is None and per_node is None and nodes is None:
        return None
    return Machine(kind, per_node, nodes, ", ".join(given))


@dataclass(frozen=True, slots=True)
class Answer:
    """A probe's output (None: not known) and what settles or settled it."""

    text: str | None
    note: str  # "accelerator probe, answered by --device h100" (the origin's text) / why it is unknown


def _body(text: str) -> str | None:
    text = text.strip()
    if text.startswith("$(") and text.endswith(")") and not text.startswith("$(("):
        return text[2:-1]
    if text.startswith("`") and text.endswith("`"):
        return text[1:-1]
    return None


def _tokens(body: str) -> list[str] | None:
    lexer = shlex.shlex(_NULL_REDIRECTS.sub(" ", body), posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


def _split(tokens: list[str], ops: tuple[str, ...]) -> list[tuple[str | None, list[str]]]:
    parts: list[tuple[str | None, list[str]]] = [(None, [])]
    for tok in tokens:
        if tok in ops:
            parts.append((tok, []))
        else:
            parts[-1][1].append(tok)
    return parts


@dataclass(frozen=True, slots=True)
class _Run:
    """What one command or pipeline would do on the machine: its status and output (None: unknown), and
    whether it asked the machine anything."""

    status: bool | None
    output: str | None
    probe: bool


def _command(words: list[str], machine: Machine | None) -> _Run | None:
    """One simple command; None when it is neither a probe nor plain output (then the substitution is not one)."""
    if not words:
        return None
    name = words[0].rsplit("/", 1)[-1]
    kind = machine.kind if machine else None
    if name == "echo":
        said = [w for w in words[1:] if w not in ("-n", "-e")]
        expands = any("$" in w or "`" in w for w in said)  # not expanded here: its output is not known
        return _Run(True, None if expands else " ".join(said), False)
    if name in ("true", ":"):
        return _Run(True, "", False)
    if name in ("nvidia-smi", "npu-smi"):
        wanted = "cuda" if name == "nvidia-smi" else "npu"
        present = None if kind is None else kind == wanted
        listing = name == "nvidia-smi" and any(
            w in ("-L", "--list-gpus") or w.startswith("--query-gpu") for w in words[1:]
        )
        if name == "npu-smi" and words[1:3] == ["info", "-l"]:
            listing = True
        per_node = machine.devices_per_node if machine else None
        if present is False:
            return _Run(False, "", True)
        if listing:
            return _Run(present, None if per_node is None or present is None else "\n" * per_node, True)
        return _Run(present, None, True)
    if name in ("command", "which", "type", "hash") and any(
        w.rsplit("/", 1)[-1] in ("nvidia-smi", "npu-smi") for w in words[1:]
    ):
        tool = next(w.rsplit("/", 1)[-1] for w in words[1:] if w.rsplit("/", 1)[-1] in ("nvidia-smi", "npu-smi"))
        wanted = "cuda" if tool == "nvidia-smi" else "npu"
        return _Run(None if kind is None else kind == wanted, None, True)
    if re.fullmatch(r"python(?:3(?:\.\d+)?)?", name) and "-c" in words:
        k = words.index("-c")
        code = words[k + 1] if k + 1 < len(words) else ""
        return _python(code, machine)
    return None


def _python(code: str, machine: Machine | None) -> _Run | None:
    kind = machine.kind if machine else None
    npu = _IMPORTS_NPU.search(code) is not None
    count = _COUNT_CALL.search(code)
    available = _AVAILABLE_CALL.search(code)
    if not (npu or count or available):
        return None
    status: bool | None = True
    if npu:
        status = None if kind is None else kind == "npu"
    if status is False:
        return _Run(False, "", True)
    if not _PRINTS.search(code):
        return _Run(status, "", True)
    if count is not None:
        per_node = machine.devices_per_node if machine else None
        if kind is None or per_node is None:
            return _Run(status, None, True)
        return _Run(status, str(per_node if count.group(1) == kind else 0), True)
    if available is not None:
        return _Run(status, None if kind is None else str(available.group(1) == kind), True)
    return _Run(status, None, True)  # it prints something else: not known


_VISIBLE = re.compile(r"\$\{?(CUDA_VISIBLE_DEVICES|ASCEND_RT_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES)\b")
_SPLIT_COMMAS = (("tr", ",", "\\n"), ("tr", ",", "\n"), ("tr", ",", " "))
_AWK_FIELDS = re.compile(r"^\{\s*print\s+NF\s*;?\s*\}$")


def _visible_count(stages: list[list[str]], machine: Machine | None, lookup) -> _Run | None:
    """``echo $CUDA_VISIBLE_DEVICES | tr ',' '\\n' | wc -l`` / ``| awk -F, '{print NF}'``: the devices visible on
    a node. Set by the script or --env: its items; else the launcher sets it to the node's devices, the
    devices-per-node of the machine named (said in the value's origin)."""
    names = [m.group(1) for w in stages[0][1:] for m in [_VISIBLE.search(w)] if m] if stages[0] else []
    if not stages[0] or stages[0][0] != "echo" or len(names) != 1:
        return None
    tail = [tuple(s) for s in stages[1:]]
    awk = (
        len(tail) == 1
        and tail[0][:1] == ("awk",)
        and tail[0][1] in ("-F,", "-F", "-F',")
        and bool(_AWK_FIELDS.match(tail[0][-1]))
    )
    counts = (*_COUNT_TAILS, ("wc", "-w"), ("wc", "--words"))  # lines or words: one per device either way
    if not (awk or (len(tail) == 2 and tail[0] in _SPLIT_COMMAS and tail[1] in counts)):
        return None
    is_set, value = lookup(names[0]) if lookup is not None else (False, None)
    if is_set:  # the script or --env sets it: its own count (unknown when its value is)
        if value is None:
            return _Run(True, None, True)
        # an empty value: echo prints one empty line (wc counts 1 line, 0 words); awk sees no field
        empty = "0" if awk or tail[-1][1] in ("-w", "--words") else "1"
        return _Run(True, str(len(value.split(","))) if value else empty, True)
    per_node = machine.devices_per_node if machine else None
    return _Run(True, None if per_node is None else str(per_node), True)


def _pipeline(words: list[str], machine: Machine | None, lookup=None) -> _Run | None:
    stages = [w for _, w in _split(words, ("|",))]
    visible = _visible_count(stages, machine, lookup)
    if visible is not None:
        return visible
    first = _command(stages[0], machine)
    if first is None:
        return None
    out = first.output
    for stage in stages[1:]:
        if tuple(stage) in _COUNT_TAILS:
            out = None if out is None else str(len(out.splitlines()))
        else:
            return None  # a filter shardcheck does not model
    return _Run(first.status, out, first.probe)


def run_status(words: list[str], machine: Machine | None, lookup=None) -> _Run | None:
    """``A && B || C`` lists of probes and echos (bash's left-to-right and-or evaluation); None when any part
    is something else."""
    parts = _split(words, ("&&", "||", ";"))
    status: bool | None = True
    output: str | None = ""
    asked = False
    for op, part in parts:
        runs = True if op in (None, ";") else (status if op == "&&" else (None if status is None else not status))
        if runs is False or (not part and op == ";"):  # `a; b;`: nothing after the last `;`
            continue
        run = _pipeline(part, machine, lookup)
        if run is None:
            return None
        asked = asked or run.probe
        if runs is None:  # whether it runs is unknown: its output may or may not be there
            output, status = None, None
            continue
        output = None if output is None or run.output is None else output + run.output + ("\n" if run.output else "")
        status = run.status
    return _Run(status, output, asked)


def answer(text: str, machine: Machine | None, line: int, lookup=None) -> Answer | None:
    """The output of the command substitution ``text`` when it is an accelerator probe; None when it is not one.
    ``lookup(NAME)``: (whether the script or --env sets NAME, its value or None when unknown)."""
    body = _body(text)
    if body is None:
        return None
    words = _tokens(body)
    if not words:
        return None
    run = run_status(words, machine, lookup)
    if run is None or not run.probe:
        return None
    if run.output is not None and machine is not None:
        return Answer(run.output.rstrip("\n"), f"accelerator probe, answered by {machine.said}")  # at its line
    if machine is None or machine.kind is None:
        why = f"give {_DEVICE} (e.g. --device h100) to answer it"
    elif machine.devices_per_node is None and run_status(words, replace(machine, devices_per_node=1), lookup).output:
        why = f"set {_PER_NODE} to answer it"
    else:
        why = "its output is more than shardcheck models; give the value it sets with --env"
    return Answer(None, f"line {line}: an accelerator probe, not run; {why}")


_DEVICE = "--device"
_PER_NODE = "devices-per-node in [tool.shardcheck]"


def settled_by(reason: str | None) -> str | None:
    """The option that settles an unknown value whose reason is ``reason``: ``--device`` or the setting
    devices-per-node when an accelerator probe left it unknown; None otherwise."""
    if not reason or "accelerator probe, not run" not in reason:
        return None
    return _DEVICE if f"give {_DEVICE}" in reason else _PER_NODE if f"set {_PER_NODE}" in reason else None


def words_of(text: str) -> list[str] | None:
    """The words of a condition's command text, redirections to /dev/null left out."""
    return _tokens(text)


def condition(words: list[str], machine: Machine | None) -> bool | None | str:
    """The exit status of an ``if``/``&&`` condition that is a probe (``if python -c 'import torch_npu'; then``);
    ``"no"`` when the words are not a probe."""
    run = run_status(words, machine)
    if run is None or not run.probe:
        return "no"
    return run.status


ENV_PROBES = {"SLURM_GPUS_ON_NODE": "devices_per_node", "SLURM_NNODES": "nodes", "SLURM_JOB_NUM_NODES": "nodes"}


def env_answer(name: str, machine: Machine | None) -> str | None:
    """``$SLURM_GPUS_ON_NODE`` / ``$SLURM_NNODES``: what the scheduler sets on the machine named."""
    attr = ENV_PROBES.get(name)
    value = getattr(machine, attr) if machine is not None and attr else None
    return None if value is None else str(value)
