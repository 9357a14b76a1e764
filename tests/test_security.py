"""What a file someone else controls can do to the person running shardcheck (issue 19): the config cache,
the caller's environment, ``source``, settings discovery, and the crash contract."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import pytest

from shardcheck.frameworks.verl import config_cache
from shardcheck.frameworks.verl.config_tree import _base_config


class _Canary:
    """Unpickling this creates ``path``: evidence that a pickle from outside was run."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


TREE = {"trainer": {"nnodes": 1, "n_gpus_per_node": 8}}


def _entry(directory: Path) -> Path:
    (found,) = directory.glob("verl-config-*.signed-pickle")
    return found


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SHARDCHECK_CACHE", raising=False)
    (tmp_path / "xdg").mkdir()
    return tmp_path / "xdg" / "shardcheck"


def test_cache_round_trip_is_private_and_keyed(cache):
    first = _base_config(TREE, "test")
    assert stat.S_IMODE(os.lstat(cache).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(cache / config_cache.KEY_NAME).st_mode) == 0o600
    entry = _entry(cache)
    assert entry.read_bytes().startswith(config_cache.MAGIC)
    assert _base_config(TREE, "test") == first
    assert not list(cache.glob("*.tmp"))


def test_planted_pickle_without_the_key_is_never_run(cache, tmp_path):
    _base_config(TREE, "test")
    entry, canary = _entry(cache), tmp_path / "ran"
    pickle.loads(pickle.dumps(_Canary(str(tmp_path / "works"))))
    assert (tmp_path / "works").exists()  # the canary does run when unpickled
    entry.write_bytes(pickle.dumps(_Canary(str(canary))))  # a plain pickle, no HMAC
    assert _base_config(TREE, "test") is not None
    assert not canary.exists()
    # a forged entry with the right header but another key's MAC
    payload = pickle.dumps(_Canary(str(canary)))
    entry.write_bytes(config_cache.MAGIC + b"\0" * 32 + payload)
    assert _base_config(TREE, "test") is not None
    assert not canary.exists()
    assert config_cache.load(cache, entry.name) is not None  # rebuilt and re-signed


def test_planted_symlink_is_not_followed(cache, tmp_path):
    """A link at the entry's name to a signed entry of the victim's (a file they own) is not read."""
    _base_config(TREE, "test")
    entry = _entry(cache)
    elsewhere = tmp_path / "victim-file"
    elsewhere.write_bytes(entry.read_bytes())
    entry.unlink()
    entry.symlink_to(elsewhere)
    assert config_cache.load(cache, entry.name) is None
    before = elsewhere.read_bytes()
    _base_config(TREE, "test")  # rebuilds: replaces the link, never writes through it
    assert elsewhere.read_bytes() == before
    assert not entry.is_symlink()


def test_symlinked_key_is_not_trusted(cache, tmp_path):
    _base_config(TREE, "test")
    key = cache / config_cache.KEY_NAME
    other = tmp_path / "other-key"
    other.write_bytes(key.read_bytes())
    key.unlink()
    key.symlink_to(other)
    assert config_cache.load(cache, _entry(cache).name) is None


def test_symlinked_cache_directory_is_not_used(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "xdg").mkdir()
    (tmp_path / "xdg" / "shardcheck").symlink_to(real)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SHARDCHECK_CACHE", raising=False)
    _base_config(TREE, "test")
    assert list(real.iterdir()) == []


@pytest.mark.parametrize("mode", [0o777, 0o755, 0o770])
def test_shared_cache_directory_is_not_used(cache, mode, tmp_path):
    """A directory someone else made world-writable (or readable) is left alone: nothing read, nothing written."""
    cache.mkdir()
    os.chmod(cache, mode)
    canary = tmp_path / "ran"
    planted = pickle.dumps(_Canary(str(canary)))
    assert _base_config(TREE, "test") is not None
    assert list(cache.iterdir()) == []
    assert stat.S_IMODE(os.lstat(cache).st_mode) == mode
    (cache / "x.pickle").write_bytes(planted)
    assert config_cache.load(cache, "x.pickle") is None
    assert not canary.exists()


def test_foreign_owned_cache_directory_is_not_used(cache):
    """Owner check with the expected uid injected (tests run as one user, often root)."""
    _base_config(TREE, "test")
    name = _entry(cache).name
    assert config_cache.load(cache, name) is not None
    someone_else = os.getuid() + 1
    assert config_cache.load(cache, name, uid=someone_else) is None
    assert not config_cache.store(cache, "y.pickle", b"data", uid=someone_else)
    assert not (cache / "y.pickle").exists()


def test_corrupted_entry_is_rebuilt(cache):
    first = _base_config(TREE, "test")
    entry = _entry(cache)
    data = bytearray(entry.read_bytes())
    data[-5:] = b"\xff\xfe\x00\x01\x02"
    entry.write_bytes(bytes(data))
    assert _base_config(TREE, "test") == first
    entry.write_bytes(b"")
    assert _base_config(TREE, "test") == first
    entry.write_bytes(config_cache.MAGIC)
    assert _base_config(TREE, "test") == first
    assert config_cache.load(cache, entry.name) is not None


def test_signed_but_unloadable_entry_is_rebuilt(cache):
    """An intact entry whose pickle cannot be loaded (another omegaconf, a truncated write) is rebuilt."""
    first = _base_config(TREE, "test")
    name = _entry(cache).name
    assert config_cache.store(cache, name, b"not a pickle")
    assert _base_config(TREE, "test") == first


def test_no_directories_made_under_a_missing_home(tmp_path, monkeypatch):
    home = tmp_path / "no-such-home"
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("SHARDCHECK_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(home))
    assert _base_config(TREE, "test") is not None
    assert not home.exists()


def test_cache_parent_made_only_in_an_owned_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("SHARDCHECK_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(home))
    _base_config(TREE, "test")
    assert stat.S_IMODE(os.lstat(home / ".cache" / "shardcheck").st_mode) == 0o700


# ---- nothing of the caller's environment reaches the output ----

SECRET = "s3cr3t-VALUE-0f-the-ci-job"
EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "shardcheck" / "examples" / "qwen3_235b_256k.sh"


def _run(argv: list[str], capsys) -> tuple[int, str]:
    from shardcheck.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def _verl_script(tmp_path: Path, *overrides: str) -> Path:
    script = tmp_path / "run.sh"
    words = " ".join(f"'{o}'" for o in overrides)
    script.write_text(f"set -- {words}\n" + EXAMPLE.read_text())
    return script


LEAKS = [
    "trainer.project_name=${oc.env:SECRET_TOKEN}",
    "actor_rollout_ref.model.path=/models/${oc.env:SECRET_TOKEN}",
    "trainer.experiment_name=${oc.env:SECRET_TOKEN,fallback}",
    "data.train_batch_size=${oc.decode:${oc.env:SECRET_TOKEN}}",
    "+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=${oc.select:${oc.env:SECRET_TOKEN}}",
    "trainer.default_local_dir=${  oc.env : SECRET_TOKEN }",
    "actor_rollout_ref.rollout.engine_kwargs={vllm: {x: '${oc.env:SECRET_TOKEN}'}}",
    "trainer.logger=[console,'${oc.env:SECRET_TOKEN}']",
    "trainer.val_before_train=${oc.env:SECRET_TOKEN",
]


@pytest.mark.parametrize("override", LEAKS)
@pytest.mark.parametrize(
    "command",
    [
        ["check"],
        ["check", "--format", "json"],
        ["memory"],
        ["memory", "--format", "json"],
        ["mesh"],
        ["mesh", "--format", "json"],
    ],
)
def test_environment_never_printed(override, command, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SECRET_TOKEN", SECRET)
    script = _verl_script(tmp_path, override, "trainer.total_training_steps=${trainer.project_name}")
    code, out = _run([*command, str(script), "--env", "WORK_DIR=/w"], capsys)
    assert SECRET not in out
    assert code in (0, 1, 2)


def test_oc_env_value_is_unknown_with_its_line(tmp_path, monkeypatch):
    import shardcheck

    monkeypatch.setenv("NGPU", "8")
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n  trainer.n_gpus_per_node='${oc.env:NGPU}'\n")
    result = shardcheck.check(script)
    assert not result.job.cluster.devices_per_node.known
    assert "--env NGPU=VALUE" in result.job.cluster.devices_per_node.unknown
    unknown = [f for f in result.findings if f.rule == "VALUE-UNKNOWN" and "n_gpus_per_node" in f.message]
    assert unknown and unknown[0].line == 2


def test_oc_env_takes_the_env_option(tmp_path):
    import shardcheck

    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node='${oc.env:NGPU}'\n")
    result = shardcheck.check(script, {"NGPU": "4"})
    assert result.job.cluster.devices_per_node.value == 4


# ---- source: only what the launch's own tree shows everyone, or --allow-source ----


def _sourcing(tmp_path: Path, target: str) -> Path:
    script = tmp_path / "job" / "run.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"source {target}\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=$PROJECT\n")
    return script


def _project(script: Path, **kw):
    import shardcheck

    result = shardcheck.check(script, **kw)
    notes = [f.message for f in result.findings if f.rule == "SHELL-SOURCE"]
    return result.job.value("actor_rollout_ref.rollout.name") if result.job else None, notes


def test_source_inside_the_tree_is_followed(tmp_path):
    script = _sourcing(tmp_path, "./conf/vars.sh")
    (script.parent / "conf").mkdir()
    (script.parent / "conf" / "vars.sh").write_text("PROJECT=inside\n")
    os.chmod(script.parent / "conf" / "vars.sh", 0o644)
    value, notes = _project(script)
    assert value.value == "inside" and not notes


def test_private_file_is_not_sourced(tmp_path):
    script = _sourcing(tmp_path, "./secret.sh")
    secret = script.parent / "secret.sh"
    secret.write_text(f"PROJECT={SECRET}\n")
    os.chmod(secret, 0o600)
    value, notes = _project(script)
    assert not value.known and "not readable by everyone (mode 0600)" in notes[0]
    assert "--allow-source" in notes[0]
    value, notes = _project(script, allow_source=(str(script.parent),))
    assert value.value == SECRET and not notes


@pytest.mark.parametrize("how", ["path", "symlink"])
def test_file_outside_the_tree_is_not_sourced(tmp_path, how, capsys):
    outside = tmp_path / "elsewhere" / "creds.sh"
    outside.parent.mkdir()
    outside.write_text(f"PROJECT={SECRET}\n")
    os.chmod(outside, 0o644)
    if how == "path":
        script = _sourcing(tmp_path, "../elsewhere/creds.sh")
    else:
        script = _sourcing(tmp_path, "./link.sh")
        (script.parent / "link.sh").symlink_to(outside)
    value, notes = _project(script)
    assert not value.known and "lies outside the script's directory" in notes[0]
    assert SECRET not in _run(["check", str(script), "--format", "json"], capsys)[1]
    _code, out = _run(["check", str(script), "--allow-source", str(outside.parent)], capsys)
    assert "lies outside" not in out


# ---- settings: the work tree's own, or --config ----

BAD_WORLD = (
    "python3 -m verl.trainer.main_ppo model_engine=megatron "
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3\n"
)


def _tree(tmp_path: Path) -> Path:
    """shared/ (someone else's parent directory) / repo (a git work tree) / scripts / run.sh"""
    script = tmp_path / "shared" / "repo" / "scripts" / "run.sh"
    script.parent.mkdir(parents=True)
    (tmp_path / "shared" / "repo" / ".git").mkdir()
    script.write_text(BAD_WORLD)
    return script


def test_settings_above_the_work_tree_are_not_obeyed(tmp_path, capsys):
    script = _tree(tmp_path)
    (tmp_path / "shared" / "pyproject.toml").write_text('[tool.shardcheck]\nignore = ["MCORE-"]\n')
    code, out = _run(["check", str(script)], capsys)
    assert code == 1 and "MCORE-PS-WORLD" in out
    (tmp_path / "shared" / "repo" / "pyproject.toml").write_text('[tool.shardcheck]\nignore = ["MCORE-", "VERL-"]\n')
    code, out = _run(["check", str(script), "--verbose"], capsys)
    assert code == 0 and f"settings   {tmp_path / 'shared' / 'repo' / 'pyproject.toml'}" in out


def test_settings_outside_a_work_tree_are_the_script_directory_only(tmp_path, capsys):
    script = tmp_path / "a" / "b" / "c" / "run.sh"
    script.parent.mkdir(parents=True)
    script.write_text(BAD_WORLD)
    (tmp_path / "pyproject.toml").write_text('[tool.shardcheck]\nignore = [""]\n')
    assert _run(["check", str(script)], capsys)[0] == 1


def test_settings_file_in_json_and_config_option(tmp_path, capsys):
    import json

    script = _tree(tmp_path)
    code, out = _run(["check", str(script), "--format", "json"], capsys)
    assert json.loads(out)["results"][0]["settings"] is None
    mine = tmp_path / "mine.toml"
    mine.write_text('[tool.shardcheck]\nignore = ["MCORE-", "VERL-"]\n')
    code, out = _run(["check", str(script), "--format", "json", "--config", str(mine)], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["results"][0]["settings"] == str(mine)


@pytest.mark.parametrize(
    "body",
    [
        'ignore = [""]',
        'ignore = "MCORE-"',
        "select = [1, 2]",
        "fail-on = 3",
        'fail-on = ["error"]',
        "ignore = [[]]",
        "shardcheck = 1",
        "select = {a = 1}",
    ],
)
def test_ill_typed_settings_are_one_line_exit_2(tmp_path, body, capsys):
    script = _tree(tmp_path)
    toml = tmp_path / "shared" / "repo" / "pyproject.toml"
    toml.write_text("[tool]\n" + body + "\n" if body.startswith("shardcheck") else "[tool.shardcheck]\n" + body + "\n")
    code, out = _run(["check", str(script)], capsys)
    assert code == 2 and "Traceback" not in out and str(toml) in out
    code, out = _run(["check", str(script), "--config", str(toml)], capsys)
    assert code == 2 and "Traceback" not in out and len(out.strip().splitlines()) == 1


def test_missing_config_file_is_exit_2(tmp_path, capsys):
    code, out = _run(["check", str(_tree(tmp_path)), "--config", str(tmp_path / "nope.toml")], capsys)
    assert code == 2 and "no such file" in out


# ---- the crash contract ----


def test_internal_error_is_exit_4_one_line(monkeypatch, capsys, tmp_path):
    from shardcheck.rules import registry

    def boom(job):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(registry, "run_rules", boom)
    script = _tree(tmp_path)
    code, out = _run(["check", str(script)], capsys)
    assert code == 4 and "internal error (ZeroDivisionError: planted" in out and "Traceback" not in out
    # crash isolation (issue 32): the script's one INTERNAL-ERROR line, then the batch's summary
    (line,) = [row for row in out.strip().splitlines() if "internal error" in row]
    assert "INTERNAL-ERROR" in line and "report" in line and "1 failed" in out.strip().splitlines()[-1]
    code, out = _run(["check", str(script), "--debug"], capsys)
    assert code == 4 and "Traceback" in out
    code, out = _run(["check", str(script), "--format", "json"], capsys)
    import json

    (result,) = json.loads(out)["results"]
    assert code == 4 and "internal error" in result["error"] and result["findings"][0]["rule"] == "INTERNAL-ERROR"


@pytest.mark.parametrize(
    "argv",
    [
        ["--world", "-8"],
        ["--world", "8", "--tp", "-1"],
        ["--world", "8", "--etp", "0"],
        ["--world", "0"],
        ["--world", "8", "--vpp", "0"],
        ["--world", "8", "--devices-per-node", "0"],
        ["--world", "abc"],
        ["--world", "8", "--rank", "-1"],
        ["--world", "8", "--rank", "99"],
        ["/no/such/script.sh"],  # (no argument at all judges the built-in example: test_cli_consistency.py)
    ],
)
def test_mesh_json_is_always_json(argv, capsys):
    import json

    code, out = _run(["mesh", *argv, "--format", "json"], capsys)
    doc = json.loads(out[: out.rindex("}") + 1])
    assert code == 2 and doc["error"] and "Traceback" not in out
    code, out = _run(["mesh", *argv], capsys)
    assert code == 2 and len(out.strip().splitlines()) == 1


def test_bad_env_option_is_exit_2(capsys):
    code, out = _run(["check", "--env", "NOEQUALS"], capsys)
    assert code == 2 and "expected NAME=VALUE" in out


# ---- every value a rule or the estimate reads is checked where it is read ----

MLM_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "megatron_lm_pretrain_gpt.sh"
REPRODUCERS = [  # issue 19's crash reproducers: (override, rule)
    ("data.train_batch_size=-1", "VALUE-BAD-RANGE"),
    ("actor_rollout_ref.actor.ppo_mini_batch_size=1.5", "VALUE-BAD-TYPE"),
    ("actor_rollout_ref.rollout.gpu_memory_utilization=abc", "VALUE-BAD-TYPE"),
    ("data.max_prompt_length=1e400", "VALUE-BAD-RANGE"),
    ("actor_rollout_ref.rollout.max_num_seqs=0", "VALUE-BAD-RANGE"),
    ("trainer.n_gpus_per_node=0", "VALUE-BAD-SIZE"),
    ("actor_rollout_ref.rollout.gpu_memory_utilization=nan", "VALUE-BAD-RANGE"),
    ("actor_rollout_ref.rollout.name=[vllm]", "VALUE-BAD-TYPE"),
    ("actor_rollout_ref.actor.use_dynamic_bsz=[1]", "VALUE-BAD-TYPE"),
    ("actor_rollout_ref.rollout.n=1099511627777", "VALUE-BAD-RANGE"),
]


@pytest.mark.parametrize("override,rule", REPRODUCERS)
@pytest.mark.parametrize("command", [["check"], ["check", "--format", "json"], ["memory"], ["mesh"]])
def test_bad_verl_value_is_a_finding_at_its_line(override, rule, command, tmp_path, capsys):
    script = _verl_script(tmp_path, override)
    code, out = _run([*command, str(script), "--env", "WORK_DIR=/w"], capsys)
    assert "Traceback" not in out and "internal error" not in out
    if command[0] == "check":
        assert code == 1 and rule in out
        assert f"{script}:1: {rule}" in out or '"line": 1' in out
    else:
        assert code in (0, 1)


@pytest.mark.parametrize(
    "old,new,rule",
    [
        ("--global-batch-size 256", "--global-batch-size 0", "VALUE-BAD-RANGE"),
        ("--num-virtual-stages-per-pipeline-rank 2", "--num-virtual-stages-per-pipeline-rank 0", "VALUE-BAD-RANGE"),
        ("--seq-length 8192", "--seq-length 1e400", "VALUE-BAD-SIZE"),
        ("--micro-batch-size 1", "--micro-batch-size -3", "VALUE-BAD-RANGE"),
        ("--micro-batch-size 1", "--micro-batch-size " + "9" * 5000, "VALUE-BAD-SIZE"),
    ],
)
@pytest.mark.parametrize("command", [["check"], ["memory"], ["mesh"]])
def test_bad_megatron_lm_flag_is_a_finding(old, new, rule, command, tmp_path, capsys):
    script = tmp_path / "pretrain.sh"
    text = MLM_EXAMPLE.read_text()
    assert old in text
    script.write_text(text.replace(old, new))
    code, out = _run([*command, str(script)], capsys)
    assert "Traceback" not in out and "internal error" not in out
    if command[0] == "check":
        assert code == 1 and rule in out


def test_every_verl_key_read_has_a_kind_and_the_defaults_pass():
    from shardcheck.frameworks.verl.resolve import FSDP_VALUE_KEYS, MEMORY_KEYS, VALUE_KEYS, VALUE_KINDS

    assert set(VALUE_KEYS + MEMORY_KEYS + FSDP_VALUE_KEYS) == set(VALUE_KINDS)


@pytest.mark.parametrize("config", ["ppo_trainer", "ppo_megatron_trainer"])
def test_verl_defaults_are_never_bad_values(config, tmp_path):
    import shardcheck

    script = tmp_path / "run.sh"
    script.write_text(
        f"python3 -m verl.trainer.main_ppo --config-name={config} critic.enable=true "
        "actor_rollout_ref.actor.use_kl_loss=true actor_rollout_ref.rollout.name=sglang\n"
    )
    result = shardcheck.check(script)
    assert not [f.message for f in result.findings if f.rule.startswith("VALUE-BAD")]


def test_vpp_layers_per_stage_without_num_layers_is_no_crash(tmp_path, capsys):
    """bench/fuzz_values.py found it: slime's model from --hf-checkpoint (no --num-layers) and
    --num-layers-per-virtual-pipeline-stage."""
    slime = Path(__file__).resolve().parents[1] / "examples" / "slime" / "run-qwen3-235B-A22B-8x8.sh"
    script = tmp_path / "run.sh"
    lines = slime.read_text().rstrip("\n").split("\n")
    lines[-1] += " --num-layers-per-virtual-pipeline-stage 4"
    script.write_text("\n".join(lines) + "\n")
    for command in ("check", "memory", "mesh"):
        code, out = _run([command, str(script)], capsys)
        assert code in (0, 1, 2) and "internal error" not in out
