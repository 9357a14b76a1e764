"""Project settings: ``[tool.shardcheck]`` in the nearest ``pyproject.toml`` above a script.

    [tool.shardcheck]
    select = ["MCORE-", "VERL-"]   # rule ids or prefixes to report (default: all)
    ignore = ["VERL-MC-ETP-MISMATCH"]
    fail-on = "error"              # the lowest severity that makes the exit status 1: error | warning | info
    verl-version = "0.9.0"         # the verl to judge against (default: inferred from the script's keys)

    [tool.shardcheck.per-file-ignores]
    "recipes/*.sh" = ["MEM-"]      # glob (relative to the pyproject.toml's folder, or a file name) -> ids

The command line's ``--select`` / ``--ignore`` / ``--fail-on`` replace the file's values.

"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from pathlib import Path

from shardcheck.errors import SettingsError

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
_KEYS = ("select", "ignore", "fail-on", "verl-version", "per-file-ignores")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    select: tuple[str, ...] = ()  # empty: every rule
    ignore: tuple[str, ...] = ()
    fail_on: str = "error"
    verl_version: str | None = None  # verl-version: the verl to judge against (frameworks/verl/versions.py)
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (glob, ids)

    source: str | None = None  # the pyproject.toml they came from
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
        p = Path(path).resolve()
        rel = p.as_posix()
        if self.source is not None:
            try:
                rel = p.relative_to(Path(self.source).resolve().parent).as_posix()
            except ValueError:
                pass
        out: list[str] = []
        for pattern, ids in self.per_file_ignores:
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(p.name, pattern):
                out.extend(ids)
        return tuple(out)

    def fails(self, severity: str) -> bool:
        return SEVERITY_RANK[severity] <= SEVERITY_RANK[self.fail_on]

    def overridden(self, *, select: list[str] | None = None, ignore: list[str] | None = None,
                   fail_on: str | None = None) -> Settings:
        """These settings with the command line's values in place of the file's."""
        changes: dict = {}
        if select is not None:
            changes["select"] = _ids(select)
        if ignore is not None:
            changes["ignore"] = _ids(ignore)
        if fail_on is not None:
            changes["fail_on"] = fail_on
        return replace(self, **changes) if changes else self

    def id_problems(self) -> list[tuple[str, str | None, str | None, int | None]]:
        """(message, fix, file, line) for every id in the settings that names no current rule."""
        from shardcheck.rules.registry import id_problem

        written = dict(self.lines)
        out = []
        named = [("select", i) for i in self.select] + [("ignore", i) for i in self.ignore]
        named += [(f"per-file-ignores {pattern!r}", i) for pattern, ids in self.per_file_ignores for i in ids]
        for setting, i in named:
            where = f"[tool.shardcheck] {setting}" if self.source else f"--{setting}"
            problem = id_problem(i, where)
            if problem is not None:
                out.append((*problem, self.source, written.get(i)))
        return out


def _ids(values) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        out.extend(part.strip().upper() for part in str(value).split(",") if part.strip())
    return tuple(out)


def _lines(text: str, ids: list[str]) -> tuple[tuple[str, int], ...]:
    """The line of each id's first mention in the file (tomllib gives no positions)."""
    out = []
    rows = text.upper().splitlines()
    for i in ids:
        number = next((n for n, row in enumerate(rows, 1) if f'"{i}"' in row or f"'{i}'" in row), None)
        if number is not None:
            out.append((i, number))
    return tuple(out)


def load_settings(start: Path) -> Settings:
    """The settings of the nearest pyproject.toml with a [tool.shardcheck] table, at or above ``start``."""
    import tomllib

    for directory in [start, *start.parents]:
        candidate = directory / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            text = candidate.read_text()
            doc = tomllib.loads(text)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise SettingsError(f"{candidate}:1: cannot be read as TOML ({exc}); fix or remove it") from None
        table = doc.get("tool", {}).get("shardcheck")
        if table is None:
            continue
        if not isinstance(table, dict):
            raise SettingsError(f"{candidate}:1: [tool.shardcheck] must be a table")
        unknown = set(table) - set(_KEYS)
        if unknown:
            raise SettingsError(f"{candidate}:1: [tool.shardcheck] has no setting {sorted(unknown)[0]!r}; "
                                f"use {', '.join(_KEYS[:-1])} or {_KEYS[-1]}")
        fail_on = table.get("fail-on", "error")
        if fail_on not in SEVERITY_RANK:
            raise SettingsError(f"{candidate}:1: [tool.shardcheck] fail-on = {fail_on!r}; use error, warning or info")
        verl_version = table.get("verl-version")
        if verl_version is not None and not isinstance(verl_version, str):
            raise SettingsError(f"{candidate}:1: [tool.shardcheck] verl-version = {verl_version!r}; give a string "
                                "such as \"0.9.0\"")
        for key in ("select", "ignore"):
            if not isinstance(table.get(key, []), list):
                raise SettingsError(f"{candidate}:1: [tool.shardcheck] {key} must be a list of rule ids")
        per_file = table.get("per-file-ignores", {})
        if not isinstance(per_file, dict) or not all(isinstance(v, list) for v in per_file.values()):
            raise SettingsError(f"{candidate}:1: [tool.shardcheck.per-file-ignores] maps globs to lists of rule ids")
        select, ignore = _ids(table.get("select", ())), _ids(table.get("ignore", ()))
        pfi = tuple((str(pattern), _ids(ids)) for pattern, ids in per_file.items())
        every = [*select, *ignore, *(i for _, ids in pfi for i in ids)]
        return Settings(select=select, ignore=ignore, fail_on=fail_on, per_file_ignores=pfi, verl_version=verl_version,
                        source=str(candidate), lines=_lines(text, every))
    return Settings()
