"""Project settings: ``[tool.shardcheck]`` in the nearest ``pyproject.toml`` at or above a script, inside
its git work tree (never above it: a file in a shared parent directory must not silence the checks), or
the file given with ``--config``. Only what the caller owns is trusted (git's ``safe.directory`` rule): a
``.git`` someone else owns makes no work tree, and a ``pyproject.toml`` someone else owns is not obeyed. The
search starts from the script's folder as its path is given (a symlink's, not its target's).

    [tool.shardcheck]
    select = ["MCORE-", "VERL-"]   # rule ids or prefixes to report (default: all)
    ignore = ["VERL-MC-ETP-MISMATCH"]
    fail-on = "error"              # the lowest severity that makes the exit status 1: error | warning | info
    verl-version = "0.9.0"         # the verl to judge against (default: inferred from the script's keys)
    # verl-path = "../verl"        # or: a verl checkout / fork / site-packages whose config tree to read

    [tool.shardcheck.per-file-ignores]
    "recipes/*.sh" = ["MEM-"]      # glob (relative to the pyproject.toml's folder, or a file name) -> ids

The command line's ``--select`` / ``--ignore`` / ``--fail-on`` replace the file's values.

"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from shardcheck.errors import SettingsError
from shardcheck.inputs.read_policy import owned_by_caller, work_tree_root

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
_KEYS = (
    "select",
    "ignore",
    "fail-on",
    "verl-version",
    "verl-path",
    "device",
    "nodes",
    "devices-per-node",
    "online",
    "per-file-ignores",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    select: tuple[str, ...] = ()  # empty: every rule
    ignore: tuple[str, ...] = ()
    fail_on: str = "error"
    verl_version: str | None = None  # verl-version: the verl to judge against (frameworks/verl/versions.py)
    verl_path: str | None = None  # verl-path: a verl directory read as data (frameworks/verl/verl_path.py), absolute
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (glob, ids)
    device: str | None = None  # device: the cluster's device preset; answers accelerator probes (shell_probe.py)
    nodes: int | None = None  # nodes / devices-per-node: answer $SLURM_NNODES, nvidia-smi -L | wc -l, ...
    devices_per_node: int | None = None
    online: bool = False  # online: models may be read from the Hugging Face Hub (models/hub.py)

    source: str | None = None  # the pyproject.toml they came from
    refused: str | None = None  # why the nearest pyproject.toml was not obeyed (someone else owns it)
    lines: tuple[tuple[str, int], ...] = ()  # (id as written, line in source), to anchor warnings about ids

    def reports(self, rule_id: str, path: str | Path | None = None) -> bool:
        from shardcheck.rules.registry import current_id

        if self.select and not any(rule_id.startswith(current_id(p)) for p in self.select):
            return False
        ignored = self.ignore + (self.ignored_for(path) if path is not None else ())
        return not any(rule_id.startswith(current_id(p)) for p in ignored)

    def ignored_for(self, path: str | Path) -> tuple[str, ...]:
        """The ids per-file-ignores names for ``path``: a glob matches the path relative to the settings
        file's folder, or the file name alone."""
        if not self.per_file_ignores:
            return ()
        p = Path(os.path.abspath(path))  # the path as given (a symlinked script is matched where the link lies)
        rel = p.as_posix()
        if self.source is not None:
            try:
                rel = p.relative_to(Path(os.path.abspath(self.source)).parent).as_posix()
            except ValueError:
                pass
        out: list[str] = []
        for pattern, ids in self.per_file_ignores:
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(p.name, pattern):
                out.extend(ids)
        return tuple(out)

    def fails(self, severity: str) -> bool:
        return SEVERITY_RANK[severity] <= SEVERITY_RANK[self.fail_on]

    def overridden(
        self, *, select: list[str] | None = None, ignore: list[str] | None = None, fail_on: str | None = None
    ) -> Settings:
        """These settings with the command line's values in place of the file's."""
        changes: dict = {}
        if select is not None:
            changes["select"] = split_ids(select)
        if ignore is not None:
            changes["ignore"] = split_ids(ignore)
        if fail_on is not None:
            changes["fail_on"] = fail_on
        return replace(self, **changes) if changes else self

    def id_problems(self) -> list[tuple[str, str | None, str | None, int | None]]:
        """(message, fix, file, line) for every id in the settings that names no current rule."""
        from shardcheck.rules.ids import SUGGESTIONS
        from shardcheck.rules.registry import id_problem

        written = dict(self.lines)
        out = []
        named = [("select", i) for i in self.select] + [("ignore", i) for i in self.ignore]
        named += [(f"per-file-ignores {pattern!r}", i) for pattern, ids in self.per_file_ignores for i in ids]
        for setting, i in named:
            where = f"[tool.shardcheck] {setting}" if self.source else f"--{setting}"
            problem = id_problem(i, where, suggest=len(out) < SUGGESTIONS)
            if problem is not None:
                out.append((*problem, self.source, written.get(i)))
        return out


def split_ids(values) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        out.extend(part.strip().upper() for part in str(value).split(",") if part.strip())
    return tuple(out)


_QUOTED = re.compile(r"""(["'])(.*?)\1""")


def _lines(text: str, ids: list[str]) -> tuple[tuple[str, int], ...]:
    """The line of each id's first mention in the file (tomllib gives no positions)."""
    first: dict[str, int] = {}  # each quoted word's first line: one pass, not one per id (60,000 ids)
    for n, row in enumerate(text.upper().splitlines(), 1):
        for m in _QUOTED.finditer(row):
            first.setdefault(m.group(2), n)
    return tuple((i, first[i]) for i in ids if i in first)


MAX_SETTINGS_BYTES = 1 << 20


def script_folder(script: str | Path) -> Path:
    """The folder settings are looked for from: the script's folder as its path is given, made absolute but with
    no symlink followed (a link to a script elsewhere takes the settings of where the link lies, as bash's ``$0``
    names the link, never those of its target's folder)."""
    return Path(os.path.abspath(script)).parent


def _untrusted(path: Path) -> str:
    try:
        owner = f"uid {os.lstat(path).st_uid}"
    except (OSError, ValueError):
        owner = "someone else"
    return f"{path} is owned by {owner}, not by you (uid {os.geteuid()}): not obeyed"


def settings_candidates(start: Path) -> list[Path]:
    """Where settings may come from for a script in ``start``: each directory from ``start`` up to the top
    of its git work tree, never above it; outside a work tree, ``start`` alone."""
    root = work_tree_root(start)
    if root is None:
        return [start]
    out = [start]
    for directory in start.parents:
        if not directory.is_relative_to(root):
            break
        out.append(directory)
    return out


def _line_of(text: str, name: str) -> int:
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith((f"{name} ", f"{name}=", f'"{name}"')):
            return number
    return 1


def _id_list(value, what: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
        raise SettingsError(
            f"{where}: [tool.shardcheck] {what} = {str(value)[:60]}: expected a list of rule ids or "
            'prefixes such as ["MCORE-", "VERL-CFG-UNKNOWN-KEY"] (an empty prefix would match every '
            "rule)"
        )
    return split_ids(value)


def refuse_unknown_ids(ids: tuple[str, ...], where: str) -> None:
    """SettingsError for the first id that names no rule and no prefix of one (as ruff refuses an unknown rule
    selector), with a "did you mean" from difflib over the ids and prefixes; a renamed or removed id is applied
    or dropped and warned at check time (SUPPRESS-UNKNOWN-ID)."""
    from shardcheck.rules.ids import check_id
    from shardcheck.rules.registry import all_rules

    rules = all_rules()
    for written in ids:
        found = check_id(written, rules)
        if found.kind == "unknown":
            hint = f"did you mean {found.target}?" if found.target else "`shardcheck rules` lists the ids"
            raise SettingsError(f"{where} names {written}, which is no rule id or prefix; {hint}")


def read_settings(candidate: Path, *, required: bool = False) -> Settings | None:
    """The ``[tool.shardcheck]`` settings of one TOML file; None when it has none (unless ``required``)."""
    import tomllib

    try:
        if not candidate.is_file():
            if required:
                raise SettingsError(f"{candidate}: no such file; --config takes a pyproject.toml")
            return None
        if candidate.stat().st_size > MAX_SETTINGS_BYTES:
            raise SettingsError(f"{candidate}:1: larger than {MAX_SETTINGS_BYTES >> 20} MiB; not a settings file")
        text = candidate.read_bytes().decode("utf-8")
        doc = tomllib.loads(text)
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise SettingsError(f"{candidate}:1: cannot be read as TOML (nested too deep); fix or remove it") from None
    except (OSError, ValueError) as exc:  # ValueError: TOMLDecodeError, UnicodeDecodeError, a 5,000-digit integer
        said = " ".join(str(exc).split())[:160]
        if "integer string conversion" in said:
            said = "an integer of more than 4,300 digits"
        raise SettingsError(f"{candidate}:1: cannot be read as TOML ({said}); fix or remove it") from None
    tool = doc.get("tool", {})
    table = tool.get("shardcheck") if isinstance(tool, dict) else None
    if table is None:
        if required:
            raise SettingsError(f"{candidate}:1: has no [tool.shardcheck] table; add one or drop --config")
        return None
    if not isinstance(table, dict):
        raise SettingsError(f"{candidate}:1: [tool.shardcheck] must be a table")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise SettingsError(
            f"{candidate}:{_line_of(text, unknown[0])}: [tool.shardcheck] has no setting "
            f"{unknown[0]!r}; use {', '.join(_KEYS[:-1])} or {_KEYS[-1]}"
        )
    fail_on = table.get("fail-on", "error")
    if not isinstance(fail_on, str) or fail_on not in SEVERITY_RANK:
        raise SettingsError(
            f"{candidate}:{_line_of(text, 'fail-on')}: [tool.shardcheck] fail-on = "
            f"{str(fail_on)[:60]}; use error, warning or info"
        )
    select = _id_list(table.get("select", []), "select", f"{candidate}:{_line_of(text, 'select')}")
    ignore = _id_list(table.get("ignore", []), "ignore", f"{candidate}:{_line_of(text, 'ignore')}")
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise SettingsError(f"{candidate}:1: [tool.shardcheck.per-file-ignores] maps globs to lists of rule ids")
    pfi = tuple(
        (str(pattern), _id_list(ids, f"per-file-ignores {pattern!r}", f"{candidate}:1"))
        for pattern, ids in per_file.items()
    )
    verl_version = table.get("verl-version")
    if verl_version is not None and not isinstance(verl_version, str):
        raise SettingsError(
            f"{candidate}:{_line_of(text, 'verl-version')}: [tool.shardcheck] verl-version = "
            f'{str(verl_version)[:60]}; give a string such as "0.9.0"'
        )
    verl_path = table.get("verl-path")
    if verl_path is not None and not isinstance(verl_path, str):
        raise SettingsError(
            f"{candidate}:{_line_of(text, 'verl-path')}: [tool.shardcheck] verl-path = "
            f'{str(verl_path)[:60]}; give a folder as a string such as "../verl"'
        )
    if verl_path is not None and "\x00" in verl_path:
        raise SettingsError(
            f"{candidate}:{_line_of(text, 'verl-path')}: [tool.shardcheck] verl-path holds a NUL byte; give a folder"
        )
    if verl_path is not None and verl_version is not None:
        raise SettingsError(
            f"{candidate}:{_line_of(text, 'verl-path')}: [tool.shardcheck] sets both verl-version and verl-path; "
            "keep one"
        )
    cluster = _cluster_settings(table, text, candidate)
    if verl_path is not None:  # relative to the settings file's folder
        verl_path = str((Path(candidate).resolve().parent / Path(verl_path).expanduser()).resolve())
    every = [*select, *ignore, *(i for _, ids in pfi for i in ids)]
    lines = dict(_lines(text, every))
    for setting, ids in [("select", select), ("ignore", ignore), *((f"per-file-ignores {p!r}", i) for p, i in pfi)]:
        for written in ids:
            line = lines.get(written) or _line_of(text, setting.split()[0])
            refuse_unknown_ids((written,), f"{candidate}:{line}: [tool.shardcheck] {setting}")
    return Settings(
        select=select,
        ignore=ignore,
        fail_on=fail_on,
        per_file_ignores=pfi,
        verl_version=verl_version,
        verl_path=verl_path,
        **cluster,
        source=str(candidate),
        lines=_lines(text, every),
    )


def _cluster_settings(table: dict, text: str, candidate: Path) -> dict:
    """``device`` (a preset name), ``nodes`` and ``devices-per-node`` (positive integers), ``online`` (a bool)."""

    def bad(key: str, want: str) -> SettingsError:
        shown = str(table[key])[:60]
        return SettingsError(f"{candidate}:{_line_of(text, key)}: [tool.shardcheck] {key} = {shown}; {want}")

    out: dict = {}
    device = table.get("device")
    if device is not None:
        if not isinstance(device, str):
            raise bad("device", 'give a device preset as a string such as "h100"')
        from shardcheck.errors import UsageError
        from shardcheck.memory.devices import find_device

        try:
            find_device(device)
        except UsageError as exc:
            raise SettingsError(f"{candidate}:{_line_of(text, 'device')}: {exc}") from None
        out["device"] = device
    for key in ("nodes", "devices-per-node"):
        value = table.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 1 << 20):
            raise bad(key, "give a positive whole number such as 8")
        if value is not None:
            out[key.replace("-", "_")] = value
    if table.get("online") is not None and not isinstance(table["online"], bool):
        raise bad("online", "give true or false")
    if table.get("online") is not None:
        out["online"] = table["online"]
    return out


def load_settings(start: Path, config: Path | None = None) -> Settings:
    """``config`` when given, else the settings of the nearest pyproject.toml with a [tool.shardcheck]
    table from ``start`` up to the top of its git work tree (``settings_candidates``)."""
    if config is not None:
        return read_settings(config, required=True)  # type: ignore[return-value]
    for directory in settings_candidates(start):
        candidate = directory / "pyproject.toml"
        if os.path.lexists(candidate) and not owned_by_caller(candidate):
            return Settings(refused=_untrusted(candidate))  # the nearest file decides, as when it is read
        found = read_settings(candidate)
        if found is not None:
            return found
    return Settings()
