"""The static bash reader: each construct, with the line every value came from."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardcheck.errors import InputError
from shardcheck.inputs.bash import read_bash, read_bash_text
from shardcheck.inputs.launch import find_launches
from shardcheck.rules.registry import rule_id


def read(src: str, env=None):
    return read_bash_text(textwrap.dedent(src).lstrip("\n").encode(), "t.sh", env)


def args_of(src: str, env=None) -> dict[str, tuple]:
    """key → (value text or None, origin line, origin text) of the launch's key=value words."""
    reading = read(src, env)
    (launch,) = find_launches(reading.commands)
    out = {}
    for f in launch.args:
        shown = f.render("?")
        if "=" in shown:
            key, _, value = shown.partition("=")
            origin = f.value_origin(len(key) + 1)
            where = origin.first_script_line()
            out[key] = (f.text.partition("=")[2] if f.known else None, where.line if where else None, origin.kind)
    return out


def test_assignment_and_export_with_lines():
    a = args_of("""
        TP=4
        export PP=2 CP="8"
        python3 -m verl.trainer.main_ppo tp=$TP pp=${PP} cp="$CP"
    """)
    assert a["tp"] == ("4", 1, "script")
    assert a["pp"] == ("2", 2, "script")
    assert a["cp"] == ("8", 2, "script")


def test_default_forms_and_environment():
    src = """
        N=${NNODES:-16}
        M=${MISSING-7}
        E=""
        X=${E:-fallback}
        Y=${E-kept}
        : ${Z:=3}
        python3 -m verl.trainer.main_ppo n=$N m=$M x=$X y=$Y z=$Z
    """
    a = args_of(src)
    assert a["n"][:2] == ("16", 1)
    assert a["m"][:2] == ("7", 2)
    assert a["x"][:2] == ("fallback", 4)
    assert a["y"][0] == ""
    assert a["z"][0] == "3"
    env = args_of(src, {"NNODES": "32"})
    assert (env["n"][0], env["n"][2]) == ("32", "env")


def test_arithmetic_nested_variables():
    a = args_of("""
        p=1024
        r=$((1024 * 255))
        budget=$((p + r))
        half=$(( budget / 2 ))
        nested=${UNSET:-$((p * 2))}
        python3 -m verl.trainer.main_ppo b=${budget} h=$half q=$((budget % 7)) n=$nested
    """)
    assert a["b"][:2] == ("262144", 3)
    assert a["h"][0] == str(262144 // 2)
    assert a["q"][0] == str(262144 % 7)
    assert a["n"][0] == "2048"


def test_arithmetic_truncates_like_bash():
    a = args_of("""
        python3 -m verl.trainer.main_ppo a=$(( -7 / 2 )) b=$(( -7 % 2 )) c=$(( 2 ** 10 )) d=$(( 3 > 2 ? 5 : 6 ))
    """)
    assert (a["a"][0], a["b"][0], a["c"][0], a["d"][0]) == ("-3", "-1", "1024", "5")


def test_arrays_append_and_expansion_keep_element_lines():
    a = args_of("""
        tp=8
        ARGS=(
            k1=1
            "k2=${tp}"
        )
        ARGS+=(k3=three)
        python3 -m verl.trainer.main_ppo "${ARGS[@]}" last=1
    """)
    assert a["k1"][:2] == ("1", 3)
    assert a["k2"][:2] == ("8", 1)
    assert a["k3"][:2] == ("three", 6)
    assert a["last"][:2] == ("1", 7)


def test_quoting_and_line_continuations():
    a = args_of("""
        V='single $quoted'
        python3 -m verl.trainer.main_ppo \\
            a="$V" \\
            'b=lit $x' \\
            c=x\\ y \\
            d="x"'y'z
    """)
    assert a["a"][0] == "single $quoted"
    assert a["b"][0] == "lit $x"
    assert a["c"][0] == "x y"
    assert a["d"][0] == "xyz"


def test_unquoted_expansion_splits_into_fields():
    reading = read("""
        OPTS="a=1 b=2"
        python3 -m verl.trainer.main_ppo $OPTS "$OPTS"
    """)
    (launch,) = find_launches(reading.commands)
    assert [f.text for f in launch.args] == ["a=1", "b=2", "a=1 b=2"]


def test_joined_variables_are_one_word():
    """tree-sitter-bash #315: $A/$B is split into two words; the reader keeps it one."""
    a = args_of("""
        A=/data B=qwen C=8b
        M=$A/$B-$C
        python3 -m verl.trainer.main_ppo path=$A/$B/$C m=$M
    """)
    assert a["path"][0] == "/data/qwen/8b"
    assert a["m"][0] == "/data/qwen-8b"


def test_tree_sitter_quirks_inside_defaults():
    """parsers.md quirks 4–7: arithmetic, lists and floats inside ${X:-...}."""
    a = args_of("""
        p=2 r=3
        python3 -m verl.trainer.main_ppo a=${A:-$((p + r))} b=${B:-$(((p + r) * 2))} c=${C:-['npu','cpu']} d=${D:-1e-6}
    """)
    assert a["a"][0] == "5"
    assert a["b"][0] == "10"
    assert a["c"][0] == "[npu,cpu]"  # bash removes the quotes inside ${C:-...}
    assert a["d"][0] == "1e-6"


def test_script_arguments_and_set():
    reading = read("""
        set -euo pipefail
        python3 -m verl.trainer.main_ppo a=1 "$@"
    """)
    (launch,) = find_launches(reading.commands)
    assert [f.text for f in launch.args] == ["a=1"]


def test_comments_are_ignored():
    a = args_of("""
        # TP=99
        TP=2  # the real one
        ARGS=(
            # x=commented
            tp=$TP
        )
        python3 -m verl.trainer.main_ppo "${ARGS[@]}"
    """)
    assert a == {"tp": ("2", 2, "script")}


@pytest.mark.parametrize(
    "construct",
    [
        "V=$(nproc)",
        "V=`hostname`",
        "for i in 1 2; do V=$i; done",
        "f() { V=1; }; f",
        "read V",
        'eval "$(cat v.sh)"',  # an eval of a known string is read (test_reader_real_world)
        "source ./settings.sh",
    ],
)
def test_code_is_never_run_and_yields_unknown(construct):
    a = args_of(f"""
        {construct}
        python3 -m verl.trainer.main_ppo v=$V
    """)
    assert a["v"][0] is None


def test_known_condition_picks_its_branch_unknown_condition_merges():
    a = args_of("""
        ENGINE=vllm
        if [ "$ENGINE" == "vllm" ]; then TP=4; else TP=8; fi
        if [ -f /etc/x ]; then PP=2; else PP=2; fi
        if [ -d /data ]; then CP=2; fi
        python3 -m verl.trainer.main_ppo tp=$TP pp=$PP cp=$CP
    """)
    assert a["tp"][0] == "4"
    assert a["pp"][0] == "2"
    assert a["cp"][0] is None


@pytest.mark.parametrize(
    "line, module, launcher",
    [
        ("python3 -m verl.trainer.main_ppo a=1", "verl.trainer.main_ppo", ()),
        ("python -u -m verl.trainer.main_ppo a=1", "verl.trainer.main_ppo", ()),
        ("torchrun --nnodes 2 --nproc_per_node=8 -m verl.trainer.main_ppo a=1", "verl.trainer.main_ppo", ("torchrun",)),
        (
            "ray job submit --address=x --runtime-env=r.yaml -- python3 -m verl.trainer.main_ppo a=1",
            "verl.trainer.main_ppo",
            ("ray job submit",),
        ),
        ("nohup env X=1 python3 -m verl.trainer.main_ppo a=1 > log 2>&1 &", "verl.trainer.main_ppo", ("env",)),
        ("uv run --with x python3 -m verl.trainer.main_ppo a=1", "verl.trainer.main_ppo", ("uv",)),
    ],
)
def test_launch_commands(line, module, launcher):
    (launch,) = find_launches(read(line + "\n").commands)
    assert launch.module == module
    assert launch.launcher == launcher
    assert [f.text for f in launch.args] == ["a=1"]


def test_launch_through_an_array_launcher_and_pipe():
    reading = read("""
        LAUNCH=(python3)
        cd /x && "${LAUNCH[@]}" -m verl.trainer.main_ppo a=1 2>&1 | tee log.txt
    """)
    (launch,) = find_launches(reading.commands)
    assert launch.module == "verl.trainer.main_ppo"
    assert launch.origin.line == 2


def test_assignment_then_command_on_next_line():
    """tree-sitter joins `A=1\\nsource x` into one command; the reader splits it at the newline."""
    a = args_of("""
        TP=2
        echo start
        python3 -m verl.trainer.main_ppo tp=$TP
    """)
    assert a["tp"][:2] == ("2", 1)


def test_unparsable_line_is_reported_rest_still_read():
    reading = read("""
        TP=2
        X=$(( 1 +
        python3 -m verl.trainer.main_ppo tp=$TP
    """)
    codes = {rule_id(d.kind) for d in reading.diagnostics}
    assert codes & {"SHELL-PARSE", "SHELL-SYNTAX"}


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_bash(tmp_path / "nope.sh")


def test_binary_file_is_an_input_error(tmp_path):
    p = tmp_path / "bin.sh"
    p.write_bytes(b"\x00\x01\x02")
    with pytest.raises(InputError, match=":1: not a text file"):
        read_bash(p)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab=$(){}[]\"'`\\ \n;|&<>#*?~:-+0123456789.")), max_size=80))
def test_reader_never_crashes(text):
    """Any input: a reading or an InputError, never another exception (and nothing is run)."""
    try:
        read_bash_text(text.encode(), "fuzz.sh")
    except InputError:
        pass


def test_quoted_array_in_a_scalar_assignment_joins_with_spaces():
    a = args_of("""
        A=(a b)
        B="${A[@]}"
        python3 -m verl.trainer.main_ppo b="$B"
    """)
    assert a["b"][0] == "a b"


def test_unknown_condition_keeps_unchanged_arrays_with_unknown_parts():
    """Regression: an `if` that changes nothing must not collapse an array holding an unknown piece."""
    reading = read("""
        A=(actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3 data.train_files=$HOME/x)
        if [ -f /x ]; then :; fi
        python3 -m verl.trainer.main_ppo "${A[@]}"
    """)
    (launch,) = find_launches(reading.commands)
    assert launch.args[0].text == "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3"
    assert launch.args[1].render("?") == "data.train_files=?/x"


def test_launcher_array_set_in_branches_still_finds_the_module():
    reading = read("""
        LAUNCH=(python3)
        if [ -n "$X" ]; then LAUNCH=(uv run python3); fi
        "${LAUNCH[@]}" -m verl.trainer.main_ppo trainer.n_gpus_per_node=8
    """)
    (launch,) = find_launches(reading.commands)
    assert launch.module == "verl.trainer.main_ppo"
    assert [f.text for f in launch.args] == ["trainer.n_gpus_per_node=8"]


def test_torchrun_option_with_unknown_value():
    reading = read("torchrun --nproc_per_node=$(nproc) -m verl.trainer.main_ppo a=1\n")
    (launch,) = find_launches(reading.commands)
    assert launch.module == "verl.trainer.main_ppo" and launch.launcher_args["--nproc-per-node"].text is None


def test_tilde_in_defaults_and_assignments_is_home():
    a = args_of(
        """
        D=${D:-~/data}
        E=~/ckpt
        python3 -m verl.trainer.main_ppo d=$D e=$E f=~/literal
    """,
        {"HOME": "/home/u"},
    )
    assert a["d"][0] == "/home/u/data" and a["e"][0] == "/home/u/ckpt"
    assert a["f"][0] == "~/literal"  # not an assignment word: bash leaves the tilde


def test_condition_lists_are_evaluated():
    a = args_of("""
        A=1 B=x
        if [ -n "$A" ] && [ "$B" = x ]; then TP=4; else TP=8; fi
        if [ -z "$A" ] || [ "$B" != x ]; then PP=2; else PP=1; fi
        python3 -m verl.trainer.main_ppo tp=$TP pp=$PP
    """)
    assert a["tp"][0] == "4" and a["pp"][0] == "1"
