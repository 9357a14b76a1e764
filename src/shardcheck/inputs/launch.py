"""Find the training launch among a script's commands: ``python3 -m verl.trainer.main_ppo ...``.

Launchers recognised in front of the Python entry point: ``torchrun`` / ``python -m
torch.distributed.run``, ``ray job submit ... --`` (and the ``NAME=value`` words its entrypoint starts with),
``uv run``, ``nohup``, ``env``, ``timeout``, ``time``, ``exec``, ``srun``, ``numactl``, ``stdbuf``,
``apptainer`` / ``singularity exec [options] IMAGE`` and ``deepspeed [options] SCRIPT``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from shardcheck.inputs.shell_values import Command, Field
from shardcheck.origin import Origin

_PYTHON = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
# Python interpreter options that take an argument (python --help).
_PYTHON_OPTS_WITH_ARG = frozenset({"-X", "-W", "-c", "--check-hash-based-pycs"})
# Options of simple wrappers that take an argument.
_WRAPPER_OPTS_WITH_ARG = {
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "srun": {
        "-N",
        "-n",
        "-p",
        "-A",
        "-t",
        "-J",
        "-c",
        "-w",
        "--nodes",
        "--ntasks",
        "--partition",
        "--account",
        "--time",
        "--job-name",
        "--cpus-per-task",
        "--nodelist",
        "--gres",
        "--container-image",
        "--container-mounts",
        "--mpi",
        "-o",
        "-e",
        # more srun options that take a value (Slurm's srun(1) manual; given as `--opt value` as well as
        # `--opt=value`): the words after them are not the command
        "--ntasks-per-node",
        "--ntasks-per-gpu",
        "--ntasks-per-socket",
        "--gpus",
        "-G",
        "--gpus-per-node",
        "--gpus-per-task",
        "--cpus-per-gpu",
        "--mem",
        "--mem-per-cpu",
        "--mem-per-gpu",
        "--export",
        "--output",
        "--error",
        "--input",
        "-i",
        "--chdir",
        "-D",
        "--qos",
        "-q",
        "--reservation",
        "--constraint",
        "-C",
        "--exclude",
        "-x",
        "--distribution",
        "-m",
        "--cpu-bind",
        "--mem-bind",
        "--gpu-bind",
        "--container-name",
        "--container-workdir",
        "--container-env",
        "--wait",
        "-W",
        "--dependency",
        "-d",
        "--nodefile",
        "-F",
        "--signal",
        "--network",
        "--het-group",
        "--comment",
    },
    "numactl": set(),
    "stdbuf": set(),
    "env": {"-u", "--unset", "-C", "--chdir"},
    "uv": {"--python", "--with", "--project", "--directory", "--extra", "--group", "--env-file", "-p"},
}
# `apptainer exec` / `singularity exec` options that take a value (apptainer-exec(1), apptainer 1.4: the options
# shown with `=""` or `=[]`; those shown `[=false]` are switches). The word after the options is the image.
_CONTAINER_OPTS_WITH_ARG = frozenset(
    {
        "--add-caps",
        "--app",
        "--apply-cgroups",
        "--authfile",
        "-B",
        "--bind",
        "--blkio-weight",
        "--blkio-weight-device",
        "--cdi",
        "--cpu-shares",
        "--cpus",
        "--cpuset-cpus",
        "--cpuset-mems",
        "--dns",
        "--docker-host",
        "--drop-caps",
        "--env",
        "--env-file",
        "--fusemount",
        "-H",
        "--home",
        "--hostname",
        "--memory",
        "--memory-reservation",
        "--memory-swap",
        "--mount",
        "--network",
        "--network-args",
        "--no-mount",
        "-o",
        "--overlay",
        "--pem-path",
        "--pids-limit",
        "--pwd",
        "-S",
        "--scratch",
        "--security",
        "-W",
        "--workdir",
    }
)
# deepspeed's launcher options that take a value (deepspeed/launcher/runner.py parse_args, DeepSpeed
# 2d991ba35); the first other word is the training script, the words after it its arguments.
_DEEPSPEED_OPTS_WITH_ARG = frozenset(
    {
        "-H",
        "--hostfile",
        "-i",
        "--include",
        "-e",
        "--exclude",
        "--num_nodes",
        "--min_elastic_nodes",
        "--max_elastic_nodes",
        "--num_gpus",
        "--num_accelerators",
        "--master_port",
        "--master_addr",
        "--node_rank",
        "--launcher",
        "--launcher_args",
        "--enable_each_rank_log",
        "--autotuning",
        "--comment",
        "--account",
        "--bind_core_list",
        "--ssh_port",
    }
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_TORCHRUN_OPTS_WITH_ARG = frozenset(
    {
        "--nnodes",
        "--nproc-per-node",
        "--nproc_per_node",
        "--node-rank",
        "--node_rank",
        "--master-addr",
        "--master_addr",
        "--master-port",
        "--master_port",
        "--rdzv-backend",
        "--rdzv_backend",
        "--rdzv-endpoint",
        "--rdzv_endpoint",
        "--rdzv-id",
        "--rdzv_id",
        "--rdzv-conf",
        "--rdzv_conf",
        "--max-restarts",
        "--max_restarts",
        "--monitor-interval",
        "--monitor_interval",
        "--start-method",
        "--start_method",
        "--role",
        "--log-dir",
        "--log_dir",
        "-r",
        "--redirects",
        "-t",
        "--tee",
        "--local-addr",
        "--local_addr",
        "--logs-specs",
        "--logs_specs",
        "--local-ranks-filter",
        "--local_ranks_filter",
    }
)


@dataclass(frozen=True, slots=True)
class Launch:
    """A Python entry point the script starts, with the words after it."""

    module: str | None  # ``verl.trainer.main_ppo`` for ``-m``; None for a script path
    script: str | None  # ``train.py`` when a file is run
    args: tuple[Field, ...]
    origin: Origin
    command: Command
    launcher: tuple[str, ...] = ()  # the wrappers in front, e.g. ("ray job submit", "torchrun")
    launcher_args: dict[str, Field] | None = None  # torchrun's --nnodes / --nproc-per-node

    @property
    def entry(self) -> str:
        return self.module or self.script or "?"


def find_launches(commands: tuple[Command, ...]) -> list[Launch]:
    """Every Python entry point started by ``commands`` (after wrappers are peeled off)."""
    found: list[Launch] = []
    for command in commands:
        launch = _launch_of(command)
        if launch is not None:
            found.append(launch)
    return found


def _launch_of(command: Command) -> Launch | None:
    words = list(command.fields)
    launcher: list[str] = []
    launcher_args: dict[str, Field] = {}
    i = 0
    while i < len(words):
        name = words[i].text
        if name is None:
            return _module_after_unknown(words, i, command, launcher, launcher_args)
        base = name.rsplit("/", 1)[-1]
        if base in ("nohup", "time", "exec", "command", "builtin"):
            i += 1
            continue
        if base in _WRAPPER_OPTS_WITH_ARG:
            launcher.append(base)
            i += 1
            if base == "uv" and i < len(words) and words[i].text == "run":
                i += 1
            if base == "timeout":
                i = _skip_options(words, i, _WRAPPER_OPTS_WITH_ARG[base])
                i += 1  # the duration
                continue
            i = _skip_options(words, i, _WRAPPER_OPTS_WITH_ARG[base], env_assignments=base == "env")
            continue
        if base == "ray" and i + 2 < len(words) and words[i + 1].text == "job" and words[i + 2].text == "submit":
            rest = [w.text for w in words[i + 3 :]]
            if "--" not in rest:
                return None
            launcher.append("ray job submit")
            i = i + 3 + rest.index("--") + 1
            # the entrypoint is a shell command: `-- PYTHONUNBUFFERED=1 python3 -m ...` sets the job's environment
            env = []
            while i < len(words) and _ASSIGNMENT.match(words[i].render("?")):
                name = words[i].render("?").split("=", 1)[0]
                env.append((name, suffix_field(words[i], len(name) + 1)))
                i += 1
            if env:
                command = replace(command, env=command.env + tuple(env))
            continue
        if base in ("apptainer", "singularity") and i + 1 < len(words) and words[i + 1].text == "exec":
            launcher.append(f"{base} exec")
            i = _skip_options(words, i + 2, _CONTAINER_OPTS_WITH_ARG) + 1  # the options, then the image
            continue
        if base == "deepspeed":
            launcher.append("deepspeed")
            return _deepspeed(words, i + 1, command, launcher, launcher_args)
        if base == "torchrun":
            launcher.append("torchrun")
            i = _torchrun_options(words, i + 1, launcher_args)
            return _entry(words, i, command, launcher, launcher_args, torchrun=True)
        if _PYTHON.match(base):
            return _entry(words, i + 1, command, launcher, launcher_args)
        return None
    return None


def _deepspeed(words, i, command, launcher, launcher_args) -> Launch | None:
    """``deepspeed [options] SCRIPT ARGS``: its ``--num_nodes`` / ``--num_gpus`` kept as launcher arguments;
    ``--module`` runs SCRIPT as ``python -m``; ``--no_python`` runs it directly (not a Python entry point)."""
    module = False
    while i < len(words):
        text = words[i].render("?")
        if not text.startswith("-"):
            break
        key, eq, _ = text.partition("=")
        if key == "--no_python":
            return None
        module = module or key == "--module"
        if key in _DEEPSPEED_OPTS_WITH_ARG:
            value = suffix_field(words[i], len(key) + 1) if eq else (words[i + 1] if i + 1 < len(words) else None)
            if value is not None:
                launcher_args[key] = value
            i += 1 if eq else 2
        else:
            i += 1
    if i >= len(words):
        return None
    if module:
        if words[i].text is None:
            return None
        return Launch(
            words[i].text, None, tuple(words[i + 1 :]), words[i].origin, command, tuple(launcher), launcher_args or None
        )
    return _entry(words, i, command, launcher, launcher_args, script_only=True)


def _module_after_unknown(words, i, command, launcher, launcher_args) -> Launch | None:
    """The launcher word is unknown (e.g. an array set differently in two branches): a ``-m MODULE``
    later on the line still names the entry point; the words after it are its arguments."""
    for k in range(i + 1, len(words) - 1):
        text = words[k].text
        if text in ("-m", "--module") and words[k + 1].text and "." in (words[k + 1].text or ""):
            return Launch(
                words[k + 1].text,
                None,
                tuple(words[k + 2 :]),
                words[k].origin,
                command,
                tuple(launcher) + ("⟨unknown launcher⟩",),
                launcher_args or None,
            )
        if text is not None and text.endswith(".py") and not text.startswith("-"):
            return None
    return None


def _skip_options(words: list[Field], i: int, with_arg: set[str], *, env_assignments: bool = False) -> int:
    while i < len(words):
        text = words[i].text or ""
        if text == "--":
            return i + 1
        if env_assignments and "=" in text and not text.startswith("-"):
            i += 1
            continue
        if not text.startswith("-"):
            return i
        i += 2 if text in with_arg else 1
    return i


def _torchrun_options(words: list[Field], i: int, launcher_args: dict[str, Field]) -> int:
    while i < len(words):
        text = words[i].render("?")  # an option whose value is unknown is still an option
        if not text.startswith("-") or text in ("-m", "--module"):
            return i
        key, eq, _ = text.partition("=")
        norm = key.replace("_", "-")
        if eq:
            launcher_args[norm] = suffix_field(words[i], len(key) + 1)
            i += 1
        elif key in _TORCHRUN_OPTS_WITH_ARG and i + 1 < len(words):
            launcher_args[norm] = words[i + 1]
            i += 2
        else:
            i += 1
    return i


def suffix_field(field: Field, start: int) -> Field:
    """The part of ``field`` from character ``start`` on, keeping each segment's origin."""
    from shardcheck.inputs.shell_values import Seg

    segs: list[Seg] = []
    pos = 0
    for seg in field.segs:
        length = len(seg.text) if seg.text is not None else 1
        if pos + length <= start:
            pos += length
            continue
        if seg.text is not None and pos < start:
            segs.append(Seg(seg.text[start - pos :], seg.origin))
        else:
            segs.append(seg)
        pos += length
    return Field(tuple(segs), field.origin)


def _known_file_name(word: Field) -> str | None:
    """``"${DIR}/train.py"`` with DIR unknown: the file name, when the word's known tail names one."""
    last = word.segs[-1] if word.segs else None
    if last is None or last.text is None or "/" not in last.text:
        return None
    name = last.text.rsplit("/", 1)[1]
    return name if name.endswith(".py") else None


def _entry(words, i, command, launcher, launcher_args, *, torchrun: bool = False, script_only: bool = False):
    """The entry point from word ``i`` on: ``-m MODULE`` or a script (``script_only``: the first word is the script,
    as deepspeed takes it)."""
    while i < len(words):
        text = words[i].text
        if text is None:
            name = _known_file_name(words[i])
            if name is not None:  # the directory is unknown, the file name is not: judged by its name
                return Launch(
                    None, name, tuple(words[i + 1 :]), words[i].origin, command, tuple(launcher), launcher_args or None
                )
            return None
        if script_only:
            return Launch(
                None, text, tuple(words[i + 1 :]), words[i].origin, command, tuple(launcher), launcher_args or None
            )
        if text in ("-m", "--module") or (torchrun and text == "-m"):
            if i + 1 >= len(words) or words[i + 1].text is None:
                return None
            module = words[i + 1].text
            if module in ("torch.distributed.run", "torch.distributed.launch"):
                launcher.append(module)
                i = _torchrun_options(words, i + 2, launcher_args)
                return _entry(words, i, command, launcher, launcher_args, torchrun=True)
            return Launch(
                module, None, tuple(words[i + 2 :]), words[i].origin, command, tuple(launcher), launcher_args or None
            )
        if text.startswith("-m") and len(text) > 2 and not torchrun:
            return Launch(
                text[2:], None, tuple(words[i + 1 :]), words[i].origin, command, tuple(launcher), launcher_args or None
            )
        if text.startswith("-"):
            i += 2 if text in _PYTHON_OPTS_WITH_ARG else 1
            continue
        return Launch(
            None, text, tuple(words[i + 1 :]), words[i].origin, command, tuple(launcher), launcher_args or None
        )
    return None
