"""Hostile and broken input (issue 17): each class of failure with its minimal input, read in bounded
time and memory, never a traceback, a hang or a guess; past a bound the value is unknown with its reason.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import textwrap
import time

import pytest

from shardcheck.api import check, memory, mesh, resolve_script
from shardcheck.cli import main
from shardcheck.errors import InputError
from shardcheck.frameworks.megatron.direct import job_from_sizes
from shardcheck.guard import run_guarded
from shardcheck.inputs import bounds
from shardcheck.inputs.bash import read_bash_text
from shardcheck.inputs.launch import find_launches
from shardcheck.mesh.grid import build_grid
from shardcheck.mesh.placement import crossings
from shardcheck.problems import Kind
from shardcheck.rules.registry import render

SECONDS = 10.0  # far above any input here; each runs in well under a second alone
LAUNCH = 'python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=8 +x.value="$X"\n'


def bounded(fn):
    """``fn()`` under the per-input guard: fails the test when it takes SECONDS or 1 GiB."""
    start = time.monotonic()
    value, why = run_guarded(fn, seconds=SECONDS, memory=1 << 30)
    assert why is None, why
    assert time.monotonic() - start < SECONDS
    return value


def read(src: str, env=None):
    return bounded(lambda: read_bash_text(textwrap.dedent(src).lstrip("\n").encode("latin-1"), "t.sh", env))


def value_of(src: str, name: str = "X"):
    """(text or None, the unknown's reason) of ``$name`` as the launch's ``+x.value=$name`` receives it."""
    reading = read(src + "\n" + LAUNCH.replace("$X", f"${name}"))
    (launch,) = find_launches(reading.commands)
    field = next(f for f in launch.args if f.render().startswith("+x.value="))
    return field.text.partition("=")[2] if field.known else None, (
        field.unknowns[0].unknown if not field.known else None
    )


def bound_notes(src: str) -> list[str]:
    return [render(d).message for d in read(src).diagnostics if d.kind is Kind.SHELL_BOUND]


# -- arithmetic --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr, reason",
    [
        ("1<<-1", "shift by -1"),
        ("1 << -1", "shift by -1"),
        ("1<<64", "shift by 64"),
        ("1>>99999999999", "shift by 99999999999"),
        ("9**9**9", "64-bit"),
        ("2**63", "64-bit"),
        ("2**62*4", "64-bit"),
        ("9" * 5000, "64-bit"),  # past Python's 4,300-digit str limit
        ("0x" + "f" * 5000, "64-bit"),
        ("(" * 5000 + "1" + ")" * 5000, "nested"),
        ("-" * 5000 + "1", "nested"),
    ],
)
def test_arithmetic_past_its_bounds_is_unknown_with_the_reason(expr, reason):
    text, why = value_of(f"X=$(({expr}))")
    assert text is None and reason in why
    assert any(reason in m for m in bound_notes(f"X=$(({expr}))"))


def test_arithmetic_inside_its_bounds_is_exact():
    assert value_of("X=$((2**62 + (2**62 - 1)))")[0] == str(2**63 - 1)
    assert value_of("X=$((1<<20))")[0] == str(1 << 20)
    assert value_of("X=$((-9223372036854775807 - 1))")[0] == str(-(2**63))
    assert value_of("X=$((0**0 + 1**999 + (-1)**999))")[0] == "1"


def test_arithmetic_through_variables_has_a_work_bound():
    # each variable names the one before it 50 times: 50**5 evaluations if followed naively
    src = "A0=1\n" + "".join(f'A{k}="{"+".join([f"A{k - 1}"] * 50)}"\n' for k in range(1, 6)) + "X=$((A5))"
    text, why = value_of(src)
    assert text is None and "tokens" in why


# -- values, arrays, printf, patterns -----------------------------------------------------------------


def test_printf_width_past_the_bound():
    text, why = value_of("printf -v X '%99999999999s' a")
    assert text is None and "printf field width" in why
    assert value_of("printf -v X '%5s' a")[0] == "    a"


def test_negative_array_index():
    assert value_of("a=(1 2)\na[-1]=3\nX=${a[1]}")[0] == "3"
    assert value_of("a=(1 2)\nX=${a[-1]}")[0] == "2"
    text, why = value_of("a[-1]=3\nX=${a[0]}")
    assert text is None and "bad array subscript" in why
    assert value_of("a=(1 2)\nX=${a[-5]}")[0] is None


@pytest.mark.parametrize("index", ["2**40", "1099511627776", str(bounds.ARRAY_ITEMS), "9" * 5000])
def test_sparse_array_index_is_not_filled(index):
    text, why = value_of(f"a[{index}]=1\nX=${{a[0]}}")
    assert text is None and ("past the" in why or "64-bit" in why)


def test_string_doubling_stops_at_the_value_bound():
    text, why = value_of("X=aaaaaaaaaa\n" + "X=$X$X\n" * 40)
    assert text is None and "characters" in why
    assert value_of("X=ab\nX=$X$X")[0] == "abab"


def test_string_doubling_in_a_loop_body():
    text, why = value_of("X=a\nfor i in 1 2 3; do X=$X$X$X$X$X$X$X$X; X=$X$X$X$X$X$X$X$X; done")
    assert text is None and "loop" in why


def test_array_doubling_stops_at_the_array_bound():
    text, why = value_of("A=(a b)\n" + 'A=("${A[@]}" "${A[@]}")\n' * 40 + "X=${A[0]}")
    assert text is None and "elements" in why


def test_function_fan_out_is_bounded():
    src = "f0() { Y=1; }\n" + "".join(f"f{i}() {{ f{i - 1}; f{i - 1}; f{i - 1}; }}\n" for i in range(1, 30)) + "f29"
    assert any("function calls" in m for m in bound_notes(src))
    assert value_of(src + "\nX=$Y")[0] is None


def test_recursive_function_is_bounded():
    src = "f() { Y=$((Y + 1)); f; }\nY=0\nf"
    assert any("deep" in m for m in bound_notes(src))
    assert value_of(src + "\nX=$Y")[0] is None


def test_functions_inside_the_bound_are_followed():
    assert value_of("f() { echo hi; }\nX=1\nf")[0] == "1"
    reading = read("f() { python3 -m verl.trainer.main_ppo a=1; }\nf")
    assert len(find_launches(reading.commands)) == 1


@pytest.mark.parametrize("op", ["%", "%%", "#", "##"])
def test_quadratic_pattern_strip_is_bounded(op):
    long = "a" * 200_000
    text, why = value_of(f"Y={long}\nX=${{Y{op}*b*}}")
    assert text is None and "pattern matching" in why


def test_pattern_strips_inside_the_bound():
    assert value_of("P=/a/b/c.sh\nX=${P##*/}")[0] == "c.sh"
    assert value_of("P=/a/b/c.sh\nX=${P%/*}")[0] == "/a/b"
    assert value_of("P=" + "x" * 100_000 + ".sh\nX=${P%.sh}")[0] == "x" * 100_000  # literal: no search
    assert value_of("P=abc\nX=${P//}")[0] == "abc"  # empty pattern: unchanged, as in bash


def test_replacement_growth_is_bounded():
    text, why = value_of("Y=" + "a" * 10_000 + "\nZ=" + "b" * 10_000 + "\nX=${Y//a/$Z}")
    assert text is None and "replacement" in why


def test_nested_statements_and_words_are_bounded():
    src = "if true; then\n" * 300 + "X=1\n" + "fi\n" * 300
    assert any("nested" in m for m in bound_notes(src))
    word = "X=" + "${A:-" * 500 + "1" + "}" * 500
    assert any("nested" in m for m in bound_notes(word))


def test_total_text_budget():
    src = "A=" + "a" * 500_000 + "\n" + "".join(f"B{k}=$A$A\n" for k in range(40))
    notes = bound_notes(src)
    assert any("in all" in m for m in notes) and len([m for m in notes if "in all" in m]) == 1


def test_nul_byte_after_4_kib():
    src = ("#" + "x" * 5000 + "\n" + "python3 -m verl.trainer.main_ppo a\0b=1\n").encode()
    with pytest.raises(InputError, match=":2: not a text file"):
        read_bash_text(src, "t.sh")


# -- source and files ---------------------------------------------------------------------------------


def _launch_script(tmp_path, body: str, name: str = "run.sh"):
    p = tmp_path / name
    p.write_text(body + "\n" + LAUNCH)
    return p


def _source_note(tmp_path, target: str) -> str:
    p = _launch_script(tmp_path, f"source {target}")
    result = bounded(lambda: check(p))
    assert result.job is not None
    notes = [render(n).message for n in result.job.notes if n.kind is Kind.SHELL_SOURCE]
    assert len(notes) == 1
    return notes[0]


def test_source_of_a_name_too_long_for_the_file_system(tmp_path):
    assert "too long" in _source_note(tmp_path, "a" * 5000)


def test_source_of_special_files(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    assert "FIFO" in _source_note(tmp_path, str(tmp_path / "fifo"))
    assert "character device" in _source_note(tmp_path, "/dev/zero")


def test_source_cycles_and_fan_out(tmp_path):
    (tmp_path / "a.sh").write_text("source ./a.sh\nsource ./b.sh\n")
    (tmp_path / "b.sh").write_text("source ./b.sh\n" + "source ./c.sh\n" * 40)
    (tmp_path / "c.sh").write_text("Y=1\n")
    p = _launch_script(tmp_path, "source ./a.sh")
    result = bounded(lambda: check(p))
    messages = [render(n).message for n in result.job.notes if n.kind is Kind.SHELL_SOURCE]
    assert any("already being read" in m for m in messages)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "dir", "huge"])
def test_script_that_is_not_a_regular_small_file(tmp_path, special):
    if special == "fifo":
        path = tmp_path / "fifo.sh"
        os.mkfifo(path)
    elif special == "dir":
        path = tmp_path
    elif special == "huge":  # 1.2 GB, sparse: no disk and no memory spent
        path = tmp_path / "huge.sh"
        with open(path, "wb") as fh:
            fh.truncate(1_200_000_000)
    else:
        path = special
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = bounded(lambda: check(path))
    assert result.status == "failed" and result.error and "\n" not in result.error
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: nothing read whole


@pytest.mark.parametrize(
    "content, expected",
    [
        ("fifo", "FIFO"),
        ("/dev/zero", "character device"),
        (b"\xff\xfe{}", "not UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"num_attention_heads": ' + "9" * 5000 + "}", "too long"),
    ],
)
def test_model_config_that_cannot_be_read(tmp_path, content, expected):
    if content == "fifo":
        path = tmp_path / "config.json"
        os.mkfifo(path)
    elif content.startswith("/dev/") if isinstance(content, str) else False:
        path = content
    else:
        path = tmp_path / "config.json"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    script = _launch_script(tmp_path, "X=1")
    result = bounded(lambda: check(script, model_config=str(path)))
    assert result.error and expected in result.error and "\n" not in result.error


@pytest.mark.parametrize(
    "config, expected",
    [
        (
            {"num_attention_heads": [1, 2], "num_hidden_layers": 2},
            '"num_attention_heads": [1, 2] is not a whole number',
        ),
        ({"num_attention_heads": 32, "num_hidden_layers": "x"}, '"num_hidden_layers": "x" is not a whole number'),
        ({"num_attention_heads": 32, "num_hidden_layers": 1.5}, "1.5 is not a whole number"),
        ({"num_attention_heads": True, "num_hidden_layers": 2}, "true is not a whole number"),
        ({"num_attention_heads": 32, "num_hidden_layers": 2, "vocab_size": -5}, "-5 is negative (a whole number ≥ 1)"),
        ({"num_attention_heads": 32, "num_hidden_layers": 2, "intermediate_size": 1e300}, "is too large (> 2^53"),
        ({"num_attention_heads": 32, "num_hidden_layers": 2, "layer_types": 5}, "is not a JSON list"),
        ({"text_config": [1], "num_attention_heads": 3}, "not an HF model config"),
    ],
)
def test_model_config_fields_of_the_wrong_type(tmp_path, config, expected):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config, indent=1))
    script = _launch_script(tmp_path, "X=1")
    for run in (check, memory):
        result = bounded(functools.partial(run, script, model_config=str(path)))
        assert result.error and expected in result.error and "\n" not in result.error


# -- huge numbers in the frameworks' values -----------------------------------------------------------


def test_hydra_override_past_the_int_digit_limit(tmp_path):
    p = tmp_path / "run.sh"
    p.write_text(f"python3 -m verl.trainer.main_ppo trainer.nnodes=1 +x.value={'9' * 5000}\n")
    result = bounded(lambda: check(p))
    assert any(f.rule == "HYDRA-OVERRIDE" and "4300" in f.message for f in result.findings)


def test_megatron_lm_flag_past_the_int_digit_limit(tmp_path):
    p = tmp_path / "run.sh"
    p.write_text(
        "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 64 "
        f"--num-attention-heads 4 --micro-batch-size 1 --global-batch-size {'9' * 5000} "
        f"--tensor-model-parallel-size {'9' * 5000} --seq-length 128 --max-position-embeddings 128\n"
    )
    result = bounded(lambda: check(p))
    assert result.job is not None
    bounded(lambda: memory(p))


# -- worlds: formulas, never enumeration --------------------------------------------------------------


def test_mesh_of_a_world_of_a_hundred_million(capsys):
    code = bounded(lambda: main(["mesh", "--world", "100000000", "--format", "json"]))
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["groups"] is None and doc["nodes"] is None
    assert doc["group_sizes"]["dp"] == {"groups": 1, "size": 100_000_000}
    assert (
        bounded(
            lambda: main(["mesh", "--world", "100000000", "--tp", "8", "--devices-per-node", "8", "--rank", "99999999"])
        )
        == 0
    )
    assert "99999992" in capsys.readouterr().out


def test_crossings_from_the_strides_agree_with_listing():
    grid = build_grid(world=4096, tp=8, pp=4, cp=2, ep=8, etp=2)
    listed = crossings(grid, 12)
    gen, token = grid._generator("tp")
    assert listed and all(
        c.groups_crossing == sum(1 for g in grid.groups(c.name) if g[0] // 12 != g[-1] // 12) for c in listed
    )
    assert gen.crossing_count(token, 12) == next(c.groups_crossing for c in listed if c.name == "tp")


def test_huge_worlds_in_check_memory_and_mesh(tmp_path):
    megatron = tmp_path / "megatron.sh"
    megatron.write_text(
        "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer trainer.nnodes=100000000 "
        "trainer.n_gpus_per_node=8 actor_rollout_ref.model.path=Qwen/Qwen3-8B "
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 "
        "actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=4\n"
    )
    fsdp = tmp_path / "fsdp.sh"
    fsdp.write_text(
        "python3 -m verl.trainer.main_ppo trainer.nnodes=100000000 trainer.n_gpus_per_node=8 "
        "actor_rollout_ref.model.path=Qwen/Qwen3-8B actor_rollout_ref.rollout.name=vllm "
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2\n"
    )
    mlm = tmp_path / "mlm.sh"
    mlm.write_text(
        "torchrun --nnodes 10000000 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 64 "
        "--num-attention-heads 4 --micro-batch-size 1 --global-batch-size 80000000 "
        "--tensor-model-parallel-size 2 --seq-length 128 --max-position-embeddings 128\n"
    )
    for p in (megatron, fsdp, mlm):
        result = bounded(functools.partial(check, p))
        assert result.job is not None and result.job.cluster.world.value >= 80_000_000
        bounded(functools.partial(memory, p))
        bounded(functools.partial(lambda q: mesh(resolve_script(q)), p))


def test_deep_script_in_mesh(tmp_path, capsys):
    p = tmp_path / "deep.sh"
    p.write_text(
        "f() { X=1; }\n"
        + 'if [ -n "$A" ]; then\n' * 400
        + "f\n"
        + "fi\n" * 400
        + "torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 2\n"
    )
    assert bounded(lambda: main(["mesh", str(p)])) in (0, 1)
    assert "Traceback" not in capsys.readouterr().out


def test_mesh_of_sizes_past_the_list_limit_by_rank():
    job = job_from_sizes(
        world=1 << 20, devices_per_node=8, tp=4, pp=2, cp=1, ep=1, etp=None, vpp=None, order="tp-cp-ep-dp-pp"
    )
    result = bounded(lambda: mesh(job))
    assert result.grid is not None and not result.grid.listable
    assert result.grid.group_of("tp", 5) == [4, 5, 6, 7]


# -- the per-input limits -----------------------------------------------------------------------------


def test_time_limit_per_input_in_a_batch(tmp_path, monkeypatch, capsys):
    from shardcheck import api

    good = _launch_script(tmp_path, "X=1", "good.sh")
    slow = _launch_script(tmp_path, "X=1", "slow.sh")
    after = _launch_script(tmp_path, "X=1", "after.sh")
    real = api.check

    def check_or_hang(path, *args, **kwargs):
        if str(path).endswith("slow.sh"):
            while True:
                time.sleep(0.01)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(api, "check", check_or_hang)
    start = time.monotonic()
    code = main(["check", str(good), str(slow), str(after), "--time-limit", "2", "--format", "json"])
    assert time.monotonic() - start < SECONDS
    doc = json.loads(capsys.readouterr().out)
    by_path = {r["path"]: r for r in doc["results"]}
    assert code == 1
    slow_result = by_path[str(slow)]
    assert (
        slow_result["findings"][0]["rule"] == "INPUT-UNUSABLE" and "time limit" in slow_result["findings"][0]["message"]
    )
    for other in (good, after):  # judged before and after the input that ran out of time
        assert all(f["rule"] != "INPUT-UNUSABLE" for f in by_path[str(other)]["findings"])


def test_memory_guard_per_input(tmp_path, monkeypatch, capsys):
    from shardcheck import api

    good = _launch_script(tmp_path, "X=1", "good.sh")
    greedy = _launch_script(tmp_path, "X=1", "greedy.sh")
    real = api.check

    def check_or_grab(path, *args, **kwargs):
        if str(path).endswith("greedy.sh"):
            hoard = [bytearray(64 << 20) for _ in range(64)]  # 4 GiB
            return hoard
        return real(path, *args, **kwargs)

    monkeypatch.setattr(api, "check", check_or_grab)
    code = main(["check", str(greedy), str(good), "--memory-limit", "512MiB"])
    out = capsys.readouterr().out
    assert code == 1 and "memory" in out and "greedy.sh" in out
    assert "good.sh" in out


# -- failures the fuzzer found (bench/fuzz.py), as minimal inputs ---------------------------------------


def test_fix_texts_never_loop_to_a_huge_size(tmp_path):
    # n_gpus_per_node=99999999999: the fix text listed the divisors of the world by trying every number
    p = tmp_path / "run.sh"
    p.write_text(
        "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer trainer.nnodes=2 "
        "trainer.n_gpus_per_node=99999999999 actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B "
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 "
        "actor_rollout_ref.actor.megatron.expert_model_parallel_size=8\n"
    )
    result = bounded(functools.partial(check, p))
    assert result.job is not None
    # --num-layers 99999999999: the first/last-stage options were tried for every layer count; it is past
    # the 100,000 layers a value check allows now, so it is out of range before any rule sizes by it
    q = tmp_path / "mlm.sh"
    q.write_text(
        "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 99999999999 --hidden-size 1024 "
        "--num-attention-heads 16 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
        "--global-batch-size 64 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4\n"
    )
    result = bounded(functools.partial(check, q))
    assert any(f.rule == "VALUE-BAD-RANGE" and "--num-layers" in f.message for f in result.findings)


def test_divisors_from_prime_factors():
    from shardcheck.rules.divisors import divisors

    assert divisors(12) == [1, 2, 3, 4, 6, 12] and divisors(1) == [1] and divisors(0) == []
    assert divisors(99999999999) == [
        1,
        3,
        9,
        21649,
        64947,
        194841,
        513239,
        1539717,
        4619151,
        11111111111,
        33333333333,
        99999999999,
    ]
    assert len(bounded(functools.partial(divisors, (2**31 - 1) * (2**31 - 19)))) == 4


def test_memory_of_a_split_the_layout_rules_reject(tmp_path):
    # first-stage layers with PP 1 (a fuzzed line deletion): the estimate raised ValueError
    p = tmp_path / "run.sh"
    p.write_text(
        "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer trainer.nnodes=1 "
        "trainer.n_gpus_per_node=8 actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B "
        "+actor_rollout_ref.actor.megatron.override_transformer_config.num_layers_in_first_pipeline_stage=5 "
        "+actor_rollout_ref.actor.megatron.override_transformer_config.num_layers_in_last_pipeline_stage=5\n"
    )
    result = bounded(functools.partial(memory, p))
    assert result.error is None


def test_function_fan_out_of_two_is_fast():
    start = time.monotonic()
    notes = bound_notes("f() { f; f; }; f")
    assert 1 <= len(notes) <= 2 and time.monotonic() - start < 5  # once per reason, not per call


def test_fuzz_finds_of_the_100k_run(tmp_path):
    """bench/fuzz.py --inputs 100000 --seed 23 found these (inputs 15153, 24590, 36108, 40570): SGLang DP
    attention with a tp_size below dp_size (attention TP 0: ZeroDivisionError), and a torchrun --nnodes of 5,000
    digits (int() past its 4,300-digit limit). Each is judged now, without an exception."""
    slime = tmp_path / "slime.sh"
    slime.write_text(
        "ray job submit --address=http://127.0.0.1:8265 -- python3 train.py --actor-num-nodes 1 "
        "--actor-num-gpus-per-node 8 --rollout-num-gpus 8 --rollout-num-gpus-per-engine 1 "
        "--sglang-enable-dp-attention --sglang-dp-size 2 --hf-checkpoint Qwen3-30B-A3B "
        "--rollout-batch-size 32 --n-samples-per-prompt 8 --global-batch-size 256\n"
    )
    for run in (functools.partial(check, slime), functools.partial(memory, slime)):
        assert bounded(run) is not None
    assert mesh(resolve_script(slime), str(slime)) is not None
    mlm = tmp_path / "mlm.sh"
    mlm.write_text(
        f"torchrun --nnodes {'9' * 5000} --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 512 "
        "--num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 "
        "--global-batch-size 8\n"
    )
    result = bounded(functools.partial(memory, mlm))
    assert result is not None


def _in_flight_by_listing(stage, pp, chunks, micro_batches, group, cost):
    """The interleaved schedule's peak by listing every micro batch (the estimate's way before its bound)."""
    group = group or pp
    order = [
        c
        for lo in range(0, micro_batches, group)
        for c in range(chunks)
        for _ in range(lo, min(lo + group, micro_batches))
    ]
    backward = [chunks - 1 - c for c in order]
    total = len(order)
    warmup = min((pp - stage - 1) * 2 + (chunks - 1) * group, total)
    counts = [0] * chunks
    for c in order[:warmup]:
        counts[c] += 1
    best, best_counts = -1.0, list(counts)
    for j in range(total - warmup + 1):
        if warmup + j < total or j == 0:
            if warmup + j < total:
                counts[order[warmup + j]] += 1
            value = sum(n * b for n, b in zip(counts, cost))
            if value > best:
                best, best_counts = value, list(counts)
        if j < total:
            counts[backward[j]] -= 1
    return best_counts, sum(best_counts)


def test_in_flight_peak_of_a_long_run_without_listing_it():
    """fuzz input 18279 (--global-batch-size 99999999999 with interleaving) listed every micro batch; the peak of a
    long run is now taken from a bounded one: equal to listing them all on 2,000 random schedules."""
    import random

    from shardcheck.memory.estimate import _in_flight

    rng = random.Random(18279)
    for _ in range(2000):
        pp, chunks = rng.choice([2, 3, 4, 8]), rng.choice([2, 3, 4])
        group = rng.choice([None, 2, 3, pp])
        size = (group or pp) * (2 * pp + 2 * chunks + 4)
        micro = rng.randint(1, 3 * size)
        cost = [rng.random() for _ in range(chunks)]
        stage = rng.randrange(pp)
        assert _in_flight(stage, pp, chunks, micro, group, cost) == _in_flight_by_listing(
            stage, pp, chunks, micro, group, cost
        )
    assert bounded(functools.partial(_in_flight, 0, 16, 4, 10**11, None, [1.0, 1.0, 1.0, 1.0]))


@pytest.mark.parametrize(
    "text",
    [
        'echo "${\xb9:-x}"\n',  # byte 0xb9 reads as '¹': its isdigit() is True, int('¹') raises (input 47779)
        "torchrun --nnodes ¹ --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 512 "
        "--num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 "
        "--global-batch-size 8\n",  # input 49396
        "torchrun --nnodes 0 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 512 "
        "--num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 "
        "--global-batch-size 8\n",  # world 0: DP 0 divided by (inputs 66596, 97279)
    ],
)
def test_more_fuzz_finds_of_the_100k_run(tmp_path, text):
    path = tmp_path / "run.sh"
    path.write_bytes(text.encode("latin-1"))
    read_bash_text(text.encode("latin-1"), str(path))
    assert bounded(functools.partial(check, path)) is not None


def test_fuzz_finds_of_the_second_campaign(tmp_path, capsys):
    """The classes bench/fuzz_cli.py found (issue 27's run): each an internal error before its fix."""
    from shardcheck.memory.devices import MEMORY_CHOICE
    from shardcheck.plan import PlanError, plan_script

    # a --device-memory card in the planner: no speeds to time it by (was KeyError '96 GiB device'): one line
    example = os.path.join(os.path.dirname(__file__), "..", "src", "shardcheck", "examples", "qwen3_235b_256k.sh")
    with pytest.raises(PlanError, match="the step-time model has no speeds for it"):
        bounded(lambda: plan_script(example, device=f"{MEMORY_CHOICE}{96 << 30}", top=2))
    # first- and last-stage layers with PP 1: Megatron builds `last` layers only; the step time is unknown
    # (was ValueError "layer split (11,) does not cover 94 layers" out of step_time)
    case = os.path.join(os.path.dirname(__file__), "data", "cases", "qwen3_235b_256k_before.sh")
    with open(case) as fh:
        lines = [line for line in fh if "actor.megatron.pipeline_model_parallel_size" not in line]
    script = tmp_path / "run.sh"
    script.write_text("".join(lines))
    assert main(["plan", str(script), "--top", "1"]) in (0, 1)
    assert "internal error" not in capsys.readouterr().err
    # --device-memory 0 and --host-memory 0: a usage error, not a device of no memory
    for option in ("--device-memory", "--host-memory"):
        assert main(["check", str(script), option, "0"]) == 2
        assert "a memory of 0 bytes" in capsys.readouterr().err
    # a Hydra config whose defaults is not a list: Hydra's own error, the config unread (was TypeError)
    (tmp_path / "fz.yaml").write_text("defaults: 3\n")
    script.write_text("python3 -m verl.trainer.main_ppo --config-path=. --config-name=fz trainer.nnodes=1\n")
    assert main(["check", str(script), "--no-fix-proof", "-q"]) in (0, 1)
    assert "defaults must be a list (got int)" in capsys.readouterr().out


def test_report_of_a_huge_world_is_drawn_in_bounded_time(tmp_path):
    """The HTML rank map listed every group of the world outside the per-input guard (fuzz_cli: a report of a
    mutated NNODES ran for minutes at 5 GiB); past LIST_LIMIT ranks it says so instead."""
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer trainer.nnodes=1099511627776 "
        "trainer.n_gpus_per_node=8 actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B "
        "actor_rollout_ref.rollout.name=vllm\n"
    )
    start = time.monotonic()
    assert main(["report", str(script), "-o", str(tmp_path / "r.html")]) in (0, 1)
    assert time.monotonic() - start < SECONDS
    assert "too many to draw" in (tmp_path / "r.html").read_text()
    script.write_text(script.read_text().replace("1099511627776", "2"))
    assert main(["report", str(script), "-o", str(tmp_path / "r.html")]) in (0, 1)
    assert 'class="ranks"' in (tmp_path / "r.html").read_text()  # a world that fits is still drawn
