"""Project settings: ``[tool.shardcheck]`` in the nearest ``pyproject.toml`` at or above a script, inside
its git work tree (never above it), or the file given with ``--config``.

    [tool.shardcheck]
    select = ["MCORE-", "VERL-"]   # rule ids or prefixes to report (default: all)
    ignore = ["VERL-MC-ETP-MISMATCH"]
    fail-on = "error"              # the lowest severity that makes the exit status 1: error | warning | info
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shardcheck.errors import InputError

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    select: tuple[str, ...] = ()  # empty: every rule
    ignore: tuple[str, ...] = ()
    fail_on: str = "error"
    source: str | None = None  # the pyproject.toml they came from

    def reports(self, rule_id: str) -> bool:
        if self.select and not any(rule_id.startswith(p) for p in self.select):
            return False
        return not any(rule_id.startswith(p) for p in self.ignore)

    def fails(self, severity: str) -> bool:
        return SEVERITY_RANK[severity] <= SEVERITY_RANK[self.fail_on]


MAX_SETTINGS_BYTES = 1 << 20
_SETTING_NAMES = ("select", "ignore", "fail-on")


def work_tree_root(start: Path) -> Path | None:
    """The top of the git work tree holding ``start`` (the directory with ``.git``), or None."""
    for directory in [start, *start.parents]:
        if (directory / ".git").exists():
            return directory
    return None


def settings_candidates(start: Path) -> list[Path]:
    """Where settings may come from for a script in ``start``: each directory from ``start`` up to the top
    of its git work tree, never above it (a pyproject.toml in a shared parent directory must not silence
    the checks); outside a work tree, ``start`` alone."""
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


def _prefixes(value, name: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
        raise InputError(f"{where}: [tool.shardcheck] {name} = {value!r}: expected a list of rule ids or prefixes "
                         f'such as ["MCORE-", "VERL-CFG-UNKNOWN-KEY"] (an empty prefix would match every rule)')
    return tuple(x.strip().upper() for x in value)


def read_settings(candidate: Path, *, required: bool = False) -> Settings | None:
    """The ``[tool.shardcheck]`` settings of one TOML file; None when it has no such table (unless ``required``)."""
    import tomllib

    try:
        if not candidate.is_file():
            if required:
                raise InputError(f"{candidate}: no such file; --config takes a pyproject.toml")
            return None
        if candidate.stat().st_size > MAX_SETTINGS_BYTES:
            raise InputError(f"{candidate}:1: larger than {MAX_SETTINGS_BYTES >> 20} MiB; not a settings file")
        text = candidate.read_bytes().decode("utf-8")
        doc = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{candidate}:1: cannot be read as TOML ({exc}); fix or remove it") from None
    tool = doc.get("tool", {})
    table = tool.get("shardcheck") if isinstance(tool, dict) else None
    if table is None:
        if required:
            raise InputError(f"{candidate}:1: has no [tool.shardcheck] table; add one or drop --config")
        return None
    if not isinstance(table, dict):
        raise InputError(f"{candidate}:1: tool.shardcheck must be a table ([tool.shardcheck]), got {table!r}")
    unknown = sorted(set(table) - set(_SETTING_NAMES))
    if unknown:
        raise InputError(f"{candidate}:{_line_of(text, unknown[0])}: [tool.shardcheck] has no setting "
                         f"{unknown[0]!r}; use select, ignore or fail-on")
    fail_on = table.get("fail-on", "error")
    if not isinstance(fail_on, str) or fail_on not in SEVERITY_RANK:
        raise InputError(f"{candidate}:{_line_of(text, 'fail-on')}: [tool.shardcheck] fail-on = {fail_on!r}; "
                         "use error, warning or info")
    select = _prefixes(table.get("select", []), "select", f"{candidate}:{_line_of(text, 'select')}")
    ignore = _prefixes(table.get("ignore", []), "ignore", f"{candidate}:{_line_of(text, 'ignore')}")
    return Settings(select=select, ignore=ignore, fail_on=fail_on, source=str(candidate))


def load_settings(start: Path, config: Path | None = None) -> Settings:
    """``config`` when given, else the settings of the nearest pyproject.toml with a [tool.shardcheck]
    table from ``start`` up to the top of its git work tree (``settings_candidates``)."""
    if config is not None:
        return read_settings(config, required=True)  # type: ignore[return-value]
    for directory in settings_candidates(start):
        found = read_settings(directory / "pyproject.toml")
        if found is not None:
            return found
    return Settings()
