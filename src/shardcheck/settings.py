"""Project settings: ``[tool.shardcheck]`` in the nearest ``pyproject.toml`` above a script.

    [tool.shardcheck]
    select = ["MCORE-", "VERL-"]   # rule ids or prefixes to report (default: all)
    ignore = ["VERL-MC-ETP-MISMATCH"]
    fail-on = "error"              # the lowest severity that makes the exit status 1: error | warning | info
    verl-version = "0.9.0"         # the verl to judge against (default: inferred from the script's keys)
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
    verl_version: str | None = None  # verl-version: the verl to judge against (frameworks/verl/versions.py)
    source: str | None = None  # the pyproject.toml they came from

    def reports(self, rule_id: str) -> bool:
        if self.select and not any(rule_id.startswith(p) for p in self.select):
            return False
        return not any(rule_id.startswith(p) for p in self.ignore)

    def fails(self, severity: str) -> bool:
        return SEVERITY_RANK[severity] <= SEVERITY_RANK[self.fail_on]


def load_settings(start: Path) -> Settings:
    """The settings of the nearest pyproject.toml with a [tool.shardcheck] table, at or above ``start``."""
    import tomllib

    for directory in [start, *start.parents]:
        candidate = directory / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            doc = tomllib.loads(candidate.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise InputError(f"{candidate}:1: cannot be read as TOML ({exc}); fix or remove it") from None
        table = doc.get("tool", {}).get("shardcheck")
        if table is None:
            continue
        unknown = set(table) - {"select", "ignore", "fail-on", "verl-version"}
        if unknown:
            raise InputError(f"{candidate}:1: [tool.shardcheck] has no setting {sorted(unknown)[0]!r}; "
                             "use select, ignore, fail-on or verl-version")
        verl_version = table.get("verl-version")
        if verl_version is not None and not isinstance(verl_version, str):
            raise InputError(f"{candidate}:1: [tool.shardcheck] verl-version = {verl_version!r}; give a string "
                             "such as \"0.9.0\"")
        fail_on = table.get("fail-on", "error")
        if fail_on not in SEVERITY_RANK:
            raise InputError(f"{candidate}:1: [tool.shardcheck] fail-on = {fail_on!r}; use error, warning or info")
        return Settings(select=tuple(str(x).upper() for x in table.get("select", ())),
                        ignore=tuple(str(x).upper() for x in table.get("ignore", ())),
                        fail_on=fail_on, verl_version=verl_version, source=str(candidate))
    return Settings()
