"""Script arguments and the loops that parse them (issue 28, item 3; inputs/shell_args.py)."""

from __future__ import annotations

import textwrap

import pytest

from shardcheck.cli import main
from shardcheck.inputs.bash import read_bash_text
from shardcheck.rules.examples import verl_launch

PARSER = """
    NNODES=1
    MODEL=/models/Qwen3-8B
    while [[ $# -gt 0 ]]; do
      case $1 in
        --nnodes) NNODES=$2; shift 2 ;;
        --model=*) MODEL="${1#*=}"; shift ;;
        --) shift; break ;;
        *) shift ;;
      esac
    done
    REST="$*"
"""


def values(src: str, args=(), names=()):
    reading = read_bash_text(textwrap.dedent(src).lstrip("\n").encode(), "t.sh", args=tuple(args))
    out = {}
    for n in names:
        var = reading.variables.get(n)
        field = var.as_scalar() if var else None
        out[n] = None if field is None else (field.text if field.known else "?")
    return out


def test_the_while_case_shift_loop_takes_the_arguments():
    got = values(PARSER, ["--nnodes", "4", "--model=/m/X", "--", "a", "b"], ["NNODES", "MODEL", "REST"])
    assert got == {"NNODES": "4", "MODEL": "/m/X", "REST": "a b"}


def test_without_arguments_the_loop_runs_zero_times_and_defaults_stay():
    assert values(PARSER, [], ["NNODES", "MODEL", "REST"]) == {"NNODES": "1", "MODEL": "/models/Qwen3-8B", "REST": ""}


def test_the_value_of_an_argument_is_traced_to_the_command_line():
    reading = read_bash_text(textwrap.dedent(PARSER).lstrip("\n").encode(), "t.sh", args=("--nnodes", "4"))
    assert reading.variables["NNODES"].as_scalar().segs[0].origin.kind == "cli"


@pytest.mark.parametrize(
    "loop",
    [
        'for arg in "$@"; do case $arg in tp=*) TP="${arg#tp=}" ;; esac; done',
        "while [ $# -gt 0 ]; do case $1 in tp=*) TP=${1#tp=} ;; esac; shift; done",
        'while (( $# )); do case "$1" in tp=*) TP=${1#tp=} ;; esac; shift; done',
        'while [[ -n "$1" ]]; do case "$1" in tp=*) TP=${1#tp=} ;; esac; shift; done',
        'until [[ $# -eq 0 ]]; do case "$1" in tp=*) TP=${1#tp=} ;; esac; shift; done',
        "for arg; do case $arg in tp=*) TP=${arg#tp=} ;; esac; done",
    ],
)
def test_loop_forms(loop):
    src = f"TP=2\n{loop}\n"
    assert values(src, ["x", "tp=8"], ["TP"]) == {"TP": "8"}
    assert values(src, [], ["TP"]) == {"TP": "2"}


GETOPTS = """
    PP=1
    while getopts ":p:vt:" opt; do
      case $opt in
        p) PP=$OPTARG ;;
        t) T=$OPTARG ;;
        v) VERBOSE=1 ;;
      esac
    done
    shift $((OPTIND-1))
    REST=$1
"""


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ([], {"PP": "1", "T": None, "VERBOSE": None}),
        (["-p", "4", "-vt3", "x"], {"PP": "4", "T": "3", "VERBOSE": "1", "REST": "x"}),
        (["-vp2", "--", "y"], {"PP": "2", "T": None, "VERBOSE": "1", "REST": "y"}),
    ],
)
def test_getopts(args, want):
    got = values(GETOPTS, args, ["PP", "T", "VERBOSE", "REST"])
    assert {k: got[k] for k in want} == want


def test_break_under_an_undecided_branch_leaves_the_loop_unfollowed():
    src = 'TP=2\nfor a in "$@"; do if [ "$X" = 1 ]; then break; fi; TP=$a; done\n'
    assert values(src, ["8"], ["TP"]) == {"TP": "?"}


def test_exit_in_the_loop_leaves_it_unfollowed():
    src = "TP=2\nwhile [[ $# -gt 0 ]]; do case $1 in -h) exit 0 ;; *) TP=$1; shift ;; esac; done\n"
    assert values(src, ["8", "-h"], ["TP"]) == {"TP": "?"}  # bash stops at -h: read as any loop
    assert values(src, ["8"], ["TP"]) == {"TP": "8"}


def test_continue_and_break_of_more_than_one_loop():
    src = 'TP=2\nfor a in "$@"; do case $a in skip) continue ;; tp=*) TP=${a#tp=} ;; esac; done\n'
    assert values(src, ["skip", "tp=4"], ["TP"]) == {"TP": "4"}
    src = 'TP=2\nfor a in "$@"; do TP=$a; break 2; done\n'
    assert values(src, ["8"], ["TP"]) == {"TP": "?"}


def test_a_loop_that_never_ends_is_not_followed():
    src = "TP=2\nwhile [[ $# -gt 0 ]]; do TP=$1; done\n"  # no shift: bash would loop forever
    assert values(src, ["8"], ["TP"]) == {"TP": "?"}


def test_shift_by_an_unknown_count_makes_the_arguments_unknown():
    assert values('shift "$N"\nA=$1\nB=$#\n', ["x", "y"], ["A", "B"]) == {"A": "?", "B": "?"}


def test_other_loops_are_still_not_run():
    assert values("TP=2\nfor a in 1 2 3; do TP=$a; done\n", [], ["TP"]) == {"TP": "?"}


def test_check_with_arguments_after_the_double_dash(tmp_path, capsys):
    script = tmp_path / "run.sh"
    body = "GPUS=0\nwhile [[ $# -gt 0 ]]; do case $1 in --gpus) GPUS=$2; shift 2 ;; *) shift ;; esac; done\n"
    script.write_text(body + verl_launch(model="Qwen3-8B", gpus="$GPUS"))
    assert main(["check", str(script), "--format", "json", "--exit-zero", "--", "--gpus", "8"]) == 0
    out = capsys.readouterr().out
    assert '"devices_per_node": 8' in out


def test_past_the_last_argument_a_quoted_parameter_is_one_empty_word():
    src = 'N=0\nwhile [ -n "$1" ]; do N=$((N+1)); X="$2"; shift; done\n'
    assert values(src, ["a", "b"], ["N", "X"]) == {"N": "2", "X": ""}
