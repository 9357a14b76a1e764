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
  ``"entries"``: every Hydra entry point of the version (``@hydra.main`` found by reading the package's ``.py``
  files with ``ast``): ``{module: [config dir, config name]}``; ``"entry_files"``: for the entry points whose
  config is not one of the composed PPO configs (the SFT trainer's ``sft_trainer_engine`` with its ``engine`` /
  ``optim`` groups, ``verl/experimental/*/config``), their config files as parsed trees
  (``{config dir: {"group/name.yaml": [header, tree]}}``), composed at run time with the command line's group
  choices (``engine=megatron``) by shardcheck's custom_config.py.
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
import ast
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


def wheel_config_dir(version: str, work: Path, wheels: Path | None = None) -> Path:
    """verl ``version``'s package (its config dirs and its ``.py`` files, as data) unpacked under ``work``;
    the wheel from ``wheels`` when it is there, else downloaded."""
    found = sorted(wheels.glob(f"verl-{version}-*.whl")) if wheels is not None else []
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"verl=={version}", "-d", str(work)],
            check=True,
        )
        found = sorted(work.glob(f"verl-{version}-*.whl"))
    target = work / version
    with zipfile.ZipFile(found[0]) as archive:
        names = [n for n in archive.namelist() if n.startswith("verl/") and n.endswith((".py", ".yaml"))]
        archive.extractall(target, names)
    return target / "verl/trainer/config"


# The configs the PPO modelling reads from the composed trees; other entry points' configs travel as files.
PPO_CONFIGS = {"ppo_trainer", "ppo_megatron_trainer"}


def hydra_entries(package_root: Path) -> dict[str, list[str]]:
    """``{module: [config dir relative to the package root, config name]}`` of every ``@hydra.main`` with string
    arguments in the package's ``.py`` files (read with ``ast``, nothing imported)."""
    out: dict[str, list[str]] = {}
    for path in sorted((package_root / "verl").rglob("*.py")):
        text = path.read_text(errors="replace")
        if "hydra.main" not in text or "/tests/" in path.as_posix():
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            for deco in getattr(node, "decorator_list", []):
                if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "main"):
                    continue
                args = {
                    kw.arg: kw.value.value
                    for kw in deco.keywords
                    if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)
                }
                if "config_path" in args and "config_name" in args:
                    rel = path.relative_to(package_root)
                    module = ".".join(rel.with_suffix("").parts)
                    folder = (rel.parent / args["config_path"]).as_posix()
                    out[module] = [folder, args["config_name"]]
    return out


def config_files(folder: Path, names: set[str] | None = None) -> dict[str, list]:
    """The YAML files of ``folder`` (all of them, or the primary configs ``names`` and every file of the groups
    their defaults lists name, transitively) as ``{"group/name.yaml": [header, tree]}``."""
    from hydra.plugins.config_source import ConfigSource
    from omegaconf import OmegaConf

    def load(rel: str) -> list:
        text = (folder / rel).read_text()
        tree = OmegaConf.to_container(OmegaConf.create(text), resolve=False) if text.strip() else {}
        return [ConfigSource._get_header_dict(text[:512]), tree]

    if names is None:
        return {
            p.relative_to(folder).as_posix(): load(p.relative_to(folder).as_posix()) for p in folder.rglob("*.yaml")
        }
    out: dict[str, list] = {}
    todo = [f"{n}.yaml" for n in names]
    while todo:
        rel = todo.pop()
        if rel in out or not (folder / rel).is_file():
            continue
        out[rel] = load(rel)
        for entry in out[rel][1].get("defaults", []) if isinstance(out[rel][1], dict) else []:
            if isinstance(entry, dict):
                for group in entry:
                    group = group.removeprefix("override ").split("@")[0].strip("/")
                    todo.extend(p.relative_to(folder).as_posix() for p in (folder / group).glob("*.yaml"))
    return out


def entry_files(package_root: Path, entries: dict[str, list[str]]) -> dict[str, dict]:
    """The config files of the entry points whose config the composed PPO trees do not cover."""
    out: dict[str, dict] = {}
    for folder, name in entries.values():
        if folder == "verl/trainer/config" and name in PPO_CONFIGS:
            continue
        if folder == "verl/trainer/config":
            out.setdefault(folder, {}).update(config_files(package_root / folder, {name}))
        elif (package_root / folder).is_dir():
            out[folder] = config_files(package_root / folder)
    return out


def entry_points(package_root: Path) -> dict:
    found = hydra_entries(package_root)
    return {"entries": found, "entry_files": entry_files(package_root, found)}


def write(doc: dict, path: Path) -> None:
    data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", nargs="*", default=list(RELEASES))
    parser.add_argument("--checkout", type=Path, help="a verl source checkout to add (e.g. a recent main)")
    parser.add_argument("--label", default="main", help="the name of the --checkout entry")
    parser.add_argument("--wheels", type=Path, help="a folder of verl wheels to use before downloading")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    entries: list[tuple[str, str, dict, list[str], Path, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for version in args.versions:
            config_dir = wheel_config_dir(version, Path(tmp), args.wheels)
            configs, engines = compose_all(config_dir)
            entries.append(
                (
                    version,
                    f"verl {version} wheel (PyPI), verl/trainer/config composed by Hydra",
                    configs,
                    engines,
                    config_dir,
                    entry_points(config_dir.parent.parent.parent),
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
                entry_points(args.checkout),
            )
        )
    index: dict = {"versions": [], "releases": [], "keys": {}}
    for bit, (version, source, configs, engines, config_dir, points) in enumerate(entries):
        write(
            {
                "verl_version": version,
                "source": source,
                "model_engines": engines,
                "configs": configs,
                "entries": points["entries"],
                "entry_files": points["entry_files"],
            },
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
