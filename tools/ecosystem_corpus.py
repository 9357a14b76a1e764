"""The ecosystem corpus (issue 26, item 2): real launch scripts of public repositories, judged as a snapshot.

The scripts are other people's code, so they are not committed here: ``tests/data/ecosystem/manifest.json``
records each repository's commit, the launch scripts chosen from it, the files they ``source``, the pin files
(requirements, setup.py, pyproject.toml, Dockerfiles, a carried ``verl/version/version`` and its config tree)
and the versions those pin. ``materialize`` writes exactly those files, at exactly those commits, into the
corpus folder (default ``tests/data/ecosystem/repos``, git-ignored; ``SHARDCHECK_ECOSYSTEM_DIR`` overrides), one
folder per repository (``<owner>__<name>/<path>``), so that ``source`` and a carried verl resolve as in the
repository. ``tests/test_ecosystem.py`` judges every script there and compares the error and warning findings
(file, line, rule) with ``tests/data/ecosystem/snapshot.json``.

Usage:
  python tools/ecosystem_corpus.py manifest  MIRRORS REPO...   choose the scripts, write the manifest
  python tools/ecosystem_corpus.py materialize [--from MIRRORS | --from-github]
  python tools/ecosystem_corpus.py snapshot                       re-judge the corpus, rewrite snapshot.json

MIRRORS is a folder of bare git directories named ``<owner>+<name>/repo`` (as the fetch tool leaves them);
``--from-github`` fetches each pinned commit from github.com instead (``git fetch --depth 1``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "ecosystem"
MANIFEST = DATA / "manifest.json"
SNAPSHOT = DATA / "snapshot.json"

# a *.sh file is a launch script when it runs one of the entry points shardcheck judges (or could: the
# Megatron-LM forks' pretrain_*.py, deepspeed's launcher, verl forks' recipes)
LAUNCH = re.compile(
    r"verl\.trainer|main_ppo|main_dapo|recipe\.|-m verl|pretrain_[A-Za-z0-9_]*\.py|torchrun|"
    r"\btrain(_async)?\.py|\bdeepspeed\s"
)
# files that pin a framework version, read for the manifest's "pins"
PIN_FILE = re.compile(
    r"(^|/)(requirements[^/]*\.txt|setup\.py|pyproject\.toml|Dockerfile[^/]*|environment\.ya?ml)$"
    r"|(^|/)verl/version/version$"
)
# a verl the repository carries: its config tree and its Hydra entry points (shardcheck reads their @hydra.main)
VENDORED_CONFIG = re.compile(
    r"(^|/)verl/trainer/(config/.*\.yaml|(main_[A-Za-z0-9_]*|fsdp_sft_trainer|sft_trainer)\.py)$"
)
# a Megatron-LM fork's argument tables (src/shardcheck/frameworks/megatron_lm/forks.py reads them), and the
# marker folders it looks for: python files that declare flags
FORK_CODE = re.compile(r"^((mindspeed_llm|megatron_patch|flagscale)/.*\.py|megatron/(training/)?arguments\.py)$")
MAX_CODE_BYTES = 1 << 20
PINNED = {
    "verl": r"\bverl\s*(?:\[[^\]]*\])?\s*(==|>=|~=|<=)\s*([0-9][0-9a-z.]*)",
    "megatron-core": r"megatron[-_]core\s*(?:\[[^\]]*\])?\s*(==|>=|~=|<=)\s*([0-9][0-9a-z.]*)",
    "vllm": r"\bvllm\s*(==|>=|~=|<=)\s*([0-9][0-9a-z.]*)",
    "sglang": r"\bsglang\s*(?:\[[^\]]*\])?\s*(==|>=|~=|<=)\s*([0-9][0-9a-z.]*)",
    "deepspeed": r"\bdeepspeed\s*(==|>=|~=|<=)\s*([0-9][0-9a-z.]*)",
    "torch": r"\btorch\s*(==|>=|~=|<=)\s*([0-9][0-9a-z.]*)",
}
SOURCE = re.compile(r"^\s*(?:source|\.)\s+[\"']?([^\s\"';&|]+)", re.M)
MAX_PIN_BYTES = 64 * 1024


def corpus_dir() -> Path:
    return Path(os.environ.get("SHARDCHECK_ECOSYSTEM_DIR") or DATA / "repos")


def folder(repo: str) -> str:
    return repo.replace("/", "__")


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True).stdout


def _tree(git_dir: Path, commit: str) -> list[str]:
    return _git(git_dir, "ls-tree", "-r", "--name-only", "-z", commit).decode().split("\0")[:-1]


def _sourced(text: str, script: str, tree: set[str]) -> set[str]:
    """The repository files a script's ``source`` lines name: the literal tail of the path after any leading
    variable (``$SCRIPT_DIR/common.sh`` → a file ending in ``/common.sh`` beside the script, else anywhere)."""
    found = set()
    for target in SOURCE.findall(text):
        tail = re.sub(r"^.*[}\)]/|^\$[A-Za-z_][A-Za-z0-9_]*/", "", target).lstrip("./")
        if not tail or "$" in tail:
            continue
        here = str(Path(script).parent / tail)
        if here in tree:
            found.add(here)
            continue
        found.update(p for p in tree if p == tail or p.endswith("/" + tail))
    return found


def _pins(texts: dict[str, str]) -> dict[str, str]:
    """Versions the pin files name: ``{"verl": "==0.4.1 (setup.py)", ...}``; a carried verl's version file wins."""
    pins: dict[str, str] = {}
    for path, text in sorted(texts.items()):
        if path.endswith("verl/version/version"):
            pins["verl"] = f"{text.strip()} (carried: {path})"
            continue
        for name, pattern in PINNED.items():
            m = re.search(pattern, text)
            if m and name not in pins:
                pins[name] = f"{m.group(1)}{m.group(2)} ({path})"
    return dict(sorted(pins.items()))


def choose(git_dir: Path, repo: str) -> dict:
    """One repository's manifest entry: its commit, launch scripts, sourced files and pin files."""
    commit = _git(git_dir, "rev-parse", "HEAD").decode().strip()
    tree = _tree(git_dir, commit)
    names = set(tree)
    scripts, extra, pins = [], set(), {}
    for path in tree:
        if path.endswith(".sh"):
            try:
                text = _git(git_dir, "show", f"{commit}:{path}").decode("utf-8", "replace")
            except subprocess.CalledProcessError:
                continue
            if LAUNCH.search(text):
                scripts.append({"path": path, "sha256": hashlib.sha256(text.encode()).hexdigest()})
                extra |= _sourced(text, path, names)
        elif PIN_FILE.search(path) or VENDORED_CONFIG.search(path) or FORK_CODE.search(path):
            extra.add(path)
    chosen = {s["path"] for s in scripts}
    support = []
    for path in sorted(extra - chosen):
        try:
            blob = _git(git_dir, "show", f"{commit}:{path}")
        except subprocess.CalledProcessError:
            continue  # a submodule's gitlink or a symlink to nowhere
        code = FORK_CODE.search(path) is not None
        if len(blob) > (MAX_CODE_BYTES if code else MAX_PIN_BYTES) or (code and b"add_argument" not in blob):
            continue
        support.append(path)
        if PIN_FILE.search(path):
            pins[path] = blob.decode("utf-8", "replace")
    return {"repo": repo, "commit": commit, "pins": _pins(pins), "scripts": scripts, "support": support}


def write_manifest(mirrors: Path, repos: list[str]) -> dict:
    entries = [choose(mirrors / repo.replace("/", "+") / "repo", repo) for repo in repos]
    manifest = {
        "about": "tools/ecosystem_corpus.py manifest; the scripts themselves are not committed (materialize)",
        "repositories": entries,
    }
    MANIFEST.parent.mkdir(parents=True, exist_ok=True)
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def load_manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def _github_git_dir(repo: str, commit: str, scratch: Path) -> Path:
    git_dir = scratch / folder(repo)
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    url = f"https://github.com/{repo}.git"
    subprocess.run(["git", "--git-dir", str(git_dir), "fetch", "-q", "--depth", "1", url, commit], check=True)
    return git_dir


def materialize(mirrors: Path | None, out: Path) -> int:
    """Write every manifest file into ``out``; a script whose text no longer matches its sha256 is an error."""
    written = 0
    with tempfile.TemporaryDirectory() as scratch:
        for entry in load_manifest()["repositories"]:
            repo, commit = entry["repo"], entry["commit"]
            git_dir = (
                mirrors / repo.replace("/", "+") / "repo" if mirrors else _github_git_dir(repo, commit, Path(scratch))
            )
            base = out / folder(repo)
            for item in entry["scripts"] + [{"path": p} for p in entry["support"]]:
                blob = _git(git_dir, "show", f"{commit}:{item['path']}")
                if (
                    "sha256" in item
                    and hashlib.sha256(blob.decode("utf-8", "replace").encode()).hexdigest() != item["sha256"]
                ):
                    raise SystemExit(f"{repo}:{item['path']}: differs from the manifest's sha256 at {commit}")
                target = base / item["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(blob)
                written += 1
    return written


def script_paths(out: Path | None = None) -> list[tuple[str, Path]]:
    """(shown name ``<owner>__<name>/<path>``, file) for every launch script of the manifest."""
    out = out or corpus_dir()
    return [
        (f"{folder(e['repo'])}/{s['path']}", out / folder(e["repo"]) / s["path"])
        for e in load_manifest()["repositories"]
        for s in e["scripts"]
    ]


def judge(shown: str, path: Path, out: Path) -> list[tuple]:
    """The error and warning findings on one script as ``(file, line, rule, severity)`` rows (file relative to
    the corpus folder; the run is in-process with the default settings, no fix proofs; a grouped finding is one
    row, at its first member's line)."""
    from shardcheck.api import check
    from shardcheck.settings import Settings

    result = check(path, display=shown, settings=Settings())
    rows = set()
    for f in result.findings:
        if f.severity in ("error", "warning"):
            rows.add((_relative(f.path or shown, out), f.line or 0, f.rule, f.severity))
    return sorted(rows)  # an input that cannot be used has its INPUT-UNREADABLE / INPUT-UNUSABLE finding


def _relative(where: str, out: Path) -> str:
    """A finding's file as the snapshot names it: relative to the corpus folder when it lies there."""
    try:
        return str(Path(where).resolve().relative_to(out.resolve()))
    except (ValueError, OSError):
        return where


def run_corpus(out: Path | None = None) -> tuple[dict[str, list], float]:
    """Every script's findings, and the CPU seconds the run took."""
    out = out or corpus_dir()
    start = time.process_time()
    results = {shown: [list(r) for r in judge(shown, path, out)] for shown, path in script_paths(out)}
    return results, time.process_time() - start


def snapshot_text(results: dict[str, list]) -> str:
    """The snapshot as JSON with one finding a line, so that its diff names each finding that moved."""
    lines = []
    for shown in sorted(results):
        rows = ",\n".join("  " + json.dumps(list(r)) for r in sorted(map(tuple, results[shown])))
        lines.append(f"{json.dumps(shown)}: [\n{rows}\n ]" if rows else f"{json.dumps(shown)}: []")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    verb, rest = argv[0], argv[1:]
    if verb == "manifest" and len(rest) >= 2:
        manifest = write_manifest(Path(rest[0]), rest[1:])
        scripts = sum(len(e["scripts"]) for e in manifest["repositories"])
        print(f"{MANIFEST}: {len(manifest['repositories'])} repositories, {scripts} launch scripts")
        return 0
    if verb == "materialize":
        mirrors = Path(rest[rest.index("--from") + 1]) if "--from" in rest else None
        if mirrors is None and "--from-github" not in rest:
            print("materialize needs --from MIRRORS or --from-github", file=sys.stderr)
            return 2
        print(f"{corpus_dir()}: {materialize(mirrors, corpus_dir())} files written")
        return 0
    if verb == "snapshot":
        os.environ.pop("SHARDCHECK_VERL_VERSION", None)  # judged as a user's run judges them
        results, cpu = run_corpus()
        SNAPSHOT.write_text(snapshot_text(results))
        found = sum(len(v) for v in results.values())
        print(f"{SNAPSHOT}: {len(results)} scripts, {found} findings, {cpu:.0f} s of CPU")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
