"""Differential test: shardcheck's Megatron-Core layout verdicts and rank grid vs. the real megatron-core.

Every random case (world 8 ... 8192, TP/PP/CP/EP/ETP/VPP, one of several rank-order strings) is
judged three ways:

* by megatron-core 0.16.1 itself: ``tests/oracle/megatron_oracle.py`` (stdin/stdout JSON) runs the
  real ``parallel_state.initialize_model_parallel`` on torch's ``fake`` process group, in one
  subprocess for the whole batch, and reports the verdict, the first error, DP / EDP / ETP and the
  group members (tp, cp, dp, pp, ep, etp, edp) of the listed ranks;
* by shardcheck's rank grid: ``shardcheck.mesh.grid.build_grid`` -> ``Grid`` or ``GridError``;
* by shardcheck's rules: ``job_from_sizes`` + ``run_rules`` (invalid iff any finding is an error).

They must agree on validity; for valid layouts on DP, EDP, ETP and on the groups of rank 0, the
last rank and two random ranks; for invalid ones on the first check megatron-core fails (its
order: world tiling -> VPP needs PP > 1 -> dense order tokens -> expert grid -> expert order
tokens -> pp-last -> pp groups): ``build_grid`` must name the rule mirroring that check with
megatron-core's exact text, the rules must report an error from that rule quoting the text after
``megatron-core: "``, and no error from a rule whose check megatron-core had already passed.
megatron-core's "Pipeline parallel groups are expected ..." message goes on to list both group
sets; only its prefix (before the first comma) is compared.

Run with ``-s`` to see the one-line summary.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("megatron.core")

from shardcheck.frameworks.megatron.direct import job_from_sizes
from shardcheck.mesh.grid import Grid, GridError, build_grid
from shardcheck.rules.registry import rule_id, run_rules

ORACLE = Path(__file__).parent / "oracle" / "megatron_oracle.py"
DEFAULT_ORDER = "tp-cp-ep-dp-pp"  # megatron-core's default; verl does not change it
TP_PP_DP_ORDER = "tp-cp-ep-pp-dp"  # Megatron-LM's --use-tp-pp-dp-mapping
SEED = 20261203
N_CASES = 5000
ORACLE_JOBS = 2
ORACLE_TIMEOUT_S = 600
KINDS = ("tp", "cp", "dp", "pp", "ep", "etp", "edp")

# order string -> weight. Besides the two Megatron-LM uses: orders missing a dimension (the
# token checks), pp not last (the pp-last and pp-group checks), other fastest dimensions (other
# groups) and upper case (megatron-core lowers the tokens but tests ``order.endswith("pp")`` as given).
ORDERS = {
    DEFAULT_ORDER: 40,
    TP_PP_DP_ORDER: 30,
    "tp-pp-cp-ep-dp": 6,
    "tp-dp-pp": 5,
    "tp-pp-dp": 4,
    "cp-tp-ep-dp-pp": 4,
    "ep-tp-cp-dp-pp": 3,
    "tp-cp-ep-dp": 3,
    "pp-tp-cp-ep-dp": 2,
    "TP-CP-EP-DP-PP": 3,
}

# worlds 8 ... 8192: powers of two, 3·2^k, 5·2^k, 7·2^k, 9·2^k and odd ones
SMALL_WORLDS = [
    8,
    9,
    10,
    12,
    14,
    15,
    16,
    18,
    20,
    24,
    27,
    28,
    30,
    32,
    36,
    40,
    45,
    48,
    56,
    60,
    64,
    72,
    80,
    96,
    112,
    120,
    128,
    144,
    160,
    192,
    224,
    240,
    256,
]
MID_WORLDS = [288, 320, 384, 448, 480, 512, 576, 640, 768, 960, 1000, 1024]
LARGE_WORLDS = [1152, 1536, 2000, 2048, 2304, 3072]
HUGE_WORLDS = [4096, 6144, 8192]
TP_SET = [1, 2, 3, 4, 8, 16]
PP_SET = [1, 2, 3, 4, 8, 16]
CP_SET = [1, 2, 3, 4, 8]
EP_SET = [1, 2, 3, 4, 8, 16, 32, 64, 128]
ETP_SET = [None, 1, 2, 4, 8]
VPP_SET = [1, 2, 3, 4]

# Caps on layouts whose sizes tile their world (the only expensive ones for the oracle: ~15 ms at
# 256 devices, ~0.2 s at 4096, ~0.5-0.7 s at 8192); a layout that fails a check costs ~0.1 ms.
MAX_VALID_MID = 150
MAX_VALID_LARGE = 60
MAX_VALID_HUGE = 40

# megatron-core 0.16.1 initialize_model_parallel checks, in the order it makes them (the order
# tokens are checked twice: dense generator before the expert grid, expert generator after it)
RULE_OF_CHECK = (
    ("MCORE-PS-WORLD", re.compile(r"^world_size \(\d+\) is not divisible by \d+$")),
    (
        "MCORE-PS-VPP-PP",
        re.compile(r"^pipeline-model-parallel size should be greater than 1 with interleaved schedule$"),
    ),
    (
        "MCORE-PS-ORDER-TOKEN",
        re.compile(r"^The size of \((tp|pp|dp|ep|cp)\) is \(\d+\), but you haven'tspecified the order \([^)]*\)\.$"),
    ),
    (
        "MCORE-PS-EXPERT-FOLD",
        re.compile(r"^world_size \(\d+\) is not divisible by expert_tensor_model_pipeline_parallel size \(\d+\)$"),
    ),
    (
        "MCORE-PS-ORDER-PPLAST",
        re.compile(
            r"^When not using pp-last rank ordering, the data parallel size of the attention and moe "
            r"layers must be the same$"
        ),
    ),
    (
        "MCORE-PS-PP-GROUPS",
        re.compile(r"^Pipeline parallel groups are expected to be the same for Non-Expert and Expert part, .*but got "),
    ),
)
RULES = tuple(rid for rid, _ in RULE_OF_CHECK)
# rules whose check megatron-core has passed when it fails the given one (so shardcheck must not
# report them); ORDER-TOKEN may be the expert generator's, after the expert grid, so the expert
# grid rule is not excluded there (whether it fires is then its own fact)
PASSED_BEFORE = {
    "MCORE-PS-WORLD": set(),
    "MCORE-PS-VPP-PP": {"MCORE-PS-WORLD"},
    "MCORE-PS-ORDER-TOKEN": {"MCORE-PS-WORLD", "MCORE-PS-VPP-PP"},
    "MCORE-PS-EXPERT-FOLD": {"MCORE-PS-WORLD", "MCORE-PS-VPP-PP", "MCORE-PS-ORDER-TOKEN"},
    "MCORE-PS-ORDER-PPLAST": set(RULES[:4]),
    "MCORE-PS-PP-GROUPS": set(RULES[:5]),
}
QUOTED = re.compile(r'megatron-core: "([^"]*)"')


def _tiles(case: dict) -> bool:
    """Whether the case passes megatron-core's size checks -- used only to budget the
    generator's mix of expensive cases, never as the expected verdict."""
    w, tp, pp, cp, ep = (case[k] for k in ("world", "tp", "pp", "cp", "ep"))
    etp = tp if case["etp"] is None else case["etp"]
    return w % (tp * pp * cp) == 0 and w % (etp * ep * pp) == 0 and (case["vpp"] is None or pp > 1)


def _pick(rng: random.Random, choices: list, n: int | None, fit: float):
    """From ``choices``: with probability ``fit`` one dividing ``n`` (when there is one)."""
    if n is not None and rng.random() < fit:
        ok = [c for c in choices if c is not None and n % c == 0]
        if ok:
            return rng.choice(ok)
    return rng.choice(choices)


def _draw(rng: random.Random, world: int, order: str) -> dict:
    fit = 0.7
    pp = _pick(rng, PP_SET, world, fit)
    rest = world // pp if world % pp == 0 else None
    tp = _pick(rng, TP_SET, rest, fit)
    rest_tp = rest // tp if rest is not None and rest % tp == 0 else None
    cp = _pick(rng, CP_SET, rest_tp, fit)
    # Sometimes an expert grid as wide as the dense TP·CP (EDP = DP): what an order without pp
    # last needs (pp-last check), and, with ETP != TP, what reaches the pp-group check.
    matched = rng.random() < (0.25 if order.endswith("pp") else 0.55)
    pairs = [
        (etp, tp * cp // (tp if etp is None else etp))
        for etp in ETP_SET
        if (tp * cp) % (tp if etp is None else etp) == 0 and tp * cp // (tp if etp is None else etp) in EP_SET
    ]
    if matched and pairs:
        etp, ep = rng.choice(pairs)
    else:
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
    vpp = None if rng.random() < 0.8 else rng.choice(VPP_SET)
    ranks = [0, world - 1, *rng.sample(range(1, world - 1), 2)]
    return {
        "world": world,
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "ep": ep,
        "etp": etp,
        "vpp": vpp,
        "order": order,
        "ranks": ranks,
    }


def generate_cases(n: int = N_CASES, seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    orders, weights = list(ORDERS), list(ORDERS.values())
    caps = {"mid": MAX_VALID_MID, "large": MAX_VALID_LARGE, "huge": MAX_VALID_HUGE}
    used = Counter()
    cases: list[dict] = []
    while len(cases) < n:
        r = rng.random()
        if r < 0.80:
            band, world = "small", rng.choice(SMALL_WORLDS)
        elif r < 0.92:
            band, world = "mid", rng.choice(MID_WORLDS)
        elif r < 0.97:
            band, world = "large", rng.choice(LARGE_WORLDS)
        else:
            band, world = "huge", rng.choice(HUGE_WORLDS)
        case = _draw(rng, world, rng.choices(orders, weights)[0])
        if band in caps and _tiles(case):
            if used[band] >= caps[band]:
                continue
            used[band] += 1
        cases.append(case)
    return cases


def run_oracle(cases: list[dict]) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, str(ORACLE), "--jobs", str(ORACLE_JOBS)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=ORACLE_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"megatron oracle exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    results = json.loads(proc.stdout)
    assert len(results) == len(cases), (len(results), len(cases))
    return results


def shardcheck_verdict(case: dict) -> dict:
    sizes = {k: case[k] for k in ("world", "tp", "pp", "cp", "ep", "etp", "vpp")}
    order = case.get("order") or DEFAULT_ORDER
    job = job_from_sizes(**sizes, order=order)
    findings, _skipped = run_rules(job)
    errors = [f for f in findings if f.severity == "error"]
    layout = job.layouts[0]
    world = job.cluster.world
    return {
        "valid": not errors,
        "errors": [(f.rule, f.message) for f in errors],
        "dp": layout.dp(world).value,
        "edp": layout.edp(world).value,
        "grid": build_grid(**sizes, order=order),
    }


def _strip_type(error: str) -> str:
    """'RuntimeError: text' -> 'text'."""
    head, sep, rest = error.partition(": ")
    return rest if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head) else error


def _check_of(error: str | None) -> str | None:
    text = _strip_type(error or "")
    return next((rid for rid, pat in RULE_OF_CHECK if pat.match(text)), None)


def _key(rule: str, text: str) -> str:
    """The part of megatron-core's text shardcheck reproduces: all of it, except that the
    pp-group message's group lists (after the first comma) are left out."""
    return text.partition(",")[0] if rule == "MCORE-PS-PP-GROUPS" else text


def _show_grid(grid) -> str:
    if isinstance(grid, GridError):
        return f"GridError({rule_id(grid.kind)}: {grid.message!r})"
    if isinstance(grid, Grid):
        return f"Grid(dp={grid.dp}, edp={grid.edp}, etp={grid.etp})"
    return repr(grid)


def compare(case: dict, oracle: dict, mine: dict) -> tuple[str | None, int]:
    """(None when shardcheck agrees with megatron-core on ``case``, else why not; ranks compared)."""
    grid = mine["grid"]
    if (oracle.get("error") or "").startswith("OracleError"):
        return f"oracle failed: {oracle['error']}", 0
    if not (oracle["valid"] == mine["valid"] == isinstance(grid, Grid)):
        return (
            f"validity: megatron-core {'valid' if oracle['valid'] else 'invalid'} "
            f"({oracle.get('error')}); shardcheck rules {'valid' if mine['valid'] else 'invalid'} "
            f"({mine['errors']}); build_grid {_show_grid(grid)}"
        ), 0
    if oracle["valid"]:
        diffs = [
            f"{k.upper()} megatron-core {oracle[k]} != shardcheck rules {mine[k]}"
            for k in ("dp", "edp")
            if oracle[k] != mine[k]
        ]
        diffs += [
            f"{k.upper()} megatron-core {oracle[k]} != build_grid {getattr(grid, k)}"
            for k in ("dp", "edp", "etp")
            if oracle[k] != getattr(grid, k)
        ]
        ranks = 0
        for r in case["ranks"]:
            theirs = (oracle.get("groups") or {}).get(str(r))
            if not theirs:
                diffs.append(f"rank {r}: megatron-core reported no groups")
                continue
            ranks += 1
            for kind in KINDS:
                ours = grid.group_of(kind, r)
                if theirs.get(kind) != ours:
                    diffs.append(f"rank {r} {kind} group: megatron-core {theirs.get(kind)} != build_grid {ours}")
        return ("; ".join(diffs) or None), ranks
    text = _strip_type(oracle["error"])
    rule = _check_of(oracle["error"])
    if rule is None:
        return f"megatron-core raised a check shardcheck has no rule for: {oracle['error']!r}", 0
    problems = []
    if rule_id(grid.kind) != rule or grid.message != _key(rule, text):
        problems.append(f"build_grid {_show_grid(grid)}")
    quoted = [q for rid, msg in mine["errors"] if rid == rule for q in QUOTED.findall(msg)]
    if _key(rule, text) not in quoted:
        problems.append(f"rules report no {rule} error quoting it")
    early = sorted({rid for rid, _ in mine["errors"]} & PASSED_BEFORE[rule])
    if early:
        problems.append(f"rules report {early}, checks megatron-core passed")
    if problems:
        return (
            f"first error: megatron-core {oracle['error']!r} (-> {rule}); "
            + "; ".join(problems)
            + f"; shardcheck errors {mine['errors']}"
        ), 0
    return None, 0


def _fmt(case: dict) -> str:
    return "W={world} TP{tp} PP{pp} CP{cp} EP{ep} ETP{etp} VPP{vpp} order={order}".format(**case)


# Fixed cases from tests/data/cases (Qwen3-235B-A22B at 256K context, 16 nodes x 16 devices),
# verdicts confirmed on megatron-core 0.16.1.
NAMED = [
    pytest.param(
        {"world": 256, "tp": 2, "pp": 16, "cp": 8, "ep": 16, "etp": 1, "vpp": None},
        {"valid": True, "dp": 1, "edp": 1, "error": None},
        id="qwen3_235b_256k_after",
    ),
    pytest.param(
        {"world": 256, "tp": 2, "pp": 16, "cp": 8, "ep": 16, "etp": None, "vpp": None},
        {
            "valid": False,
            "error": "RuntimeError: world_size (256) is not divisible by "
            "expert_tensor_model_pipeline_parallel size (512)",
        },
        id="qwen3_235b_256k_etp_unset",
    ),
    pytest.param(
        {"world": 256, "tp": 4, "pp": 8, "cp": 8, "ep": 32, "etp": 1, "vpp": None},
        {"valid": True, "dp": 1, "edp": 1, "error": None},
        id="qwen3_235b_256k_before",
    ),
]


def _named_case(sizes: dict) -> dict:
    return dict(sizes, order=DEFAULT_ORDER, ranks=[0, sizes["world"] - 1, 13])


@pytest.fixture(scope="module")
def batch(request) -> dict:
    """One oracle run (one ~5 s megatron import) for the random and the named cases; the random
    cases only when their test is selected."""
    t0 = time.perf_counter()
    wanted = any(
        item.name == test_differential_random_layouts.__name__ and item.module is request.module
        for item in request.session.items
    )
    cases = generate_cases() if wanted else []
    named = [_named_case(p.values[0]) for p in NAMED]
    results = run_oracle(cases + named)
    return {
        "cases": cases,
        "oracle": results[: len(cases)],
        "t0": t0,
        "named": {p.id: res for p, res in zip(NAMED, results[len(cases) :])},
    }


def test_differential_random_layouts(batch):
    cases, oracle = batch["cases"], batch["oracle"]
    disagreements = []
    ranks_compared = 0
    for case, res in zip(cases, oracle):
        mine = shardcheck_verdict(case)
        why, ranks = compare(case, res, mine)
        ranks_compared += ranks
        if why is not None:
            disagreements.append(f"{_fmt(case)}: {why}")
    seconds = time.perf_counter() - batch["t0"]
    valid = [c for c, r in zip(cases, oracle) if r["valid"]]
    n_valid = len(valid)
    n_invalid = len(cases) - n_valid
    agree = len(cases) - len(disagreements)
    print(
        f"\nmegatron differential: {len(cases)} cases, {n_valid} valid, {n_invalid} invalid, "
        f"{agree}/{len(cases)} agree, {ranks_compared} ranks x {len(KINDS)} groups compared, "
        f"{seconds:.1f} s"
    )
    assert not disagreements, (
        f"{len(disagreements)} of {len(cases)} layouts disagree with megatron-core "
        f"(first {min(20, len(disagreements))}):\n" + "\n".join(disagreements[:20])
    )

    # the mix must be as wide as claimed and exercise both verdicts and every check
    assert len(cases) >= 5000
    assert min(n_valid, n_invalid) >= len(cases) // 4, (n_valid, n_invalid)
    assert ranks_compared == 4 * n_valid, (ranks_compared, n_valid)
    checks = Counter(_check_of(r["error"]) for r in oracle if not r["valid"])
    assert None not in checks, checks
    assert set(RULES) <= set(checks) and min(checks[rid] for rid in RULES) >= 5, checks
    tokens = {
        re.search(r"\((\w+)\)", r["error"]).group(1) for r in oracle if _check_of(r["error"]) == "MCORE-PS-ORDER-TOKEN"
    }
    assert "ep" in tokens and tokens - {"ep"}, tokens  # the expert generator's check and the dense one's
    valid_orders = Counter(c["order"] for c in valid)
    assert set(ORDERS) <= set(valid_orders), valid_orders
    assert min(valid_orders[DEFAULT_ORDER], valid_orders[TP_PP_DP_ORDER]) >= 300, valid_orders
    valid_worlds = Counter(c["world"] for c in valid)
    assert any(valid_worlds[w] for w in HUGE_WORLDS if w & (w - 1)), valid_worlds  # non-power of two
    assert valid_worlds[8192] >= 1 and valid_worlds[8] >= 1, valid_worlds
    assert 10 <= sum(valid_worlds[w] for w in HUGE_WORLDS) <= MAX_VALID_HUGE, valid_worlds
    assert sum(n for w, n in valid_worlds.items() if w & (w - 1)) >= n_valid // 5, valid_worlds
    for key in ("tp", "pp", "cp", "ep"):
        assert max(c[key] for c in valid) >= 8, key
    assert {c["etp"] for c in valid} >= set(ETP_SET), {c["etp"] for c in valid}
    assert any(c["vpp"] for c in valid) and any(c["vpp"] is None for c in valid)


@pytest.mark.parametrize("sizes,expected", NAMED)
def test_named_case(request, batch, sizes, expected):
    case = _named_case(sizes)
    oracle = batch["named"][request.node.callspec.id]
    mine = shardcheck_verdict(case)
    # the recorded verdict is megatron-core's ...
    assert oracle["valid"] == expected["valid"], oracle
    assert oracle["error"] == expected["error"], oracle
    if expected["valid"]:
        assert (oracle["dp"], oracle["edp"]) == (expected["dp"], expected["edp"]), oracle
        assert (mine["dp"], mine["edp"]) == (expected["dp"], expected["edp"]), mine
    # ... and shardcheck's
    why, _ranks = compare(case, oracle, mine)
    assert why is None, why
