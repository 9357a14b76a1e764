"""Property-based fuzzing (hypothesis): mutated seed scripts through every command, in-process, each input under
a time and memory budget. Never a traceback, a hang or a blow-up: a verdict, or a one-line input error.

The mutators and drivers are tests/fuzzing.py, shared with bench/fuzz.py (long runs). SHARDCHECK_FUZZ_EXAMPLES
scales the number of inputs per command (default 120: about a minute in all on one core).
"""

from __future__ import annotations

import functools
import os
import shutil
import time

import fuzzing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardcheck.guard import run_guarded

EXAMPLES = int(os.environ.get("SHARDCHECK_FUZZ_EXAMPLES", "120"))
SECONDS = 30.0  # hangs were unbounded; 30 s keeps a loaded CI machine from flaking
MEMORY = 1 << 30
SEEDS = fuzzing.seeds()
POOL = [s.text for s in SEEDS]

ops = st.lists(
    st.tuples(st.sampled_from(fuzzing.KINDS), st.integers(0, 1 << 16), st.integers(0, 1 << 16)), min_size=1, max_size=6
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A copy of the seeds' folders, so that files they source sit where they expect them."""
    root = tmp_path_factory.mktemp("fuzz")
    for folder in ("examples", "tests/data/cases"):
        shutil.copytree(fuzzing.ROOT / folder, root / folder)
    for seed in SEEDS[:3]:  # warm the imports and the config cache outside any budget
        fuzzing.run_command("check", fuzzing.ROOT / seed.name, seed.text) if (
            fuzzing.ROOT / seed.name
        ).is_file() else None
    return root


def _run(command: str, workdir, seed_index: int, mutations) -> None:
    seed = SEEDS[seed_index % len(SEEDS)]
    data = fuzzing.mutate(seed.text, mutations, POOL)
    folder = workdir / os.path.dirname(seed.name)
    path = (folder if folder.is_dir() else workdir) / "fuzz-input.sh"
    path.write_bytes(data)
    start = time.monotonic()
    _, why = run_guarded(lambda: fuzzing.run_command(command, path, data), seconds=SECONDS, memory=MEMORY)
    assert why is None, f"{command} on a mutation of {seed.name} ({mutations}): {why}"
    assert time.monotonic() - start < SECONDS + 1


COMMON = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("command", [c for c in fuzzing.commands() if c not in ("reader", "plan")])
@COMMON
@given(seed_index=st.integers(0, 1 << 10), mutations=ops)
def test_commands_survive_mutated_scripts(workdir, command, seed_index, mutations):
    _run(command, workdir, seed_index, mutations)


# `plan` searches thousands of layouts per input: here only on the small seeds (one model, one node), a
# tenth of the inputs; bench/fuzz.py --commands plan drives it on every seed (figures in the README).
SMALL = [i for i, s in enumerate(SEEDS) if s.name in fuzzing.SMALL_SEEDS]


@settings(
    max_examples=max(1, EXAMPLES // 10),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(pick=st.integers(0, 1 << 10), mutations=ops)
def test_plan_survives_mutated_small_scripts(workdir, pick, mutations):
    _run("plan", workdir, SMALL[pick % len(SMALL)], mutations)


@settings(
    max_examples=EXAMPLES * 4,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed_index=st.integers(0, 1 << 10), mutations=ops)
def test_reader_survives_mutated_scripts(workdir, seed_index, mutations):
    _run("reader", workdir, seed_index, mutations)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(lines=st.lists(st.sampled_from(fuzzing.HOSTILE_LINES), min_size=1, max_size=8))
def test_hostile_lines_before_a_launch(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("hostile") / "run.sh"
    data = ("\n".join(lines) + "\n" + fuzzing.SMALL_SEEDS["megatron-lm.sh"]).encode()
    path.write_bytes(data)
    for command in ("reader", "check"):
        _, why = run_guarded(
            functools.partial(fuzzing.run_command, command, path, data), seconds=SECONDS, memory=MEMORY
        )
        assert why is None, f"{command} on {lines}: {why}"


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(
    world=st.integers(1, 1 << 40),
    tp=st.sampled_from([1, 2, 3, 8, 1 << 20]),
    pp=st.sampled_from([1, 2, 4, 7]),
    cp=st.sampled_from([1, 2, 16]),
    ep=st.sampled_from([1, 2, 64]),
    per_node=st.sampled_from([1, 8, 16, 1000]),
    rank=st.integers(0, 1 << 40),
)
def test_mesh_of_any_sizes(world, tp, pp, cp, ep, per_node, rank):
    from shardcheck.api import mesh
    from shardcheck.frameworks.megatron.direct import job_from_sizes
    from shardcheck.report.mesh_report import render_mesh_json, render_mesh_text

    def run():
        job = job_from_sizes(
            world=world,
            devices_per_node=per_node,
            tp=tp,
            pp=pp,
            cp=cp,
            ep=ep,
            etp=None,
            vpp=None,
            order="tp-cp-ep-dp-pp",
        )
        result = mesh(job)
        render_mesh_text(result)
        render_mesh_json(result)
        if result.grid is not None and rank < world:
            render_mesh_json(result, rank)

    _, why = run_guarded(run, seconds=SECONDS, memory=MEMORY)
    assert why is None, why
