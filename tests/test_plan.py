"""shardcheck plan: the kept set equals a brute-force enumeration judged by ``check``'s rules; every plan
re-read through the resolver with its override lines is valid; the pruning bounds hold; megatron-core
agrees on the layout part; the step-time formulas reduce to their sources."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from launches import verl_qwen3_moe

from shardcheck.api import resolve_script
from shardcheck.estimate.step_time import forward_flops_per_token, layer_flops, narayanan_flops, pipeline_time
from shardcheck.memory.devices import find_device
from shardcheck.models.architecture import Architecture
from shardcheck.plan import plan_script
from shardcheck.plan.search import _peak, _Search, _StaticFloor, errors_of, knob_view, plan_job
from shardcheck.plan.space import Memory, Rollout, Space, TrainLayout, train_layouts
from shardcheck.rules.registry import run_rules

ROOT = Path(__file__).resolve().parents[1]
MLM = ROOT / "examples" / "megatron_lm_pretrain_gpt.sh"


@pytest.fixture(scope="module")
def moe_job(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "run.sh"
    path.write_text(verl_qwen3_moe())
    return path, replace(resolve_script(path), device_choice="H200-SXM-141GB")


def _judge(search: _Search, t: TrainLayout, m: Memory, r: Rollout | None) -> bool:
    """``check``'s verdict on the candidate (every rule but the input-word ones) and the memory margin."""
    _, job = search.candidate(t, m, r)
    if errors_of(run_rules(job)[0]):
        return False
    peak = _peak(job)
    return peak is not None and peak <= search.limit


def _brute(search: _Search, space: Space, rollouts: list) -> tuple[set, int]:
    """Every member of ``space``, unpruned, judged by the rules."""
    L = space.layers
    kept, total = set(), 0
    for tp, pp, cp, ep, etp, order in itertools.product(
        space.tp, space.pp, space.cp, space.ep, space.etp, space.orders
    ):
        top = -(-L // pp)
        ends = [None] + list(range(max(1, top - space.end_spread), top + 1)) if pp > 1 else [None]
        for vpp, first, last in itertools.product(space.vpp, ends, ends):
            t = TrainLayout(tp, pp, cp, ep, etp, vpp, first, last, order)
            for rc in space.recompute:
                for d in space.distributed_optimizer:
                    for o in space.offload:
                        m = Memory(rc, d, o)
                        for r in rollouts:
                            total += 1
                            if _judge(search, t, m, r):
                                kept.add((t, m, r))
    return kept, total


RC = (("none", None, None, None), ("full-uniform-1", "full", "uniform", 1))


def test_kept_set_equals_brute_force_layouts(moe_job):
    """World 8, Qwen3-30B-A3B: TP, PP, CP, EP, ETP, VPP and uneven stages, including sizes that do not
    divide (3): the planner's kept set is exactly the set ``check`` accepts."""
    _, job = moe_job
    space = Space(
        world=8,
        layers=48,
        heads=32,
        kv_heads=4,
        experts=128,
        orders=("tp-cp-ep-dp-pp",),
        tp=(1, 2, 3, 4),
        pp=(1, 2, 3, 4),
        cp=(1, 2, 3),
        ep=(1, 2, 4, 8),
        etp=(None, 1, 2),
        vpp=(None, 2),
        end_spread=1,
        recompute=RC[:1],
        distributed_optimizer=(True,),
        offload=(False,),
        rollout_tp=(2,),
        rollout_dp=(1,),
    )
    result = plan_job(job, space=space, keep_all=True)
    planned = {(p.layout, p.memory, p.rollout) for p in result.plans}
    search = _Search(job, find_device("h200"), result.margin, space)
    brute, total = _brute(search, space, [Rollout(2, 1, 1), Rollout(2, 1, 2)])
    assert planned == brute
    assert 10 < len(planned) < total / 4  # the test can fail both ways


def test_kept_set_equals_brute_force_memory_and_rollout(moe_job):
    """Recompute, distributed optimizer, offload and the rollout's TP / DP / EP, for two training layouts."""
    _, job = moe_job
    space = Space(
        world=8,
        layers=48,
        heads=32,
        kv_heads=4,
        experts=128,
        orders=("tp-cp-ep-dp-pp",),
        tp=(2,),
        pp=(1, 2),
        cp=(1,),
        ep=(4,),
        etp=(None,),
        vpp=(None,),
        uneven=False,
        end_spread=0,
        recompute=("auto",),
        rollout_tp=(1, 2, 3, 4, 8),
        rollout_dp=(1, 2, 3, 4, 8),
    )
    result = plan_job(job, space=space, keep_all=True)
    planned = {(p.layout, p.memory, p.rollout) for p in result.plans}
    search = _Search(job, find_device("h200"), result.margin, space)
    rollouts = [
        Rollout(tp, dp, ep) for tp in space.rollout_tp for dp in space.rollout_dp for ep in sorted({1, tp * dp, 2})
    ]
    from shardcheck.plan.space import recompute_options

    brute = set()
    for pp in space.pp:
        t = TrainLayout(2, pp, 1, 4, None, None, None, None, "tp-cp-ep-dp-pp")
        for rc in recompute_options(space, 48 // pp):
            for d in space.distributed_optimizer:
                for o in space.offload:
                    for r in rollouts:
                        if _judge(search, t, Memory(rc, d, o), r):
                            brute.add((t, Memory(rc, d, o), r))
    assert planned == brute
    assert {p[2] for p in planned} and len({p[1] for p in planned}) > 1


def test_best_first_top_equals_the_fastest_of_the_whole_space(moe_job):
    """The best-first search (lazy bound shapes, memory options listed only when their shape comes up)
    returns the fastest valid layouts: the same (ranked) times as the top of the whole kept set, judged one by
    one."""
    _, job = moe_job
    space = Space(
        world=8,
        layers=48,
        heads=32,
        kv_heads=4,
        experts=128,
        orders=("tp-cp-ep-dp-pp",),
        tp=(1, 2),
        pp=(1, 2),
        cp=(1, 2),
        ep=(1, 8),
        etp=(None,),
        vpp=(None, 2),
        uneven=False,
        end_spread=0,
        rollout_tp=(2,),
        rollout_dp=(1, 2),
    )

    def rounded(plans):  # plans are ranked by their time to 3 significant digits, then by fewest changed keys
        return sorted(float(f"{p.seconds:.3g}") for p in plans)

    everything = rounded(plan_job(job, space=space, keep_all=True).plans)
    for top in (1, 13, 60):
        best = plan_job(job, space=space, top=top, distinct=False)
        assert rounded(best.plans) == everything[:top]
        assert all(not errors_of(p.findings) for p in best.plans)
    assert len(everything) > 60 and len(set(everything[:60])) > 3


def test_every_plan_rereads_valid(moe_job):
    """The printed plans: the script re-read with their lines, resolved by verl's own resolution, passes
    every rule and holds the planned layout (``prove``)."""
    path, _ = moe_job
    result = plan_script(path, device="h200", top=3)
    assert result.proven and result.plans
    for plan in result.plans:
        job = resolve_script(path, extra_args=tuple(plan.lines))
        assert not errors_of(run_rules(replace(job, device_choice="H200-SXM-141GB"))[0]), plan.lines
        assert knob_view(job) == knob_view(plan.job)
    times = [p.seconds for p in result.plans]
    assert times == sorted(times) or max(times) - min(times) < 1e-3 * max(times)


def test_megatron_lm_plans_reread_valid():
    result = plan_script(MLM, device="h100", top=2)
    assert result.proven and result.plans
    for plan in result.plans:
        words = tuple(w for line in plan.lines for w in line.split())
        job = resolve_script(MLM, extra_args=words)
        assert not errors_of(run_rules(replace(job, device_choice="H100-SXM-80GB"))[0])
        assert plan.step.total > 0


def test_static_floor_and_lower_bound_hold(moe_job):
    """The memory floor never exceeds the estimate's peak, and the compute bound never exceeds the model's
    training seconds: pruning by them cannot drop a layout that fits, ordering by them cannot skip one."""
    _, job = moe_job
    search = _Search(job, find_device("h200"), 0.1, None)
    floor = _StaticFloor(search.job)
    checked = 0
    for t in list(train_layouts(search.space))[:60]:
        for m in (Memory(RC[0], True, False), Memory(RC[1], False, False)):
            _, cand = search.candidate(t, m, None)
            peak = _peak(cand)
            if peak is None:
                continue
            assert floor.bytes(t, m.distributed_optimizer) <= peak
            seconds = search.train_seconds(t, m, None)
            bound = search.lower_bound(t, m, None)
            refined = search.lower_bound(t, m, None, layout=True)
            if seconds is not None and bound is not None:
                assert bound <= refined * (1 + 1e-9)
                assert refined <= seconds * (1 + 1e-9)
                checked += 1
    assert checked > 20


@pytest.mark.parametrize("script", ["moe", "256k"])
def test_pipeline_floor_holds(moe_job, script):
    """A family's pipeline floor (TP, CP, PP) never exceeds the compute bound of any of its shapes and
    recomputes, so the search opens a family before any of its layouts could come up."""
    from shardcheck.plan.space import recompute_options

    if script == "moe":
        job = moe_job[1]
    else:
        job = replace(resolve_script(ROOT / "src/shardcheck/examples/qwen3_235b_256k.sh"), device_choice="910c")
    search = _Search(job, find_device("h200" if script == "moe" else "910c"), 0.1, None)
    families: dict = {}
    for t in train_layouts(search.space):
        families.setdefault(search.bound.family(t), []).append(t)
    checked = 0
    for layouts in list(families.values())[:40]:
        floor = search.bound.floor(layouts[0])
        for t in layouts[:30]:
            for rc in recompute_options(search.space, search._chunk(t)):
                bound = search.lower_bound(t, Memory(rc, True, False), None)
                if bound is not None:
                    assert floor <= bound * (1 + 1e-9), (t, rc)
                    checked += 1
    assert checked > 100


def test_leanest_memory_option_has_the_smallest_peak(moe_job):
    """The search drops a layout and recompute after one estimate when its leanest memory option does not fit:
    no other option of theirs (no distributed optimizer, no offload) may have a smaller training peak."""
    _, job = moe_job
    search = _Search(job, find_device("h200"), 0.1, None)
    checked = 0
    for t in list(train_layouts(search.space))[::7][:40]:
        for rc in RC:
            options = [Memory(rc, d, o) for d in (True, False) for o in (False, True)]
            peaks = {m: _peak(search.candidate(t, m, None)[1]) for m in options}
            lean = peaks[search.lean(options[0])]
            if lean is None:
                continue
            assert all(p is None or lean <= p for p in peaks.values()), (t, rc, peaks)
            checked += 1
    assert checked > 20


def test_estimate_shares_the_training_part_across_rollout_layouts(moe_job):
    """An estimate that takes the training part of a job differing only in its rollout sizes equals one made
    anew (the planner's rollout screen and judgements share it)."""
    from shardcheck.memory.estimate import estimate
    from shardcheck.plan.search import changes_of
    from shardcheck.plan.space import rollout_layouts

    _, job = moe_job
    search = _Search(job, find_device("h200"), 0.1, None)
    base = estimate(search.job, search.job.device_choice)
    checked = 0
    for r in list(rollout_layouts(search.space))[:12]:
        changes = changes_of(search.adapter, search.base, {"rollout_tp": r.tp, "rollout_dp": r.dp, "rollout_ep": r.ep})
        cand = search.adapter.apply(search.job, changes)
        fresh = estimate(cand, cand.device_choice)
        shared = estimate(cand, cand.device_choice, train_of=base)
        assert repr(shared) == repr(fresh)
        checked += 1
    assert checked >= 4


def test_cli_plan_json_schema(moe_job, capsys):
    from shardcheck.cli import main

    path, _ = moe_job
    assert main(["plan", str(path), "--device", "h200", "--top", "2", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == 1 and len(doc["plans"]) == 2
    plan = doc["plans"][0]
    assert set(plan["layout"]) >= {"tp", "pp", "cp", "ep", "etp", "vpp", "first", "last", "order", "recompute"}
    assert set(plan["rollout"]) == {"engine", "tp", "dp", "ep", "replicas"}
    assert set(plan["step_seconds"]) >= {"total", "rollout", "train"}
    assert plan["overrides"] and plan["changed_keys"] >= 1 and plan["peak_bytes"] > 0
    assert doc["current"]["layout"]["tp"] == 2


def test_cli_plan_bad_input(capsys):
    from shardcheck.cli import main

    assert (
        main(
            [
                "plan",
                "--model",
                "Qwen3-8B",
                "--world",
                "12",
                "--devices-per-node",
                "8",
                "--device",
                "h100",
                "--seq-len",
                "4096",
            ]
        )
        == 2
    )
    assert "multiple of --devices-per-node" in capsys.readouterr().err


# --- the step-time formulas against their sources ---------------------------------------------------


def _gpt(layers=24, hidden=2048, heads=16, vocab=51200) -> Architecture:
    return Architecture(
        model_type="gpt",
        num_layers=layers,
        hidden=hidden,
        ffn=4 * hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        vocab=vocab,
        tied=False,
        qk_layernorm=False,
        qkv_bias=False,
        gated=False,
    )


@pytest.mark.parametrize("layers,hidden,seq", [(24, 2048, 2048), (96, 12288, 2048), (80, 8192, 4096)])
def test_flops_reduce_to_narayanan_eq3(layers, hidden, seq):
    """Dense MHA, a 4h GeLU MLP, full attention (no causal halving) and full recompute: 4 forward passes of
    the layers and 3 of the output layer per token equal eq. 3 of Narayanan et al. 2021."""
    arch = _gpt(layers, hidden, hidden // 128)
    batch = 8
    per_token_layers = sum(sum(layer_flops(arch, i, seq)) for i in range(layers))
    ours = batch * seq * (4 * per_token_layers + 3 * 2 * hidden * arch.vocab)
    assert ours == pytest.approx(narayanan_flops(batch, seq, layers, hidden, arch.vocab), rel=1e-12)
    assert forward_flops_per_token(arch, seq) == pytest.approx(per_token_layers + 2 * hidden * arch.vocab)


def test_pipeline_bubble_matches_narayanan():
    """Uniform stages: (m + (p−1)/v)·t — the 1F1B bubble (p−1)/m and the interleaved (p−1)/(v·m)."""
    t, p, m = 2.0, 8, 32
    assert pipeline_time([t] * p, m) == pytest.approx((m + p - 1) * t)
    assert pipeline_time([t] * p, m, vpp=4) == pytest.approx((m + (p - 1) / 4) * t)
    assert pipeline_time([t, 3.0, t], 10) == pytest.approx(10 * 3.0 + 2 * t)


def _has(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


MEGATRON_AVAILABLE = _has("torch") and _has("megatron.core")  # the layout part against megatron-core (`verify`)


@pytest.mark.skipif(not MEGATRON_AVAILABLE, reason="needs shardcheck[verify] (torch, megatron-core)")
def test_layout_part_matches_megatron_core():
    """The planner's layouts (parallel sizes, VPP, uneven stages) over a raw product with non-divisors:
    megatron-core (initialize_model_parallel on the fake process group, TransformerConfig, the layer split)
    accepts exactly those."""
    world, layers, heads, experts = 8, 24, 24, 24
    space = Space(
        world=world,
        layers=layers,
        heads=heads,
        kv_heads=heads,
        experts=experts,
        orders=("tp-cp-ep-dp-pp",),
        tp=(1, 2, 3, 4),
        pp=(1, 2, 3, 4),
        cp=(1, 2, 3),
        ep=(1, 2, 3, 4),
        etp=(1, 2),
        vpp=(None, 2),
        end_spread=1,
    )
    planned = set(train_layouts(space))
    cases, raw = [], []
    for tp, pp, cp, ep, etp, vpp in itertools.product(space.tp, space.pp, space.cp, space.ep, space.etp, space.vpp):
        top = -(-layers // pp)
        ends = [None] + list(range(top - 1, top + 1)) if pp > 1 else [None]
        for first, last in itertools.product(ends, ends):
            raw.append(TrainLayout(tp, pp, cp, ep, etp, vpp, first, last, "tp-cp-ep-dp-pp"))
            model = {
                "num_layers": layers,
                "hidden_size": 48 * heads,
                "num_attention_heads": heads,
                "num_query_groups": heads,
                "num_moe_experts": experts,
                "ffn_hidden_size": 96,
                "moe_ffn_hidden_size": 48,
                "add_bias_linear": False,
            }
            if first is not None:
                model["num_layers_in_first_pipeline_stage"] = first
            if last is not None:
                model["num_layers_in_last_pipeline_stage"] = last
            cases.append(
                {
                    "world": world,
                    "tp": tp,
                    "pp": pp,
                    "cp": cp,
                    "ep": ep,
                    "etp": etp,
                    "vpp": vpp,
                    "order": "tp-cp-ep-dp-pp",
                    "model": model,
                }
            )
    proc = subprocess.run(
        [sys.executable, "-m", "shardcheck.verify.worker", "--jobs", "2"],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)
    accepted = {t for t, r in zip(raw, results) if r["valid"] and r["config_valid"]}
    assert planned == accepted
    assert 20 < len(accepted) < len(raw)
