"""The order ``plan`` shows its plans in: one row per distinct layout, and a plan a person would paste first.

- **Distinct**: plans that differ only in what the step time and the memory do not tell apart — the rollout's
  DP, the rank order, first / last stage sizes that spell the even split, the recompute, distributed optimizer
  and offload choices of one layout — are one row: its representative is the first of them in the order below.
- **Order**: never first a plan a rule warns about (fewest warning rules first); among plans within the step-time
  model's own error of the fastest (``MODEL_ERROR``, docs/step_time.md), the one that drops fewest of the
  script's memory savers (recompute, offload, distributed optimizer), then the fewest changed keys, then the
  fastest; the plans past that band by their time.
"""

from __future__ import annotations

from shardcheck.frameworks.megatron.pipeline import Split, split_layers

MODEL_ERROR = 0.03  # the step-time model's error the order treats as a tie (±3 %)


def warnings_of(plan, skip: tuple[str, ...]) -> frozenset[str]:
    """The rules that warn about the plan (the input's own words aside: no layout changes them)."""
    return frozenset(f.rule for f in plan.findings if f.severity == "warning" and not f.rule.startswith(skip))


def savers_lost(base: dict, knobs: dict) -> int:
    """How many of the script's memory savers the plan drops: recompute, offload, the distributed optimizer."""
    lost = 0
    if base.get("recompute_granularity") and not knobs.get("recompute_granularity"):
        lost += 1
    if base.get("param_offload") and knobs.get("param_offload") is False:
        lost += 1
    if base.get("distributed_optimizer") and knobs.get("distributed_optimizer") is False:
        lost += 1
    return lost


class Ranking:
    """Distinct keys and order keys of one search's plans (``base``: the script's knobs)."""

    def __init__(self, base: dict, layers: int, account: tuple[bool, bool], skip: tuple[str, ...]):
        self.base, self.layers, self.account, self.skip = base, layers, account, skip
        self.splits: dict[tuple, tuple] = {}

    def stages(self, t) -> tuple:
        """The layer count of each pipeline stage (first / last sizes that equal the even split are the same)."""
        key = (t.pp, t.first, t.last)
        if key not in self.splits:
            emb, loss = self.account
            split = split_layers(self.layers, t.pp, first=t.first, last=t.last, account_for_embedding=emb,
                                 account_for_loss=loss)  # fmt: skip
            self.splits[key] = tuple(split.stages) if isinstance(split, Split) else key
        return self.splits[key]

    def distinct(self, t, r) -> tuple:
        etp = t.etp if t.etp is not None else t.tp
        ro = (r.tp, r.ep) if r is not None else None
        return (t.tp, t.pp, t.cp, t.ep, etp, t.vpp or 1, self.stages(t), ro)

    def tie_key(self, plan, knobs: dict) -> tuple:
        """Within the band: savers dropped, changed keys, time."""
        return (savers_lost(self.base, knobs), len(plan.changes), plan.seconds)

    def order(self, plans: list, knobs_of) -> list:
        """``plans`` (valid, any order) as shown: one per distinct layout, in the order of the module's doc."""
        if not plans:
            return []
        warned = {id(p): len(warnings_of(p, self.skip)) for p in plans}
        fastest: dict[int, float] = {}
        for p in plans:
            w = warned[id(p)]
            fastest[w] = min(fastest.get(w, p.seconds), p.seconds)

        def key(p) -> tuple:
            w = warned[id(p)]
            if p.seconds <= fastest[w] * (1 + MODEL_ERROR):
                return (w, 0, *self.tie_key(p, knobs_of(p)))
            return (w, 1, 0, 0, p.seconds)

        out, seen = [], set()
        for p in sorted(plans, key=key):
            k = self.distinct(p.layout, p.rollout)
            if k not in seen:
                seen.add(k)
                out.append(p)
        return out
