"""What a repository, a settings file or a path someone else wrote can make shardcheck do with the caller's files
(issue 27, items 1-4 and 8): write outside a temporary tree, run a repository's configured programs, take settings
from a tree the caller does not own, read and print a private file."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from review_fixtures import BEFORE, GIT_ENV, commit_all, git, have_git, init_repo

from shardcheck.cli import main

needs_git = pytest.mark.skipif(not have_git(), reason="git is not installed")
SRC = Path(__file__).resolve().parents[1] / "src" / "shardcheck"


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


# ---- 1. a revision's tree is written inside its temporary root, or not at all ----


def _mktree(repo: Path, entries: list[tuple[str, str, str, str]]) -> str:
    """A tree object of (mode, kind, id, name) entries, made with git's plumbing (mktree takes any name)."""
    text = "".join(f"{mode} {kind} {sha}\t{name}\n" for mode, kind, sha, name in entries)
    done = subprocess.run(
        ["git", "-C", str(repo), "mktree"], input=text, capture_output=True, text=True, check=True, env=os.environ
    )
    return done.stdout.strip()


def _blob(repo: Path, text: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-w", "--stdin"], input=text, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _commit(repo: Path, tree: str, parent: str | None = None) -> str:
    args = ["commit-tree", tree, "-m", "planted"] + (["-p", parent] if parent else [])
    return git(repo, *args)


def _escaping_repo(tmp_path: Path, name: str) -> tuple[Path, str, str]:
    """A repository whose second commit's tree holds ``NAME/x.sh``-like entries that climb out of any checkout."""
    repo = init_repo(tmp_path / "repo")
    (repo / "run.sh").write_text(BEFORE.read_text())
    first = commit_all(repo, "first")
    script = _blob(repo, BEFORE.read_text())
    inner = _mktree(repo, [("100644", "blob", script, "x.sh")])
    tree = inner
    for _ in range(7):  # seven levels: from /tmp/shardcheck-git-…/ well past /
        tree = _mktree(repo, [("040000", "tree", tree, name)])
    top = _mktree(repo, [("040000", "tree", tree, "sub"), ("100644", "blob", script, "run.sh")])
    return repo, first, _commit(repo, top, first)


@needs_git
@pytest.mark.parametrize("name", ["..", ".git", ".GIT", "."])
def test_tree_entry_climbing_out_is_refused_and_nothing_is_written(name, tmp_path, monkeypatch, capsys):
    import tempfile

    repo, first, second = _escaping_repo(tmp_path, name)
    listed = git(repo, "ls-tree", "-r", "--name-only", second)
    assert "x.sh" in listed  # git lists the planted entry
    scratch = tmp_path.joinpath("tmp", *"abcdefgh")  # deep enough that even a regression writes below tmp_path
    scratch.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(repo)
    code, out = _run(["diff", "--git", f"{first}..{second}"], capsys)
    assert code == 2 and len(out.strip().splitlines()) == 1 and "Traceback" not in out
    assert "refuses to check it out" in out and repr("sub/" + "/".join([name] * 7) + "/x.sh") in out
    written = [p for p in tmp_path.rglob("x.sh") if ".git" not in p.relative_to(tmp_path).parts[:2]]
    assert written == [] and list(scratch.iterdir()) == []  # nothing outside, and the temporary tree is gone


@needs_git
def test_top_level_dotdot_entry_never_reaches_the_parent(tmp_path, monkeypatch, capsys):
    import tempfile

    repo = init_repo(tmp_path / "repo")
    (repo / "run.sh").write_text(BEFORE.read_text())
    first = commit_all(repo, "first")
    blob = _blob(repo, BEFORE.read_text())
    top = _mktree(repo, [("040000", "tree", _mktree(repo, [("100644", "blob", blob, "x.sh")]), "..")])
    second = _commit(repo, top, first)
    scratch = tmp_path / "tmp" / "inner"
    scratch.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(repo)
    code, out = _run(["diff", "--git", f"{first}..{second}", "--format", "github"], capsys)
    assert code == 2 and "'../x.sh'" in out
    assert not (scratch / "x.sh").exists() and not (tmp_path / "tmp" / "x.sh").exists()


def test_unsafe_entry_names():
    from shardcheck.review.git_source import unsafe_entry

    for bad in ("../x.sh", "a/../../x.sh", "/etc/x.sh", "a//x.sh", "./x.sh", ".git/hooks/x.sh", "a/.Git/x", ""):
        assert unsafe_entry(bad) is not None, bad
    for good in ("x.sh", "a/b/x.sh", "..x.sh", "a/...", ".github/x.sh", "a/.gitx/x.sh"):
        assert unsafe_entry(good) is None, good


def test_revision_tree_writes_only_new_files_below_its_root(tmp_path):
    from shardcheck.errors import InputError
    from shardcheck.review.git_source import RevisionTree

    with RevisionTree(tmp_path, "0" * 40) as tree:
        outside = tmp_path / "outside"
        outside.mkdir()
        (tree.root / "link").symlink_to(outside)  # a link planted in the tree is never written through
        with pytest.raises(InputError, match="not a directory"):
            tree._write("link/x.sh", b"x", 0o644)
        assert list(outside.iterdir()) == []
        tree._write("a/b.sh", b"ok", 0o644)
        assert (tree.root / "a" / "b.sh").read_bytes() == b"ok"
        (tree.root / "c.sh").symlink_to(outside / "target")
        with pytest.raises(OSError):
            tree._write("c.sh", b"x", 0o644)
        assert not (outside / "target").exists()


# ---- 2. git never runs what a repository configures ----


def _canary_repo(tmp_path: Path) -> tuple[Path, Path, str]:
    """A repository whose configuration names a program at every place git could run one; each touches
    ``canary``. Its scripts are committed twice, and the work tree's copy is touched (same content, new mtime),
    so that comparing it with HEAD makes git hash it (a clean filter) and consult the fsmonitor."""
    canary = tmp_path / "canary"
    program = tmp_path / "prog.sh"
    program.write_text(f'#!/bin/sh\necho "$0 $*" >> {canary}\ncat >/dev/null 2>&1 || true\nexit 0\n')
    os.chmod(program, 0o755)
    repo = init_repo(tmp_path / "repo")
    (repo / ".gitattributes").write_text("*.sh diff=evil filter=evil\n")
    (repo / "run.sh").write_text(BEFORE.read_text())
    first = commit_all(repo, "first")
    (repo / "run.sh").write_text(BEFORE.read_text().replace("\n", "\n# changed\n", 1))
    commit_all(repo, "second")
    for key, value in [
        ("core.fsmonitor", str(program)),
        ("diff.external", str(program)),
        ("diff.evil.command", str(program)),
        ("diff.evil.textconv", str(program)),
        ("filter.evil.clean", str(program)),
        ("filter.evil.smudge", str(program)),
        ("filter.evil.required", "true"),
        ("core.pager", str(program)),
        ("pager.diff", str(program)),
        ("core.hooksPath", str(tmp_path / "hooks")),
    ]:
        git(repo, "config", key, value)
    (tmp_path / "hooks").mkdir()
    for hook in ("post-index-change", "reference-transaction", "post-checkout"):
        (tmp_path / "hooks" / hook).write_text(program.read_text())
        os.chmod(tmp_path / "hooks" / hook, 0o755)
    later = os.stat(repo / "run.sh").st_mtime + 5
    os.utime(repo / "run.sh", (later, later))
    return repo, canary, first


@needs_git
def test_the_planted_programs_do_run_under_plain_git(tmp_path):
    """The fixture's own check: plain git, as shardcheck ran it before, does run them."""
    repo, canary, first = _canary_repo(tmp_path)
    subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", "HEAD"], capture_output=True, env=os.environ, timeout=60
    )
    assert canary.exists()


@needs_git
@pytest.mark.parametrize(
    "argv",
    [
        ["diff", "--git"],
        ["diff", "--git", "HEAD"],
        ["diff", "--git", "HEAD~1"],
        ["diff", "--git", "HEAD~1..HEAD"],
        ["diff", "--git", "HEAD~1..", "--format", "github"],
        ["diff", "--git", "HEAD~1", "run.sh", "--format", "json"],
    ],
)
def test_repository_programs_never_run(argv, tmp_path, monkeypatch, capsys):
    repo, canary, _ = _canary_repo(tmp_path)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(tmp_path / "prog.sh"))
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    code, out = _run(argv, capsys)
    assert code in (0, 1) and "Traceback" not in out, out
    assert not canary.exists(), canary.read_text()


@needs_git
@pytest.mark.parametrize("key", ["core.fsmonitor", "filter.evil.clean"])
def test_each_program_that_plain_git_runs_is_off(key, tmp_path, monkeypatch, capsys):
    """One configured program at a time: plain git runs it on `diff --name-only HEAD`; shardcheck's git does not."""
    repo, canary, _ = _canary_repo(tmp_path)
    for other in ("core.fsmonitor", "filter.evil.clean", "filter.evil.smudge"):
        git(repo, "config", "--unset", other)
    git(repo, "config", key, str(tmp_path / "prog.sh"))
    subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", "HEAD"], capture_output=True, env=os.environ, timeout=60
    )
    assert canary.exists()
    canary.unlink()
    os.utime(repo / "run.sh", (os.stat(repo / "run.sh").st_mtime + 9,) * 2)
    monkeypatch.chdir(repo)
    code, out = _run(["diff", "--git"], capsys)
    assert code in (0, 1) and not canary.exists()


@needs_git
def test_filter_driver_with_an_equals_sign_is_emptied_too(tmp_path, monkeypatch):
    from shardcheck.review.git_command import run_git

    repo, canary, _ = _canary_repo(tmp_path)
    (repo / ".gitattributes").write_text("*.sh filter=a=b\n")
    git(repo, "config", "filter.a=b.clean", str(tmp_path / "prog.sh"))
    git(repo, "config", "--unset", "core.fsmonitor")
    subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", "HEAD"], capture_output=True, env=os.environ, timeout=60
    )
    assert canary.exists()  # the driver does run under plain git
    canary.unlink()
    os.utime(repo / "run.sh", (os.stat(repo / "run.sh").st_mtime + 9,) * 2)
    run_git(repo, "diff", "--name-only", "HEAD")
    assert not canary.exists()


def test_git_runs_through_one_function():
    """No other module starts git: every call has the repository's programs off."""
    starts = re.compile(r"""\[\s*["']git["']""")
    found = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if starts.search(p.read_text()))
    assert found == ["review/git_command.py"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ---- 3. settings come from a work tree and a file the caller owns, found from the path as given ----

BAD_WORLD = (
    "python3 -m verl.trainer.main_ppo model_engine=megatron "
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3\n"
)
SILENCING = '[tool.shardcheck]\nignore = ["MCORE-", "VERL-"]\n'
OTHER_UID = 12345


def _give_away(*paths: Path) -> None:
    for path in paths:
        try:
            os.chown(path, OTHER_UID, OTHER_UID, follow_symlinks=False)
        except PermissionError:
            pytest.skip("chown to another uid is not permitted here (tests need root for it)")


def test_a_shared_parent_with_someone_elses_work_tree_is_not_obeyed(tmp_path, capsys):
    shared = tmp_path / "shared"
    (shared / ".git").mkdir(parents=True)
    (shared / "pyproject.toml").write_text(SILENCING)
    os.chmod(shared, 0o1777)
    script = shared / "me" / "run.sh"
    script.parent.mkdir()
    script.write_text(BAD_WORLD)
    code, out = _run(["check", str(script)], capsys)
    assert code == 0  # owned by the caller: the parent is a work tree and its settings apply
    _give_away(shared / ".git", shared / "pyproject.toml")
    code, out = _run(["check", str(script)], capsys)
    assert code == 1 and "MCORE-PS-WORLD" in out and "suppressed" not in out


def test_someone_elses_settings_file_in_the_scripts_folder_is_not_obeyed(tmp_path, capsys):
    script = tmp_path / "repo" / "run.sh"
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    script.write_text(BAD_WORLD)
    toml = tmp_path / "repo" / "pyproject.toml"
    toml.write_text(SILENCING)
    assert _run(["check", str(script)], capsys)[0] == 0
    _give_away(toml)
    code, out = _run(["check", str(script), "--verbose"], capsys)
    assert code == 1 and "MCORE-PS-WORLD" in out
    assert f"{toml} is owned by uid {OTHER_UID}, not by you" in out


def test_settings_follow_the_path_as_given_not_a_symlinks_target(tmp_path, capsys):
    real = tmp_path / "project" / "scripts" / "run.sh"
    real.parent.mkdir(parents=True)
    (tmp_path / "project" / ".git").mkdir()
    (tmp_path / "project" / "pyproject.toml").write_text(SILENCING)
    real.write_text(BAD_WORLD)
    assert _run(["check", str(real)], capsys)[0] == 0
    link = tmp_path / "elsewhere" / "run.sh"
    link.parent.mkdir()
    link.symlink_to(real)
    code, out = _run(["check", str(link)], capsys)
    assert code == 1 and "MCORE-PS-WORLD" in out
    from shardcheck.settings import script_folder

    assert script_folder(link) == link.parent


# ---- 4. every file a script names is read under the source policy ----

SECRET = "SECRET_x7Q"
HF_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": SECRET,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 36,
    "intermediate_size": 12288,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "head_dim": 128,
}
FORMATS = [
    ["check"],
    ["check", "--format", "json"],
    ["check", "--format", "sarif"],
    ["check", "--format", "github"],
    ["check", "--format", "junit"],
    ["check", "--quiet"],
    ["memory"],
    ["memory", "--format", "json"],
    ["mesh"],
    ["report"],
]


def _private_model(tmp_path: Path, mode: int = 0o600) -> Path:
    import json

    model = tmp_path / "private" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(HF_CONFIG, indent=1))
    os.chmod(model / "config.json", mode)
    return model


def _all_output(argv: list[str], script: Path, tmp_path: Path, capsys, *extra: str) -> tuple[int, str]:
    if argv == ["report"]:
        html = tmp_path / "out.html"
        code, out = _run(["report", str(script), "-o", str(html), *extra], capsys)
        return code, out + (html.read_text() if html.exists() else "")
    return _run([*argv, str(script), *extra], capsys)


def _launch(tmp_path: Path, *words: str, name: str = "verl.trainer.main_ppo") -> Path:
    script = tmp_path / "job" / "run.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"python3 -m {name} trainer.n_gpus_per_node=8 {' '.join(words)}\n")
    return script


@pytest.mark.parametrize("argv", FORMATS)
def test_private_model_config_outside_the_tree_is_never_printed(argv, tmp_path, capsys):
    model = _private_model(tmp_path)
    script = _launch(tmp_path, f"actor_rollout_ref.model.path={model}")
    code, out = _all_output(argv, script, tmp_path, capsys)
    assert SECRET not in out and "Traceback" not in out
    if argv == ["check"]:
        assert f"{model / 'config.json'} lies outside the script's directory" in out
        assert f"--allow-source {model}" in out and "MODEL-NOT-FOUND" in out


def test_allowing_the_folder_reads_the_model_config(tmp_path, capsys):
    """The test above can fail: with the folder allowed the file is read, and its bad value is quoted."""
    model = _private_model(tmp_path)
    script = _launch(tmp_path, f"actor_rollout_ref.model.path={model}")
    code, out = _run(["check", str(script), "--allow-source", str(model)], capsys)
    assert SECRET in out and "is not a whole number" in out


@pytest.mark.parametrize("where", ["inside-private", "outside-readable", "symlink-out"])
def test_model_config_policy_is_the_source_policy(where, tmp_path, capsys):
    import shardcheck

    if where == "inside-private":
        model = tmp_path / "job" / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text('{"num_attention_heads": 32, "hidden_size": "' + SECRET + '"}')
        os.chmod(model / "config.json", 0o600)
        why = "is not readable by everyone (mode 0600)"
    elif where == "outside-readable":
        model = _private_model(tmp_path, 0o644)
        why = "lies outside the script's directory"
    else:
        target = _private_model(tmp_path, 0o644)
        model = tmp_path / "job" / "model"
        model.parent.mkdir(parents=True)
        model.symlink_to(target)
        why = "lies outside the script's directory"
    script = _launch(tmp_path, f"actor_rollout_ref.model.path={model}")
    result = shardcheck.check(script)
    assert result.job.model is None and why in result.job.model_problem
    assert SECRET not in result.job.model_problem


def test_model_config_inside_the_tree_is_read(tmp_path):
    import json

    import shardcheck

    model = tmp_path / "job" / "Qwen3-8B"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({**HF_CONFIG, "hidden_size": 4096}))
    os.chmod(model / "config.json", 0o644)
    script = _launch(tmp_path, "actor_rollout_ref.model.path=./Qwen3-8B")
    monkey = os.getcwd()
    try:
        os.chdir(script.parent)
        result = shardcheck.check(script)
    finally:
        os.chdir(monkey)
    assert result.job.model is not None and result.job.model.hidden_size == 4096


def test_megatron_lm_checkpoint_config_is_vetted(tmp_path, capsys):
    model = _private_model(tmp_path)
    script = tmp_path / "job" / "pretrain.sh"
    script.parent.mkdir(parents=True)
    script.write_text(
        "torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 "
        f"--global-batch-size 16 --seq-length 4096 --tokenizer-model {model}\n"
    )
    for argv in (["check"], ["check", "--format", "json"], ["memory"]):
        code, out = _run([*argv, str(script)], capsys)
        assert SECRET not in out and "Traceback" not in out
    code, out = _run(["check", str(script), "--allow-source", str(model)], capsys)
    assert SECRET in out  # the flag does reach the file


HYDRA_CONFIG = f"""hydra:
  searchpath: [pkg://verl.trainer.config]
defaults: [ppo_trainer, _self_]
data:
  train_batch_size: {SECRET}
actor_rollout_ref:
  rollout:
    name: {SECRET}
"""


@pytest.mark.parametrize("argv", FORMATS)
def test_private_hydra_config_dir_is_never_printed(argv, tmp_path, capsys):
    folder = tmp_path / "private" / "config"
    folder.mkdir(parents=True)
    (folder / "mine.yaml").write_text(HYDRA_CONFIG)
    os.chmod(folder / "mine.yaml", 0o600)
    script = _launch(tmp_path, f"--config-path={folder}", "--config-name=mine")
    code, out = _all_output(argv, script, tmp_path, capsys)
    assert SECRET not in out and "Traceback" not in out
    if argv == ["check"]:
        assert f"{folder / 'mine.yaml'} is not read" in out and f"--allow-source {folder}" in out
    code, out = _all_output(argv, script, tmp_path, capsys, "--allow-source", str(folder))
    if argv[0] == "check":
        assert SECRET in out  # allowed, the file is read: its bad value is quoted


# ---- 8. a directory walk does not follow symlinks out; `source link/../f.sh` resolves the link first ----


def test_directory_walk_leaves_out_symlinks_to_private_or_outside_files(tmp_path, capsys):
    walk = tmp_path / "walk"
    (walk / "sub").mkdir(parents=True)
    (walk / "a.sh").write_text(BAD_WORLD)
    os.chmod(walk / "a.sh", 0o644)
    private = tmp_path / "private" / "x.sh"
    private.parent.mkdir()
    private.write_text(BAD_WORLD.replace("main_ppo", f"main_ppo trainer.project_name={SECRET}"))
    os.chmod(private, 0o600)
    (walk / "b.sh").symlink_to(private)
    (walk / "sub" / "c.sh").symlink_to(walk / "a.sh")  # inside the tree, readable by everyone: read
    inside_private = walk / "d.txt"
    inside_private.write_text(BAD_WORLD)
    os.chmod(inside_private, 0o600)
    (walk / "e.sh").symlink_to(inside_private)
    code, out = _run(["check", str(walk), "--format", "json"], capsys)
    assert SECRET not in out
    import json

    doc = json.loads(out[out.index("{") : out.rindex("}") + 1])
    assert sorted(Path(r["path"]).name for r in doc["results"]) == ["a.sh", "c.sh"]
    assert f"{walk / 'b.sh'}: a symlink, not read: {private} lies outside" in out
    assert f"{walk / 'e.sh'}: a symlink, not read: {inside_private} is not readable by everyone" in out
    code, out = _run(["check", str(walk), "--allow-source", str(private.parent), "--format", "json"], capsys)
    assert "b.sh" in out  # the same walk with the folder allowed reads it


def _link_dotdot(tmp_path: Path, target: str = "sub/deep") -> Path:
    job = tmp_path / "job"
    (job / "sub" / "deep").mkdir(parents=True)
    (job / "f.sh").write_text("PROJECT=text\n")  # what text normalisation of link/../f.sh names
    (job / "sub" / "f.sh").write_text("PROJECT=kernel\n")  # what bash opens: the link's target, then ..
    for f in (job / "f.sh", job / "sub" / "f.sh"):
        os.chmod(f, 0o644)
    (job / "link").symlink_to(job / target)
    script = job / "run.sh"
    script.write_text("source link/../f.sh\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=$PROJECT\n")
    return script


def test_source_through_a_symlink_then_dotdot_reads_what_bash_reads(tmp_path):
    import shardcheck

    script = _link_dotdot(tmp_path)
    bash = subprocess.run(
        ["bash", "-c", 'cd "$1" && source link/../f.sh && printf %s "$PROJECT"', "_", str(script.parent)],
        capture_output=True,
        text=True,
    )
    assert bash.stdout == "kernel"  # the oracle: bash itself, on this fixture
    assert shardcheck.check(script).job.value("actor_rollout_ref.rollout.name").value == "kernel"


def test_source_through_a_symlink_out_of_the_tree_is_refused(tmp_path):
    import shardcheck

    outside = tmp_path / "outside" / "deep"
    outside.mkdir(parents=True)
    (outside.parent / "f.sh").write_text(f"PROJECT={SECRET}\n")
    os.chmod(outside.parent / "f.sh", 0o644)
    script = _link_dotdot(tmp_path, str(outside))
    result = shardcheck.check(script)
    assert not result.job.value("actor_rollout_ref.rollout.name").known
    notes = [f.message for f in result.findings if f.rule == "SHELL-SOURCE"]
    assert notes and "lies outside the script's directory" in notes[0] and SECRET not in notes[0]


@pytest.mark.parametrize("where", ["outside", "private"])
def test_slime_role_file_is_read_under_the_policy(where, tmp_path):
    from shardcheck import check

    roles = "megatron:\n  - role: critic\n    overrides:\n      tensor_model_parallel_size: 4\n"
    folder = tmp_path / ("elsewhere" if where == "outside" else "job")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "roles.yaml").write_text(roles)
    os.chmod(folder / "roles.yaml", 0o644 if where == "outside" else 0o600)
    script = tmp_path / "job" / "run.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text(
        "ray job submit -- python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate "
        "--num-layers 48 --hidden-size 2048 --num-attention-heads 32 --seq-length 4096 "
        f"--advantage-estimator ppo --megatron-config-path {folder / 'roles.yaml'}\n"
    )
    tp = check(script).job.layout("critic").tp
    assert not tp.known and "is not read" in tp.unknown and "--allow-source" in tp.unknown
    assert check(script, allow_source=(str(folder),)).job.layout("critic").tp.value == 4


def test_a_refused_model_folder_falls_back_to_the_preset_of_its_name(tmp_path):
    """A world-readable model folder outside the script's tree is not read, but its name still names a preset:
    the job is judged with the preset's facts and the report says which file was not read."""
    models = tmp_path / "models" / "Qwen3-8B"
    models.mkdir(parents=True)
    (models / "config.json").write_text('{"num_attention_heads": 7, "num_hidden_layers": 3}')
    project = tmp_path / "project"
    project.mkdir()
    script = project / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=" + str(models) + " trainer.n_gpus_per_node=8\n"
    )
    from shardcheck.api import check

    job = check(str(script)).job
    assert job.model is not None and job.model.num_attention_heads == 32  # the preset's, not the file's 7
    assert "by name" in job.model.source and str(models / "config.json") in job.model.source
