"""Differential test: shardcheck's model-build verdicts vs. the real megatron-core TransformerConfig.

Random model configs (layers, attention heads, query groups, experts) on random layouts (TP, EP,
ETP, PP, CP, uneven first/last stage, VPP, account-for-embedding/loss, activation recompute) are judged
twice, through ``shardcheck.verify`` (one worker subprocess for the batch):

* by shardcheck: ``job_from_sizes(..., model=ModelFacts(...))`` + ``run_rules``; its MCORE-TC-* /
  MCORE-BUILD-* errors and ``layer_split``'s layers per stage;
* by megatron-core 0.16.1: ``TransformerConfig(...)``, ``get_num_layers_to_build`` for every pipeline
  rank and virtual stage, and BaseMoELayer's expert split (``shardcheck.verify.worker``).

They must agree on the verdict, on the rule mirroring megatron-core's first error (and the text it
quotes), and on the layers of every stage; the parallel state is compared too. Run with ``-s`` for
the summary.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from dataclasses import replace

import pytest

from shardcheck.verify import verify_available

pytestmark = pytest.mark.skipif(verify_available() is not None, reason=str(verify_available()))

from shardcheck.frameworks.megatron.direct import job_from_sizes
from shardcheck.job import ModelFacts
from shardcheck.origin import Origin, Traced
from shardcheck.verify.compare import config_rule_of

SEED = 20261203
N_CASES = 400
GIVEN = Origin(kind="cli", text="given directly")

LAYERS = [1, 2, 4, 7, 12, 16, 24, 27, 28, 32, 36, 40, 47, 48, 60, 61, 62, 64, 80, 94, 96, 126]
HEADS = [8, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96, 128]
EXPERTS = [None, None, 8, 16, 60, 64, 128, 160, 256]
TP = [1, 2, 3, 4, 8, 16]
PP = [1, 2, 3, 4, 6, 8, 16]
EP = [1, 2, 3, 4, 8, 16, 32, 48, 64]
ETP = [None, 1, 1, 2]
CP = [1, 1, 2]
VPP = [None, None, None, 1, 2, 3, 4]
RECOMPUTE_OK = [
    {},
    {"recompute_granularity": None, "recompute_method": None, "recompute_num_layers": None},  # verl's default
    {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1},
    {"recompute_granularity": "full", "recompute_method": "block", "recompute_num_layers": 2},
    {"recompute_granularity": "selective"},
]
RECOMPUTE_BAD = [
    {"recompute_granularity": "full"},
    {"recompute_granularity": "full", "recompute_method": "uniform"},
    {"recompute_granularity": "full", "recompute_method": "layer", "recompute_num_layers": 1},
    {"recompute_granularity": "selective", "recompute_num_layers": 1},
    {"recompute_granularity": "partial", "recompute_method": "uniform", "recompute_num_layers": 1},
]
# every model-build rule the generator reaches must be megatron-core's first error at least once
EXPECTED_FIRST = {
    "MCORE-TC-HEADS-TP",
    "MCORE-TC-QG-TP",
    "MCORE-TC-MOE-EP-NOEXP",
    "MCORE-TC-UNEVEN-POS",
    "MCORE-TC-UNEVEN-VPP",
    "MCORE-TC-UNEVEN-MIDDLE",
    "MCORE-TC-UNEVEN-ACCOUNT",
    "MCORE-TC-ACCOUNT-SPLIT",
    "MCORE-BUILD-LAYERS-PP",
    "MCORE-BUILD-VPP",
    "MCORE-TC-RECOMPUTE",
    "MCORE-BUILD-EXPERTS-EP",
}


def _fit(rng: random.Random, choices: list, n: int, p: float = 0.6):
    """With probability p a choice dividing n (when one does), else any."""
    ok = [c for c in choices if c and n % c == 0]
    return rng.choice(ok) if ok and rng.random() < p else rng.choice(choices)


def draw(rng: random.Random) -> dict:
    layers = rng.choice(LAYERS) if rng.random() < 0.8 else rng.randint(1, 128)
    heads = rng.choice(HEADS)
    groups = rng.choice([g for g in (1, 2, 4, 8, 16, heads) if heads % g == 0] + [None, 3, 6])
    experts = rng.choice(EXPERTS)
    tp = _fit(rng, TP, groups or heads, 0.7) if rng.random() < 0.8 else rng.choice(TP)
    if heads % tp and rng.random() < 0.7:
        tp = _fit(rng, TP, heads, 1.0)
    ep = _fit(rng, EP, experts, 0.8) if experts else (1 if rng.random() < 0.8 else rng.choice(EP))
    etp = rng.choice(ETP)
    pp = rng.choice(PP)
    vpp = rng.choice(VPP)
    first = last = None
    if pp > 1 and rng.random() < 0.4:
        per = max(1, layers // pp)
        first = rng.choice([0, per - 1, per, per + 1, per + 2]) if rng.random() < 0.7 else rng.randint(0, layers)
        if rng.random() < 0.8:
            last = first if rng.random() < 0.6 else rng.choice([0, per - 1, per, per + 1])
        if rng.random() < 0.15:
            first, last = None, last if last is not None else first
    elif pp == 1 and rng.random() < 0.05:
        first = last = layers  # pp 1 with an uneven split: megatron's arithmetic on zero middle stages
    if rng.random() < 0.5:  # bias towards splits that work
        fits = [p for p in PP if layers % p == 0]
        pp = rng.choice(fits) if first is None and last is None else pp
        if vpp and pp > 1 and (layers // pp) % vpp:
            vpp = rng.choice([v for v in (None, 1, 2, 3, 4) if v is None or (layers // pp) % v == 0])
    account = (False, False)
    if rng.random() < 0.1:
        account = (rng.random() < 0.7, rng.random() < 0.7)
    recompute = rng.choice(RECOMPUTE_BAD if rng.random() < 0.12 else RECOMPUTE_OK)
    cp = rng.choice(CP)
    etp_eff = tp if etp is None else etp
    world = math.lcm(tp * pp * cp, etp_eff * ep * pp) * rng.choice([1, 1, 2])
    return {
        "world": world,
        "layers": layers,
        "heads": heads,
        "groups": groups,
        "experts": experts,
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "ep": ep,
        "etp": etp,
        "vpp": vpp,
        "first": first,
        "last": last,
        "account": account,
        "recompute": recompute,
    }


def generate(n: int = N_CASES, seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    return [draw(rng) for _ in range(n)]


def make_job(c: dict):
    model = ModelFacts(
        name=f"L{c['layers']}-H{c['heads']}-G{c['groups']}-E{c['experts']}",
        source="random",
        origin=Origin(kind="model", text="random model"),
        num_hidden_layers=c["layers"],
        num_attention_heads=c["heads"],
        num_key_value_heads=c["groups"],
        hidden_size=c["heads"] * 128,
        num_experts=c["experts"],
    )
    job = job_from_sizes(
        world=c["world"],
        tp=c["tp"],
        pp=c["pp"],
        cp=c["cp"],
        ep=c["ep"],
        etp=c["etp"],
        vpp=c["vpp"],
        first_stage_layers=c["first"],
        last_stage_layers=c["last"],
        model=model,
    )
    layout = replace(
        job.layouts[0],
        account_for_embedding=Traced(c["account"][0], GIVEN),
        account_for_loss=Traced(c["account"][1], GIVEN),
        transformer_overrides={k: Traced(v, GIVEN) for k, v in c["recompute"].items()},
    )
    return replace(job, layouts=(layout,))


def _fmt(c: dict) -> str:
    return (
        "L{layers} H{heads} G{groups} E{experts} W{world} TP{tp} PP{pp} CP{cp} EP{ep} ETP{etp} VPP{vpp} "
        "first {first} last {last} account {account} recompute {recompute}"
    ).format(**c)


def test_model_configs_against_transformer_config():
    from shardcheck.verify import verify_jobs

    t0 = time.perf_counter()
    cases = generate()
    jobs = [make_job(c) for c in cases]
    reports = verify_jobs(jobs, all_ranks_limit=8, worker_jobs=2)
    seconds = time.perf_counter() - t0
    disagreements = [
        f"{_fmt(c)}:\n    " + "\n    ".join(r.disagreements + r.unverified)
        for c, r in zip(cases, reports)
        if not r.agrees
    ]
    megatron = [r.engines[0]["megatron"] for r in reports]
    n_valid = sum(bool(m["config_valid"]) for m in megatron)
    first = Counter(config_rule_of(m["config_error"]) or m["config_error"] for m in megatron if not m["config_valid"])
    ps_valid = sum(bool(m["valid"]) for m in megatron)
    print(
        f"\nmegatron TransformerConfig differential: {len(cases)} model configs, {n_valid} build, "
        f"{len(cases) - n_valid} raise; {len(cases) - len(disagreements)}/{len(cases)} agree "
        f"({ps_valid} parallel states initialise); {seconds:.1f} s\n  first errors: {dict(first)}"
    )
    assert len(cases) >= 300
    assert min(n_valid, len(cases) - n_valid) >= len(cases) // 4, (n_valid, len(cases))
    assert EXPECTED_FIRST <= set(first), EXPECTED_FIRST - set(first)
    assert not disagreements, (
        f"{len(disagreements)} of {len(cases)} model configs disagree with megatron-core "
        f"(first {min(20, len(disagreements))}):\n" + "\n".join(disagreements[:20])
    )
