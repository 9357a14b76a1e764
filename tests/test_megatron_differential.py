"""Differential test: shardcheck's Megatron-Core layout verdicts vs. the real megatron-core.

Every case is judged twice:

* by shardcheck (``job_from_sizes`` + ``run_rules``): invalid iff any finding has severity
  "error"; DP / EDP from the layout;
* by megatron-core 0.16.1 itself: ``tests/oracle/megatron_oracle.py`` runs the real
  ``parallel_state.initialize_model_parallel`` on torch's ``fake`` process group, in one
  subprocess for the whole batch.

They must agree on validity, on DP and EDP for valid layouts, and, for invalid ones, on the
first check megatron-core raises (its order: world tiling -> VPP needs PP > 1 -> expert grid):
shardcheck must report an error from the rule mirroring that check whose quoted
``megatron-core: "..."`` text is exactly megatron-core's message.

Run with ``-s`` to see the one-line summary.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("megatron.core")

from shardcheck.frameworks.megatron.direct import job_from_sizes
from shardcheck.rules.registry import run_rules

ORACLE = Path(__file__).parent / "oracle" / "megatron_oracle.py"
ORDER = "tp-cp-ep-dp-pp"  # megatron-core's default; verl does not change it
SEED = 20261202
N_CASES = 2400
ORACLE_JOBS = 2
ORACLE_TIMEOUT_S = 600

# worlds 8 ... 4096: powers of two, 3·2^k, and a few odd / other shapes
SMALL_WORLDS = [8, 9, 12, 15, 16, 24, 32, 40, 48, 64, 96, 120, 128, 192, 256]
MID_WORLDS = [384, 512, 768, 1024]
LARGE_WORLDS = [1536, 2048, 3072, 4096]
TP_SET = [1, 2, 3, 4, 8, 16]
PP_SET = [1, 2, 3, 4, 8, 16]
CP_SET = [1, 2, 4, 8]
EP_SET = [1, 2, 3, 4, 8, 16, 32, 64, 128]
ETP_SET = [None, 1, 2, 4, 8]
VPP_SET = [1, 2, 3, 4]

# Caps on layouts that tile their world (the only expensive ones for the oracle: ~15 ms at
# 256 devices, ~0.3-0.8 s at 4096); layouts that fail a check cost ~0.1 ms at any size.
MAX_VALID_MID = 60
MAX_VALID_LARGE = 24

# megatron-core 0.16.1 initialize_model_parallel checks, in the order it makes them
RULE_OF_CHECK = (
    ("MCORE-PS-WORLD", re.compile(r"^world_size \(\d+\) is not divisible by \d+$")),
    ("MCORE-PS-VPP-PP", re.compile(r"^pipeline-model-parallel size should be greater than 1 with interleaved schedule$")),
    ("MCORE-PS-EXPERT-FOLD", re.compile(
        r"^world_size \(\d+\) is not divisible by expert_tensor_model_pipeline_parallel size \(\d+\)$")),
)
QUOTED = re.compile(r'megatron-core: "([^"]*)"')


def _tiles(case: dict) -> bool:
    """Whether the case passes megatron-core's size checks -- used only to budget the
    generator's mix of expensive cases, never as the expected verdict."""
    w, tp, pp, cp, ep = (case[k] for k in ("world", "tp", "pp", "cp", "ep"))
    etp = tp if case["etp"] is None else case["etp"]
    return (w % (tp * pp * cp) == 0 and w % (etp * ep * pp) == 0
            and (case["vpp"] is None or pp > 1))


def _pick(rng: random.Random, choices: list, n: int | None, fit: float):
    """From ``choices``: with probability ``fit`` one dividing ``n`` (when there is one)."""
    if n is not None and rng.random() < fit:
        ok = [c for c in choices if c is not None and n % c == 0]
        if ok:
            return rng.choice(ok)
    return rng.choice(choices)


def _draw(rng: random.Random, world: int) -> dict:
    fit = 0.7
    pp = _pick(rng, PP_SET, world, fit)
    rest = world // pp if world % pp == 0 else None
    tp = _pick(rng, TP_SET, rest, fit)
    rest_tp = rest // tp if rest is not None and rest % tp == 0 else None
    cp = _pick(rng, CP_SET, rest_tp, fit)
    # ETP: unset (None = follow TP) often, as in verl; otherwise a size fitting the expert grid
    r = rng.random()
    if r < 0.3:
        etp = None
    elif r < 0.9:
        etp = _pick(rng, ETP_SET[1:], rest, 1.0)
    else:
        etp = rng.choice(ETP_SET[1:])
    etp_eff = tp if etp is None else etp
    rest_e = rest // etp_eff if rest is not None and rest % etp_eff == 0 else None
    ep = _pick(rng, EP_SET, rest_e, fit)
    r = rng.random()
    vpp = None if r < 0.8 else rng.choice(VPP_SET)
    return {"world": world, "tp": tp, "pp": pp, "cp": cp, "ep": ep, "etp": etp, "vpp": vpp,
            "order": ORDER, "ranks": [0]}


def generate_cases(n: int = N_CASES, seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    cases: list[dict] = []
    valid_mid = valid_large = 0
    while len(cases) < n:
        r = rng.random()
        if r < 0.82:
            world = rng.choice(SMALL_WORLDS)
        elif r < 0.94:
            world = rng.choice(MID_WORLDS)
        else:
            world = rng.choice(LARGE_WORLDS)
        case = _draw(rng, world)
        if _tiles(case):
            if world in LARGE_WORLDS:
                if valid_large >= MAX_VALID_LARGE:
                    continue
                valid_large += 1
            elif world in MID_WORLDS:
                if valid_mid >= MAX_VALID_MID:
                    continue
                valid_mid += 1
        cases.append(case)
    return cases


def run_oracle(cases: list[dict]) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, str(ORACLE), "--jobs", str(ORACLE_JOBS)],
        input=json.dumps(cases), capture_output=True, text=True, timeout=ORACLE_TIMEOUT_S, check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"megatron oracle exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    results = json.loads(proc.stdout)
    assert len(results) == len(cases), (len(results), len(cases))
    return results


def shardcheck_verdict(case: dict) -> dict:
    job = job_from_sizes(world=case["world"], tp=case["tp"], pp=case["pp"], cp=case["cp"],
                         ep=case["ep"], etp=case["etp"], vpp=case["vpp"])
    findings, _skipped = run_rules(job)
    errors = [f for f in findings if f.severity == "error"]
    layout = job.layouts[0]
    world = job.cluster.world
    return {
        "valid": not errors,
        "errors": [(f.rule, f.message) for f in errors],
        "dp": layout.dp(world).value,
        "edp": layout.edp(world).value,
    }


def _strip_type(error: str) -> str:
    """'RuntimeError: text' -> 'text'."""
    head, sep, rest = error.partition(": ")
    return rest if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head) else error


def compare(case: dict, oracle: dict, mine: dict) -> str | None:
    """None when shardcheck agrees with megatron-core on ``case``, else why not."""
    if (oracle.get("error") or "").startswith("OracleError"):
        return f"oracle failed: {oracle['error']}"
    if oracle["valid"] != mine["valid"]:
        return (f"validity: megatron-core {'valid' if oracle['valid'] else 'invalid'} "
                f"({oracle.get('error')}), shardcheck {'valid' if mine['valid'] else 'invalid'} "
                f"({mine['errors']})")
    if oracle["valid"]:
        diffs = [f"{k.upper()} megatron-core {oracle[k]} != shardcheck {mine[k]}"
                 for k in ("dp", "edp") if oracle[k] != mine[k]]
        return "; ".join(diffs) or None
    text = _strip_type(oracle["error"])
    rule = next((rid for rid, pat in RULE_OF_CHECK if pat.match(text)), None)
    if rule is None:
        return f"megatron-core raised a check shardcheck has no rule for: {oracle['error']!r}"
    quoted = [QUOTED.findall(msg) for rid, msg in mine["errors"] if rid == rule]
    if not any(text in q for q in quoted):
        return (f"first error: megatron-core {oracle['error']!r} (-> {rule}); "
                f"shardcheck errors {mine['errors']}")
    return None


def _fmt(case: dict) -> str:
    return ("W={world} TP{tp} PP{pp} CP{cp} EP{ep} ETP{etp} VPP{vpp}").format(**case)


def test_differential_random_layouts():
    t0 = time.perf_counter()
    cases = generate_cases()
    oracle = run_oracle(cases)
    disagreements = []
    for case, res in zip(cases, oracle):
        why = compare(case, res, shardcheck_verdict(case))
        if why is not None:
            disagreements.append(f"{_fmt(case)}: {why}")
    seconds = time.perf_counter() - t0
    n_valid = sum(r["valid"] for r in oracle)
    n_invalid = len(cases) - n_valid
    agree = len(cases) - len(disagreements)
    print(f"\nmegatron differential: {len(cases)} cases, {n_valid} valid, {n_invalid} invalid, "
          f"{agree}/{len(cases)} agree, {seconds:.1f} s")
    assert len(cases) >= 2000
    # the mix must exercise both verdicts and every check
    assert min(n_valid, n_invalid) >= len(cases) // 4, (n_valid, n_invalid)
    first_checks = {next((rid for rid, pat in RULE_OF_CHECK if pat.match(_strip_type(r["error"]))), r["error"])
                    for r in oracle if not r["valid"]}
    assert {rid for rid, _ in RULE_OF_CHECK} <= first_checks, first_checks
    assert not disagreements, (
        f"{len(disagreements)} of {len(cases)} layouts disagree with megatron-core "
        f"(first {min(20, len(disagreements))}):\n" + "\n".join(disagreements[:20]))


# Fixed cases from ../shared/cases (Qwen3-235B-A22B at 256K context, 16 nodes x 16 devices),
# verdicts confirmed on megatron-core 0.16.1.
NAMED = [
    pytest.param({"world": 256, "tp": 2, "pp": 16, "cp": 8, "ep": 16, "etp": 1, "vpp": None},
                 {"valid": True, "dp": 1, "edp": 1, "error": None}, id="qwen3_235b_256k_after"),
    pytest.param({"world": 256, "tp": 2, "pp": 16, "cp": 8, "ep": 16, "etp": None, "vpp": None},
                 {"valid": False, "error": "RuntimeError: world_size (256) is not divisible by "
                                           "expert_tensor_model_pipeline_parallel size (512)"},
                 id="qwen3_235b_256k_etp_unset"),
    pytest.param({"world": 256, "tp": 4, "pp": 8, "cp": 8, "ep": 32, "etp": 1, "vpp": None},
                 {"valid": True, "dp": 1, "edp": 1, "error": None}, id="qwen3_235b_256k_before"),
]


@pytest.fixture(scope="module")
def named_oracle() -> dict:
    cases = [dict(p.values[0], order=ORDER, ranks=[0]) for p in NAMED]
    return {p.id: res for p, res in zip(NAMED, run_oracle(cases))}


@pytest.mark.parametrize("sizes,expected", NAMED)
def test_named_case(request, named_oracle, sizes, expected):
    case = dict(sizes, order=ORDER, ranks=[0])
    case_id = request.node.callspec.id
    oracle = named_oracle[case_id]
    mine = shardcheck_verdict(case)
    # the recorded verdict is megatron-core's ...
    assert oracle["valid"] == expected["valid"], oracle
    assert oracle["error"] == expected["error"], oracle
    if expected["valid"]:
        assert (oracle["dp"], oracle["edp"]) == (expected["dp"], expected["edp"]), oracle
        assert (mine["dp"], mine["edp"]) == (expected["dp"], expected["edp"]), mine
    # ... and shardcheck's
    assert compare(case, oracle, mine) is None, compare(case, oracle, mine)
