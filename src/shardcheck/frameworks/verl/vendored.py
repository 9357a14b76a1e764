"""A verl the script's repository carries (issue 26, false alarm 4): judged against as ``--verl-path`` would be.

Projects built on verl often carry their own copy: a ``verl/`` package beside their code, or a git submodule
``verl/`` holding the checkout (``verl/verl/...``). Their scripts run that copy, not a release, so its config tree
decides which keys exist and what they default to. A copy is a ``verl`` folder with ``trainer/config/ppo_trainer.yaml``
and ``version/version`` (verl's own version file, ``verl/__init__.py`` reads it) found beside the script or in a
folder above it, up to the top of its git work tree; or one under a folder the script puts on ``PYTHONPATH``.

A copy older than the bundled catalogue (0.1 … 0.3) is named as such in the version line: its keys and defaults
are its own tree's, but the release behaviour shardcheck records starts at 0.4.0, the nearest it is matched to.
The checks such a release does not make (``FIRST_CHECKED``) are not judged, and the line names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

LEVELS = 6  # folders above the script searched (a repository's examples/<model>/<algo>/run.sh is 3 deep)
# verl's start-up checks by the first release that makes them: not judged on an older carried copy (the rule
# that judges one asks ``not_judged``)
BATCH_AT_LEAST_MINI = "the train_batch_size >= ppo_mini_batch_size check"
FIRST_CHECKED = {
    # verl/trainer/ppo/ray_trainer.py:350 at v0.3.0.post1 (070ed6a): assert config.data.train_batch_size >=
    # config.actor_rollout_ref.actor.ppo_mini_batch_size; v0.2.0.post2 (fb53278) has no such check
    BATCH_AT_LEAST_MINI: (0, 3),
}


def _minor(version: str | None) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def not_judged(carried: str | None) -> list[str]:
    """The checks a carried verl of version ``carried`` does not make (none for a release of the catalogue)."""
    minor = _minor(carried)
    return [check for check, first in FIRST_CHECKED.items() if minor is not None and minor < first]


@dataclass(frozen=True)
class Carried:
    """A carried verl: the folder to give as ``--verl-path`` (the one holding ``verl/``), its version file's
    text, and where it was found."""

    root: Path
    version: str
    found_by: str

    @property
    def older_than_catalogue(self) -> bool:
        minor = _minor(self.version)
        return minor is not None and minor < (0, 4)


def _package(folder: Path) -> Path | None:
    """``folder`` itself when it is a verl package with a config tree and a version file."""
    try:
        if (folder / "trainer/config/ppo_trainer.yaml").is_file() and (folder / "version/version").is_file():
            return folder
    except OSError:
        return None
    return None


def _read_version(package: Path) -> str:
    try:
        return (package / "version/version").read_text(errors="replace").strip()[:40] or "?"
    except OSError:
        return "?"


def find_carried(script: Path, pythonpath: tuple[str, ...] = ()) -> Carried | None:
    """The verl the script's repository carries, or None (see the module doc); ``pythonpath``: the folders the
    script puts on ``PYTHONPATH`` (absolute, or relative to the script's folder)."""
    here = script.resolve().parent
    for entry in pythonpath:
        folder = (here / entry).resolve() if not Path(entry).is_absolute() else Path(entry)
        package = _package(folder / "verl")
        if package is not None:
            return Carried(folder, _read_version(package), f"PYTHONPATH {entry}")
    folder = here
    for _ in range(LEVELS + 1):
        for root in (folder, folder / "verl"):  # a verl package beside the code, or a submodule checkout
            package = _package(root / "verl")
            if package is not None:
                return Carried(root, _read_version(package), f"{package} in the script's repository")
        if (folder / ".git").exists() or folder.parent == folder:
            break
        folder = folder.parent
    return None
