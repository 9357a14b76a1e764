"""Download the framework wheels the differential tests read, as data, and unpack what they need.

Usage: python tools/fetch_reference_wheels.py OUT_DIR

- ``OUT_DIR/verl/<version>/``: ``verl/trainer/config/`` of every verl release in shardcheck's catalogue
  (tests/test_verl_versions.py composes them with ``hydra.compose``; nothing of verl is imported);
- ``OUT_DIR/megatron-core/<minor>/``: the ``megatron`` package of the newest patch of every megatron-core minor
  (tests/test_megatron_versions_differential.py imports its ``parallel_state`` on the local CPU torch, one
  minor per subprocess; tests/test_megatron_split_versions_differential.py its ``TransformerConfig`` and
  ``get_num_layers_to_build``). 0.17-0.19 publish cp312 wheels only: they are unpacked all the same and imported on
  Python 3.11 where their pure-Python ``parallel_state`` allows it.

Prints the two environment variables to export. A wheel that cannot be downloaded is skipped with a line on
stderr (the tests for it then skip).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

INDEX = Path(__file__).resolve().parent.parent / "src/shardcheck/frameworks/verl/data/catalogue/index.json.gz"

MEGATRON_CORE = {
    "0.9": "0.9.0",
    "0.10": "0.10.0",
    "0.11": "0.11.0",
    "0.12": "0.12.3",
    "0.13": "0.13.1",
    "0.14": "0.14.0",
    "0.15": "0.15.3",
    "0.16": "0.16.1",
    "0.17": "0.17.1",
    "0.18": "0.18.2",
    "0.19": "0.19.0",
}


def download(spec: str, into: Path, *extra: str, quiet: bool = False) -> Path | None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec, "-d", str(into), *extra],
        capture_output=True,
        text=True,
    )
    wheels = sorted(into.glob(spec.split("==")[0].replace("-", "_") + "-" + spec.split("==")[1] + "-*.whl"))
    if done.returncode != 0 or not wheels:
        if quiet:
            return None
        print(f"skipped {spec}: {done.stderr.strip().splitlines()[-1:] or 'no wheel'}", file=sys.stderr)
        return None
    return wheels[0]


def unpack(wheel: Path, target: Path, prefix: str) -> None:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target, [n for n in archive.namelist() if n.startswith(prefix)])


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    releases = json.loads(gzip.decompress(INDEX.read_bytes()))["releases"]
    with tempfile.TemporaryDirectory() as tmp:
        for version in releases:
            wheel = download(f"verl=={version}", Path(tmp))
            if wheel is not None:
                unpack(wheel, out / "verl" / version, "verl/trainer/config/")
        for minor, version in MEGATRON_CORE.items():
            late = minor in ("0.17", "0.18", "0.19")
            wheel = download(f"megatron-core=={version}", Path(tmp), quiet=late)
            if wheel is None and late:
                wheel = download(
                    f"megatron-core=={version}", Path(tmp), "--python-version", "3.12", "--only-binary=:all:"
                )
            if wheel is not None:
                unpack(wheel, out / "megatron-core" / minor, "megatron/")
    print(f"export VERL_CONFIGS_DIR={out / 'verl'} MEGATRON_CORE_VERSIONS_DIR={out / 'megatron-core'}")


if __name__ == "__main__":
    main()
