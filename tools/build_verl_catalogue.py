"""Build shardcheck's catalogue of verl config trees, one file per verl version, from verl's own configs.

Usage:
    python tools/build_verl_catalogue.py [--versions 0.4.0 0.4.1 ...] [--checkout DIR [--label main]]

For each release it downloads the wheel (``pip download --no-deps verl==X``, data only: nothing of verl is
imported or run), unpacks ``verl/trainer/config/`` and composes every top-level config with Hydra's own
``compose`` — what ``@hydra.main(config_path="config", config_name=...)`` builds at verl's start-up, before
any override. ``--checkout`` adds a verl source checkout (a recent main, a fork) under ``--label``.

Written to ``src/shardcheck/frameworks/verl/data/catalogue/``:
- ``verl-<version>.json.gz``: ``{"verl_version", "source", "model_engines", "configs": {name: tree}}``, trees
  as composed, interpolations unresolved (``OmegaConf.to_container(resolve=False)``).
- ``index.json.gz``: the versions in release order and, per config name, every key with two bit masks over
  the versions: those that have the key, and those where its value selects as None (null, ``???`` or an
  interpolation that resolves to null: Hydra's ``+key`` may set it there). The version inference reads only
  this file.

verl's ``model_engine`` group (verl ≥ 0.7.1): ``ppo_trainer`` composed with ``model_engine=<choice>`` is stored
under the name verl gives its generated file (``ppo_veomni_trainer``, ``ppo_torchtitan_trainer``); the
``megatron`` choice is ``ppo_megatron_trainer.yaml`` itself.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

RELEASES = ("0.4.0", "0.4.1", "0.5.0", "0.6.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1")
OUT = Path(__file__).resolve().parent.parent / "src/shardcheck/frameworks/verl/data/catalogue"
NONE_KEYS: dict[tuple[Path, str], set[str]] = {}
GROUP_NAMES = {"veomni": "ppo_veomni_trainer", "torchtitan": "ppo_torchtitan_trainer"}


def none_keys(cfg, keys: list[str]) -> set[str]:
    """The keys whose value ``OmegaConf.select`` gives as None, as Hydra's ``+key`` test reads it
    (hydra/_internal/config_loader_impl.py ``_apply_overrides_to_config``)."""
    from omegaconf import OmegaConf

    out = set()
    for key in keys:
        try:
            if OmegaConf.select(cfg, key, throw_on_missing=False) is None:
                out.add(key)
        except Exception:  # an interpolation that cannot resolve without the runtime: not None as written
            pass
    return out


def compose_all(config_dir: Path) -> tuple[dict[str, dict], list[str]]:
    """Every top-level config of one verl config dir, composed by Hydra; and the model_engine choices."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    names = sorted(p.stem for p in config_dir.glob("*.yaml") if not p.stem.startswith("_"))
    engines = sorted(p.stem for p in (config_dir / "model_engine").glob("*.yaml"))
    jobs = [(name, name, []) for name in names]
    jobs += [(GROUP_NAMES[e], "ppo_trainer", [f"model_engine={e}"]) for e in engines if e in GROUP_NAMES]
    configs: dict[str, dict] = {}
    for stored, name, overrides in jobs:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(config_dir.resolve()), version_base=None):
            cfg = compose(config_name=name, overrides=overrides)
        configs[stored] = OmegaConf.to_container(cfg, resolve=False)
        NONE_KEYS[(config_dir, stored)] = none_keys(cfg, flat_keys(configs[stored]))
    GlobalHydra.instance().clear()
    return configs, engines


def flat_keys(tree: dict, prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in tree.items():
        out.append(prefix + str(key))
        if isinstance(value, dict):
            out.extend(flat_keys(value, f"{prefix}{key}."))
    return out


def wheel_config_dir(version: str, work: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"verl=={version}", "-d", str(work)], check=True
    )
    wheel = next(work.glob(f"verl-{version}-*.whl"))
    target = work / version
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target, [n for n in archive.namelist() if n.startswith("verl/trainer/config/")])
    return target / "verl/trainer/config"


def write(doc: dict, path: Path) -> None:
    data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", nargs="*", default=list(RELEASES))
    parser.add_argument("--checkout", type=Path, help="a verl source checkout to add (e.g. a recent main)")
    parser.add_argument("--label", default="main", help="the name of the --checkout entry")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    entries: list[tuple[str, str, dict, list[str], Path]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for version in args.versions:
            config_dir = wheel_config_dir(version, Path(tmp))
            configs, engines = compose_all(config_dir)
            entries.append(
                (
                    version,
                    f"verl {version} wheel (PyPI), verl/trainer/config composed by Hydra",
                    configs,
                    engines,
                    config_dir,
                )
            )
    if args.checkout is not None:
        revision = (
            subprocess.run(
                ["git", "-C", str(args.checkout), "log", "-1", "--format=%h %cs"], capture_output=True, text=True
            ).stdout.strip()
            or "unknown revision"
        )
        config_dir = args.checkout / "verl/trainer/config"
        configs, engines = compose_all(config_dir)
        entries.append(
            (
                args.label,
                f"verl {args.label} ({revision}), verl/trainer/config composed by Hydra",
                configs,
                engines,
                config_dir,
            )
        )
    index: dict = {"versions": [], "releases": [], "keys": {}}
    for bit, (version, source, configs, engines, config_dir) in enumerate(entries):
        write(
            {"verl_version": version, "source": source, "model_engines": engines, "configs": configs},
            OUT / f"verl-{version}.json.gz",
        )
        index["versions"].append(version)
        if version in RELEASES:
            index["releases"].append(version)
        for name, tree in configs.items():
            table = index["keys"].setdefault(name, {})
            nones = NONE_KEYS[(config_dir, name)]
            for key in flat_keys(tree):
                has, none = table.get(key, (0, 0))
                table[key] = (has | 1 << bit, none | (1 << bit if key in nones else 0))
        print(f"verl {version}: {', '.join(sorted(configs))}")
    write(index, OUT / "index.json.gz")
    total = sum(p.stat().st_size for p in OUT.glob("*.gz"))
    print(f"{OUT}: {len(entries)} versions, {total} bytes")


if __name__ == "__main__":
    main()
