"""What scripts from other repositories write (issue 26): each construct read as bash reads it, a silent twin each.

Every script here is small and of our own; the constructs are those the issue counted on 478 real scripts.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from test_reader_gaps import _job
from test_reader_gaps import _rules as _findings

from shardcheck.api import check, resolve_script
from shardcheck.inputs.bash import read_bash_text

V = "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer"
TP = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size"
MLM = (
    "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
    "--micro-batch-size 1 --global-batch-size 8 --lr 1e-4 --train-iters 10"
)
HAS_BASH = shutil.which("bash") is not None


def _read(text: str, args=()):
    return read_bash_text(text.encode(), "run.sh", args=args)


def _value(text: str, name: str, args=()) -> str | None:
    var = _read(text, args).variables[name]
    return var.as_scalar().text


def _bash(tmp_path, text: str, args=()) -> str:
    """What bash prints for ``text`` (only scripts of our own, of echo and assignments)."""
    path = tmp_path / "probe.sh"
    path.write_text(text)
    return subprocess.run(["bash", str(path), *args], capture_output=True, text=True, check=True).stdout


# -- 1. positional parameters past 9 --------------------------------------------------------------------------
ARGS = tuple(f"a{k}" for k in range(1, 13))


def test_braced_positional_past_nine_is_that_parameter():
    text = "X=${10}\nY=${11:-none}\nZ=${#12}\nW=$10\nU=${13:-d}\n"
    reading = _read(text, ARGS)
    assert not reading.diagnostics
    got = {n: reading.variables[n].as_scalar().text for n in "XYZWU"}
    assert got == {"X": "a10", "Y": "a11", "Z": "3", "W": "a10", "U": "d"}


@pytest.mark.skipif(not HAS_BASH, reason="no bash here")
def test_braced_positional_agrees_with_bash(tmp_path):
    text = 'X=${10}\nY=${11:-none}\nZ=${#12}\nW=$10\nU=${13:-d}\necho "$X $Y $Z $W $U"\n'
    reading = _read(text, ARGS)
    mine = " ".join(reading.variables[n].as_scalar().text for n in "XYZWU")
    assert _bash(tmp_path, text, ARGS).strip() == mine


def test_braced_positional_not_given_is_unknown_not_bad_substitution():
    reading = _read("X=${10}\n")
    assert not reading.diagnostics
    assert "script argument" in reading.variables["X"].as_scalar().unknowns[0].unknown


def test_bad_substitution_still_reported():
    assert any("bad substitution" in str(d.args) for d in _read("X=${1a}\n").diagnostics)


# -- 2. associative arrays ------------------------------------------------------------------------------------
ASSOC = """declare -A m
m["aime"]=math
m[gsm8k]=grade
m[gsm8k]+=s
k=aime
declare -A n=([a]=1 ["b"]=2)
typeset -A one
one[only]=x
A=${m[aime]}
B=${m[$k]}
C=${m["gsm8k"]}
N=${#m[@]}
K="${!one[@]}"
O=${one[@]}
"""


def test_associative_array_subscripts_are_strings():
    reading = _read(ASSOC)
    assert not reading.diagnostics  # was SHELL-ARITH: `m["aime"]` evaluated as arithmetic
    got = {n: reading.variables[n].as_scalar().text for n in ("A", "B", "C", "N", "K", "O")}
    assert got == {"A": "math", "B": "math", "C": "grades", "N": "2", "K": "only", "O": "x"}
    assert reading.variables["n"].keys == ("a", "b")


@pytest.mark.skipif(not HAS_BASH, reason="no bash here")
def test_associative_array_agrees_with_bash(tmp_path):
    names = ("A", "B", "C", "N", "K", "O")
    out = _bash(tmp_path, ASSOC + "echo " + " ".join(f'"${n}"' for n in names) + "\n")
    reading = _read(ASSOC)
    assert out.split() == [reading.variables[n].as_scalar().text for n in names]


def test_associative_array_in_a_function_with_local():
    text = 'f() {\n  local -A cfg\n  cfg["tp"]=4\n  TPV=${cfg[tp]}\n}\nf\n' + f"{V} {TP}=$TPV\n"
    reading = _read(text)
    assert not reading.diagnostics
    command = reading.commands[-1]
    assert not command.fields[-1].known  # set by a function: unknown, with its reason (never guessed)


def test_associative_array_order_is_not_guessed():
    """bash lists ``${m[@]}`` / ``${!m[@]}`` in its hash table's order: not the order of assignment."""
    reading = _read('declare -A m=([x]=1 [y]=2)\nV="${m[@]}"\nK="${!m[@]}"\n')
    for name in ("V", "K"):
        assert "hash order" in reading.variables[name].as_scalar().unknowns[0].unknown


def test_unknown_key_is_unknown():
    reading = _read("declare -A m\nm[$(hostname)]=1\nX=${m[a]}\n")
    assert not reading.diagnostics and not reading.variables["X"].as_scalar().known


def test_indexed_array_subscripts_stay_arithmetic():
    reading = _read("a=(x y z)\ni=1\na[i+1]=w\nX=${a[2]}\n")
    assert reading.variables["X"].as_scalar().text == "w"


# -- 3. an unknown value is unknown, not empty ----------------------------------------------------------------
def test_unknown_list_value_is_unknown_not_missing(tmp_path):
    text = f"DATA_PATH=$4\ntorchrun --nproc-per-node 8 pretrain_gpt.py {MLM} --data-path $DATA_PATH --seed 1\n"
    rules = _findings(tmp_path, text)
    assert "VALUE-BAD-TYPE" not in rules  # was: argparse: expected at least one argument
    assert "argparse stops" in rules["VALUE-UNKNOWN"].message and "$4" in rules["VALUE-UNKNOWN"].message


def test_missing_list_value_is_still_an_error(tmp_path):
    text = f"torchrun --nproc-per-node 8 pretrain_gpt.py {MLM} --data-path --seed 1\n"
    rules = _findings(tmp_path, text)
    assert any("argparse stops" in f.message and f.severity == "error" for f in rules.values())


def test_given_list_value_is_silent(tmp_path):
    text = f"DATA_PATH=/data/x\ntorchrun --nproc-per-node 8 pretrain_gpt.py {MLM} --data-path $DATA_PATH --seed 1\n"
    rules = _findings(tmp_path, text)
    assert "VALUE-BAD-TYPE" not in rules and "VALUE-UNKNOWN" not in rules


# -- dead code: what bash never runs is not judged ------------------------------------------------------------
LAUNCH = f"{V} {TP}=2"


@pytest.mark.parametrize(
    "text",
    [
        f"echo start\nexit 0\n{LAUNCH}\n",
        f"if false; then\n  {LAUNCH}\nfi\n",
        f"true || {LAUNCH}\n",
        f"false && {LAUNCH}\n",
        f"while false; do\n  {LAUNCH}\ndone\n",
        f"until true; do {LAUNCH}; done\n",
        f"f() {{ exit 0; }}\nf\n{LAUNCH}\n",
        f"train() {{\n  {LAUNCH}\n}}\n",
        f'if [ -z "$X" ]; then exit 1; else exit 0; fi\n{LAUNCH}\n',
    ],
)
def test_dead_launch_is_not_judged(tmp_path, text):
    assert not [c for c in _read(text).commands if c.fields[0].text == "python3"]
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = check(path)
    assert result.error is not None and "no launch command" in result.error


@pytest.mark.parametrize(
    "text",
    [
        f"if true; then\n  {LAUNCH}\nfi\n",
        f"true && {LAUNCH}\n",
        f"cd /work || exit 1\n{LAUNCH}\n",
        f"[ -d /work ] || exit 1\n{LAUNCH}\n",
        f'if [ -z "$X" ]; then echo usage; exit 1; fi\n{LAUNCH}\n',
        f"(cd /tmp; exit 0)\n{LAUNCH}\n",
        f"for i in 1 2; do exit 0; done\n{LAUNCH}\n",
        f'bash -c "exit 0"\n{LAUNCH}\n',
        f"train() {{\n  {LAUNCH}\n}}\ntrain\n",
        f"{LAUNCH}\nexit 0\n",
    ],
)
def test_live_launch_is_judged(tmp_path, text):
    assert _job(tmp_path, text).layout("actor").tp.value == 2


@pytest.mark.skipif(not HAS_BASH, reason="no bash here")
@pytest.mark.parametrize(
    ("text", "runs"),
    [
        ("exit 0\necho L\n", False),
        ("if false; then echo L; fi\n", False),
        ("true || echo L\n", False),
        ("while false; do echo L; done\n", False),
        ("f() { echo L; }\n", False),
        ("cd / || exit 1\necho L\n", True),
        ("(exit 0)\necho L\n", True),
        ("for i in 1; do :; done\necho L\n", True),
    ],
)
def test_dead_code_agrees_with_bash(tmp_path, text, runs):
    assert ("L" in _bash(tmp_path, text)) is runs
    assert any(c.fields[0].text == "echo" for c in _read(text).commands) is runs


def test_no_launch_names_the_exit_and_the_uncalled_function(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(f"echo start\nexit 0\n{LAUNCH}\n")
    assert "run.sh:2: `exit` ends the script" in str(check(path).error)
    path.write_text(f"train() {{\n  {LAUNCH}\n}}\n")
    assert "function train() holds a launch but is never called" in str(check(path).error)
    path.write_text("echo start\nexit 0\n")
    assert "`exit` ends" not in str(check(path).error)  # nothing after it: the plain "no launch command"


def test_blank_line_after_backslash_ends_the_launch(tmp_path):
    text = f"{V} \\\n  trainer.nnodes=1 \\\n\n  {TP}=2 \\\n  trainer.n_gpus_per_node=4\n"
    rules = _findings(tmp_path, text)
    assert rules["SHELL-CONTINUATION"].line == 2 and "line 4" in rules["SHELL-CONTINUATION"].message
    assert _job(tmp_path, text).layout("actor").tp.value == 1  # line 4 is not part of the launch (bash)
    silent = _findings(tmp_path, f"{V} \\\n  trainer.nnodes=1 \\\n  {TP}=2\n\necho done\n")
    assert "SHELL-CONTINUATION" not in silent


@pytest.mark.skipif(not HAS_BASH, reason="no bash here")
def test_blank_line_after_backslash_agrees_with_bash(tmp_path):
    out = _bash(tmp_path, 'echo a \\\n  b \\\n\n  c=1\necho "[$c]"\n')
    assert out.splitlines() == ["a b", "[1]"]  # `c=1` ran as an assignment of its own


# -- 7. eval ----------------------------------------------------------------------------------------------------
MLM_LAUNCH = f"torchrun --nproc-per-node 8 pretrain_gpt.py {MLM} --tensor-model-parallel-size 2"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (f'run_cmd="{MLM_LAUNCH}"\neval ${{run_cmd}}\n', 1),
        (f'CMD="{MLM_LAUNCH}"\neval "$CMD"\n', 1),
        (f"eval {MLM_LAUNCH}\n", 1),
        (
            f'OPTS="--tensor-model-parallel-size 2"\nCMD="torchrun --nproc-per-node 8 pretrain_gpt.py {MLM} $OPTS"\n'
            'eval "$CMD" 2>&1 | tee log.txt\n',
            3,  # a string written on two lines: its positions are the eval's
        ),
    ],
)
def test_eval_of_a_known_string_is_read(tmp_path, text, line):
    job = _job(tmp_path, text)
    assert job.framework == "megatron-lm" and job.layout("actor").tp.value == 2
    assert job.layout("actor").tp.origin.line == line  # traced to where the string was written
    assert "SHELL-EVAL" not in _findings(tmp_path, text)


def test_eval_sets_variables_in_this_shell():
    assert _value('eval "TP=4"\nX=$TP\n', "X") == "4"
    assert _value("eval 'A=1; B=$A$A'\n", "B") == "11"


def test_eval_of_an_unknown_string_is_unknown_with_its_line(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text('echo setup\nCMD=$(cat cmd.txt)\neval "$CMD"\n')
    result = check(path)
    assert "run.sh:3: `eval` of a string that is not known" in str(result.error)
    rules = _findings(tmp_path, f'eval "$(cat extra.sh)"\n{MLM_LAUNCH}\n')
    assert rules["SHELL-EVAL"].line == 1 and "not known" in rules["SHELL-EVAL"].message


def test_eval_with_unknown_parts_reads_the_known_words(tmp_path):
    """Pai-Megatron-Patch's form: the distributed options hold values not given; each is one unknown word."""
    text = (
        'DISTRIBUTED_ARGS="--nproc_per_node 8 --nnodes 1 --master_addr $MASTER_ADDR"\n'
        f'run_cmd="torchrun $DISTRIBUTED_ARGS pretrain_qwen.py {MLM} --tensor-model-parallel-size 2 --load $1"\n'
        "eval ${run_cmd}\n"
    )
    job = _job(tmp_path, text)
    assert job.framework == "megatron-lm" and job.layout("actor").tp.value == 2
    assert job.cluster.devices_per_node.value == 8
    assert "SHELL-EVAL" not in _findings(tmp_path, text)


def test_eval_unknown_part_inside_single_quotes_is_unknown():
    command = _read("X=$(hostname)\neval \"echo 'a $X' b\"\n").commands[0]
    assert [f.text for f in command.fields] == ["echo", None, "b"]  # never the placeholder's name as text


@pytest.mark.skipif(not HAS_BASH, reason="no bash here")
def test_eval_agrees_with_bash(tmp_path):
    text = 'CMD="echo \'a  b\' c"\neval $CMD\neval "$CMD"\n'
    out = _bash(tmp_path, text).splitlines()
    mine = [" ".join(f.text for f in c.fields[1:]) for c in _read(text).commands]
    assert out == mine == ["a b c", "a  b c"]  # unquoted: split, then joined with one space


# -- 9, 10. launchers ------------------------------------------------------------------------------------------
def test_environment_after_ray_job_submit(tmp_path):
    text = (
        "ray job submit --address=http://head:8265 --runtime-env-json='{}' -- PYTHONUNBUFFERED=1 HYDRA_FULL_ERROR=1 "
        f"{V} {TP}=2\n"
    )
    job = _job(tmp_path, text)
    assert job.framework == "verl" and job.layout("actor").tp.value == 2


@pytest.mark.parametrize(
    "runner",
    [
        "srun -N $NODES --gres=gpu:8 apptainer exec --nv -B /data:/data --env A=1 /images/mlm.sif",
        "singularity exec --bind=/data /images/mlm.sif",
        "apptainer exec --nv --cleanenv docker://nvcr.io/nvidia/pytorch:25.01-py3",
    ],
)
def test_container_exec(tmp_path, runner):
    job = _job(tmp_path, f"{runner} {MLM_LAUNCH}\n")
    assert job.framework == "megatron-lm" and job.cluster.devices_per_node.value == 8


def test_container_run_is_no_launch(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(f"apptainer run /images/mlm.sif {MLM_LAUNCH}\n")  # runs the image's runscript, not a command
    assert check(path).error is not None


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_srun_shell_string_with_unknown_options(tmp_path, shell):
    text = f'CMD="{MLM_LAUNCH}"\nsrun -N $NODES --ntasks-per-node=1 {shell} -c "$CMD"\n'
    assert _job(tmp_path, text).layout("actor").tp.value == 2


def test_deepspeed_launcher(tmp_path):
    job = _job(tmp_path, f"deepspeed --num_gpus 8 --num_nodes=2 --master_port 29500 pretrain_gpt.py {MLM}\n")
    assert job.framework == "megatron-lm" and job.cluster.nnodes.value == 2 and job.cluster.devices_per_node.value == 8
    bare = _job(tmp_path, f"deepspeed --hostfile hosts pretrain_gpt.py {MLM}\n").cluster
    assert not bare.nnodes.known and "hostfile" in bare.nnodes.unknown  # every host of it: not guessed
    path = tmp_path / "run.sh"
    path.write_text(f"deepspeed --no_python ./pretrain_gpt.py {MLM}\n")
    assert check(path).error is not None


# -- 8. entry scripts of other names with Megatron-LM's flags ---------------------------------------------------
@pytest.mark.parametrize(
    "script", ["pretrain_qwen.py", "examples/qwen3/pretrain_mcore_qwen.py", "pretrain_deepseek4.py"]
)
def test_other_entry_with_megatron_flags_is_megatron_lm(tmp_path, script):
    job = _job(tmp_path, f"torchrun --nproc-per-node 8 {script} {MLM} --tensor-model-parallel-size 2 --fork-own 1\n")
    assert job.framework == "megatron-lm" and job.layout("actor").tp.value == 2
    assert "judged as Megatron-LM because it takes Megatron-LM's flags" in job.config_source
    rules = _findings(
        tmp_path, f"torchrun --nproc-per-node 8 {script} {MLM} --tensor-model-parallel-size 2 --fork-own 1\n"
    )
    assert "MLM-FLAG-UNKNOWN" not in rules  # a fork's own flag is not judged


def test_fork_entry_may_set_what_megatron_lm_requires(tmp_path):
    """Pai-Megatron-Patch's pretrain_mcore_qwen.py derives --train-iters from its own --epochs: not an error."""
    fork = MLM.replace(" --lr 1e-4 --train-iters 10", "")
    rules = _findings(
        tmp_path, f"torchrun --nproc-per-node 8 pretrain_mcore_qwen.py {fork} --tensor-model-parallel-size 2\n"
    )
    assert "MLM-TRAIN-LENGTH" not in rules and "MLM-LR-NEEDED" not in rules
    assert "may set" in rules["VALUE-UNKNOWN"].message
    own = _findings(tmp_path, f"torchrun --nproc-per-node 8 pretrain_gpt.py {fork} --tensor-model-parallel-size 2\n")
    assert "MLM-TRAIN-LENGTH" in own and "MLM-LR-NEEDED" in own  # Megatron-LM's own script: still errors


@pytest.mark.parametrize(
    "command",
    [
        "train_tokenizer.py --vocab 3 --tensor-model-parallel-size 2",  # too few of Megatron-LM's flags
        f"evaluate_megatron_llama.py {MLM} --tensor-model-parallel-size 2",  # takes them, but does not train
        f"pretrain_x.py {MLM}",  # no parallel size
    ],
)
def test_other_entry_not_judged_as_megatron_lm(tmp_path, command):
    path = tmp_path / "run.sh"
    path.write_text(f"torchrun --nproc-per-node 8 {command}\n")
    assert check(path).error is not None


def test_megatron_lm_own_script_needs_no_explanation(tmp_path):
    own = _job(tmp_path, f"torchrun --nproc-per-node 8 pretrain_gpt.py {MLM}\n").config_source
    assert "judged as Megatron-LM because" not in own  # Megatron-LM's own script: nothing to explain


# -- 10, 11. verl forks' entry modules; --config-path beside the module -----------------------------------------
def _repo(tmp_path):
    """A repository with a fork's trainer (verl_tool.trainer.main_ppo) and a recipe (recipe.dapo.main_dapo), each
    with its config directory beside its module, and scripts two folders down."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    for module, name, base in (
        ("verl_tool/trainer/main_ppo", "agent_trainer", "ppo_trainer"),
        ("recipe/dapo/main_dapo", "dapo_trainer", "ppo_megatron_trainer"),
    ):
        folder = (root / module).parent
        (folder / "config").mkdir(parents=True)
        (root / f"{module}.py").write_text(
            f'import hydra\n@hydra.main(config_path="config", config_name="{name}", version_base=None)\n'
            "def main(config):\n    pass\n"
        )
        (folder / "config" / f"{name}.yaml").write_text(
            f"hydra:\n  searchpath:\n    - pkg://verl.trainer.config\ndefaults:\n  - {base}\n  - _self_\n"
            "extra:\n  turns: 3\n"
        )
    (root / "examples" / "x").mkdir(parents=True)
    return root


def test_fork_entry_module_is_judged_as_verl(tmp_path):
    root = _repo(tmp_path)
    script = root / "examples" / "x" / "run.sh"
    script.write_text(
        "python3 -m verl_tool.trainer.main_ppo actor_rollout_ref.rollout.tensor_model_parallel_size=2 extra.turns=4\n"
    )
    job = resolve_script(script)
    assert job.framework == "verl" and job.config_name == "agent_trainer"
    assert "verl_tool/trainer/config/agent_trainer.yaml" in job.config_source


@pytest.mark.parametrize("module", ["verl.trainer.main_eval", "mypkg.tools.main_ppo", "verl_tool.main_ppo"])
def test_other_modules_are_not_fork_entries(module):
    from shardcheck.frameworks.verl.resolve import is_fork_entry

    assert not is_fork_entry(module)
    assert is_fork_entry("verl_tool.trainer.main_ppo") and is_fork_entry("mypkg.recipe.dapo.main_dapo")


def test_config_path_is_beside_the_module(tmp_path):
    root = _repo(tmp_path)
    script = root / "examples" / "x" / "run.sh"
    script.write_text(f"python3 -m recipe.dapo.main_dapo --config-path=config --config-name=dapo_trainer {TP}=2\n")
    job = resolve_script(script)
    assert "recipe/dapo/config/dapo_trainer.yaml" in job.config_source and "beside main_dapo.py" in job.config_source
    assert job.layout("actor").tp.value == 2


# -- 12. script-directory idioms; files sourced from the repository root -----------------------------------------
IDIOMS = """SCRIPT_DIR=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd )
D2="$( cd "$( dirname "${BASH_SOURCE[0]}" )" && pwd )"
REPO_ROOT=$(cd -- "${SCRIPT_DIR}/../.." && pwd)
UP=$(dirname "$SCRIPT_DIR")
TOP=$(git rev-parse --show-toplevel)
REL=$(cd ../.. && pwd)
source "${REPO_ROOT}/scripts/models/m.sh"
source scripts/models/m2.sh
"""


def test_script_directory_idioms(tmp_path):
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "scripts" / "models").mkdir(parents=True)
    (root / "scripts" / "models" / "m.sh").write_text("TPA=4\n")
    (root / "scripts" / "models" / "m2.sh").write_text("TPB=8\n")
    script = root / "examples" / "a" / "run.sh"
    script.parent.mkdir(parents=True)
    script.write_text(IDIOMS)
    from shardcheck.inputs.bash import read_bash

    reading = read_bash(script)
    got = {
        n: reading.variables[n].as_scalar().text for n in ("SCRIPT_DIR", "D2", "REPO_ROOT", "UP", "TOP", "TPA", "TPB")
    }
    here = str(script.parent.resolve())
    assert got == {
        "SCRIPT_DIR": here,
        "D2": here,
        "REPO_ROOT": str(root.resolve()),
        "UP": str(script.parent.parent.resolve()),
        "TOP": str(root.resolve()),
        "TPA": "4",
        "TPB": "8",
    }
    assert not reading.variables["REL"].as_scalar().known  # relative to a working directory not shown
    assert not reading.diagnostics


def test_source_outside_the_repository_is_still_refused(tmp_path):
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (tmp_path / "creds.sh").write_text("TPA=secret\n")
    script = root / "run.sh"
    script.write_text("source ../creds.sh\n")
    from shardcheck.inputs.bash import read_bash

    reading = read_bash(script)
    assert "TPA" not in reading.variables and "lies outside the script's repository" in str(reading.diagnostics[0].args)


@pytest.mark.skipif(not HAS_BASH, reason="no bash here")
def test_dirname_agrees_with_coreutils():
    from shardcheck.inputs.shell_source import dirname

    for text in ("/a/b/c", "/a/b/", "a", "/", "a/b", "//a", "", "a//b//"):
        out = subprocess.run(["dirname", "--", text], capture_output=True, text=True, check=True).stdout.strip()
        assert dirname(text) == out, text


def test_an_exit_on_missing_arguments_names_the_option_that_gives_them(tmp_path):
    """verl's SFT examples exit with their usage when run with no arguments: the "no launch" line says how to
    give them (`-- ARGS`); with them the launch is judged."""
    path = tmp_path / "run.sh"
    path.write_text(f'if [ "$#" -lt 2 ]; then\n  echo usage; exit 1\nfi\n{LAUNCH}\n')
    said = str(check(path).error)
    assert "`exit` ends the script" in said and "shardcheck check run.sh -- ARGS" in said
    assert check(path, args=("8", "/tmp/ckpt")).job is not None
    path.write_text(f"echo start\nexit 0\n{LAUNCH}\n")  # an exit that does not depend on the arguments
    assert "-- ARGS" not in str(check(path).error)
    path.write_text(f'say() {{ echo "$1"; }}\nsay hi\nexit 0\n{LAUNCH}\n')  # a function's $1 is its own
    assert "-- ARGS" not in str(check(path).error)
