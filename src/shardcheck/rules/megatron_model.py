"""Megatron-Core ``TransformerConfig`` checks and the model-build checks a verl config reaches.

megatron/core/transformer/transformer_config.py (``__post_init__``),
megatron/core/transformer/transformer_block.py (``get_num_layers_to_build``),
megatron/core/transformer/moe/moe_layer.py (``BaseMoELayer.__init__``). The attention-head and layer-split
rules follow the job's megatron-core minor (0.9 … 0.19: frameworks/megatron/attention_split.py and
frameworks/megatron/pipeline.py, each differential-tested against that minor); the others megatron-core 0.16.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

from shardcheck.frameworks.megatron.attention_split import heads_error, query_groups_error
from shardcheck.frameworks.megatron.pipeline import Split, SplitError, split_layers
from shardcheck.frameworks.megatron.versions import DEFAULT, as_tuple
from shardcheck.frameworks.verl.provider import PROVIDER_DEFAULTS
from shardcheck.job import Job, MegatronLayout
from shardcheck.origin import Traced
from shardcheck.problems import Kind
from shardcheck.rules.base import Finding, engines, finding, need, rule, where
from shardcheck.rules.divisors import divisors


def _valid(n: int, ok) -> str:
    """The values in 1..n that ``ok`` accepts (past 4096 only divisors of ``n`` are tried: every caller's
    ``ok`` accepts only divisors there, and trying each number up to a hostile ``n`` would take hours)."""
    return ", ".join(str(d) for d in (range(1, n + 1) if n <= 4096 else divisors(n)) if ok(d))


@rule("MCORE-TC-HEADS-TP", "error", "Attention heads must divide by TP", needs_model=True, engine="megatron")
def heads_tp(job: Job) -> Iterator[Finding]:
    """
    Tensor parallelism splits the attention heads over TP ranks, so the head count must be a
    multiple of TP.

    Why:
    `TransformerConfig.__post_init__` raises `ValueError: num_attention_heads (H) must be a
    multiple of tensor_model_parallel_size (TP).` when verl builds the model.

    Fix:
    Pick a TP that divides the head count.

    Source:
    megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__ (megatron-core 0.16.1).
    """
    heads = job.model.num_attention_heads
    for e in engines(job):
        tp = need(e.tp, f"{e.key_prefix}.tensor_model_parallel_size")
        text = heads_error(heads, tp) if heads else None
        if text:
            yield finding(
                "MCORE-TC-HEADS-TP",
                f"[{e.role}] {job.model.name} has {heads} attention heads, not a multiple of TP {tp} "
                f'(megatron-core: "{text}")',
                where(e.tp),
                fix=f"TP must divide {heads}: {_valid(heads, lambda d: heads % d == 0)}",
                role=e.role,
            )


@rule(
    "MCORE-TC-QG-TP",
    "error",
    "KV heads (query groups) must be a multiple of TP (from megatron-core 0.16: or a divisor)",
    needs_model=True,
    engine="megatron",
)
def query_groups_tp(job: Job) -> Iterator[Finding]:
    """
    With grouped-query attention the KV heads (`num_query_groups`, HF `num_key_value_heads`) are
    split over TP ranks, or, from megatron-core 0.16, replicated when TP is a multiple of them.

    Why:
    `TransformerConfig.__post_init__` raises `ValueError: num_query_groups (G) must be a multiple
    or divisor of tensor_model_parallel_size (TP).`

    Versions:
    megatron-core 0.9-0.15 accept only a multiple of TP: `ValueError: num_query_groups (G) must be a
    multiple of tensor_model_parallel_size (TP).` (2 KV heads at TP 8 fails there, starts on 0.16+).

    Fix:
    Choose TP that divides the KV heads (or, on megatron-core 0.16+, is a multiple of them).

    Source:
    megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__ (megatron-core
    0.9.0-0.15: groups % TP == 0; 0.16.1-0.19: or TP % groups == 0).
    """
    groups = job.model.num_key_value_heads or job.model.num_attention_heads
    version = job.megatron_core_version
    for e in engines(job):
        tp = need(e.tp, f"{e.key_prefix}.tensor_model_parallel_size")
        text = query_groups_error(groups, tp, version) if groups else None
        if text is None:
            continue
        if as_tuple(version) >= (0, 16):
            what = "neither a multiple nor a divisor of"
            fix = (
                f"a TP that divides {groups} or is a multiple of it, e.g. "
                f"{_valid(max(groups, 16), lambda d: groups % d == 0 or d % groups == 0)}"
            )
        else:
            what = "not a multiple of"
            fix = (
                f"TP must divide {groups} on megatron-core {version}: {_valid(groups, lambda d: groups % d == 0)} "
                "(megatron-core 0.16+ also takes a multiple of it)"
            )
        yield finding(
            "MCORE-TC-QG-TP",
            f'[{e.role}] {job.model.name} has {groups} KV heads, {what} TP {tp} ({_quoting(version)}: "{text}")',
            where(e.tp),
            fix=fix,
            role=e.role,
        )


def _quoting(version: str) -> str:
    """Who is quoted: the minor named when it is not the one the differential tests install by default."""
    return "megatron-core" if version == DEFAULT else f"megatron-core {version}"


GDN_SINCE = (0, 16)  # megatron-core's first minor with experimental_attention_variant="gated_delta_net"
GDN_TP_CP_SINCE = (0, 18)  # from here the Gated DeltaNet heads split over TP·CP (context parallel supported)


@rule(
    "MCORE-TC-GDN-TP",
    "error",
    "Gated DeltaNet heads must divide by TP (and CP)",
    needs_model=True,
    engine="megatron",
)
def gated_deltanet_tp(job: Job) -> Iterator[Finding]:
    """
    The Gated DeltaNet layers of Qwen3-Next and Qwen3.5 (built through Megatron-Bridge or mbridge with
    `experimental_attention_variant="gated_delta_net"`) split their key and value heads
    (`linear_num_key_heads`, `linear_num_value_heads`) over TP, and from megatron-core 0.18 over TP·CP.
    These are not the attention heads: a TP the attention heads and KV heads accept can still split the
    Gated DeltaNet heads unevenly (the bad case: 16 attention heads, 2 KV heads, 4 key heads at TP 8).

    Why:
    `TransformerConfig.__post_init__` asserts, on 0.16 and 0.17, `linear_num_key_heads must be a multiple
    of tensor_model_parallel_size.` (and the same for the value heads), and refuses CP > 1 (`Gated delta net
    does not support context parallel for now, but got self.context_parallel_size=N.`); on 0.18 and 0.19
    `self.linear_num_key_heads=K must be a multiple of (self.tensor_model_parallel_size=T *
    self.context_parallel_size=C).`

    Fix:
    Pick a TP (times CP) that divides both head counts; on megatron-core 0.16/0.17 keep CP at 1.

    Source:
    megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__ (megatron-core 0.16.1,
    0.17, 0.18 and 0.19; earlier minors have no Gated DeltaNet).
    """
    from shardcheck.models.architecture import NotModelled, gated_deltanet

    try:
        gdn = gated_deltanet(job.model)
    except NotModelled:
        return
    version = tuple(int(p) for p in job.megatron_core_version.split(".")[:2])
    if gdn is None or version < GDN_SINCE:
        return
    for e in engines(job):
        tp = need(e.tp, f"{e.key_prefix}.tensor_model_parallel_size")
        cp = need(e.cp, f"{e.key_prefix}.context_parallel_size")
        joint = version >= GDN_TP_CP_SINCE
        if not joint and cp > 1:
            yield finding(
                "MCORE-TC-GDN-TP",
                f"[{e.role}] CP {cp} with the Gated DeltaNet layers of {job.model.name} (megatron-core "
                f'{job.megatron_core_version}: "Gated delta net does not support context parallel for now, but got '
                f'self.context_parallel_size={cp}.")',
                where(e.cp),
                fix=f"{e.key_prefix}.context_parallel_size=1 (or megatron-core ≥ 0.18)",
                role=e.role,
            )
        split = tp * cp if joint else tp
        for name, heads in (("linear_num_key_heads", gdn.key_heads), ("linear_num_value_heads", gdn.value_heads)):
            if heads % split == 0:
                continue
            if joint:
                text = (
                    f"self.{name}={heads} must be a multiple of (self.tensor_model_parallel_size={tp} * "
                    f"self.context_parallel_size={cp})."
                )
                what = f"TP {tp} · CP {cp}"
            else:
                text = f"{name} must be a multiple of tensor_model_parallel_size."
                what = f"TP {tp}"
            counts = " and ".join(dict.fromkeys(map(str, (gdn.key_heads, gdn.value_heads))))
            good = _valid(
                min(gdn.key_heads, gdn.value_heads), lambda d: gdn.key_heads % d == 0 and gdn.value_heads % d == 0
            )
            yield finding(
                "MCORE-TC-GDN-TP",
                f"[{e.role}] {job.model.name} has {heads} Gated DeltaNet {name.split('_')[2]} heads, not a multiple "
                f'of {what} (megatron-core {job.megatron_core_version}: "{text}")',
                where(e.tp, e.cp),
                fix=f"{'TP · CP' if joint else 'TP'} must divide {counts}: {good}",
                role=e.role,
            )
            break  # the first failing assertion stops the build


@rule(
    "MCORE-TC-MOE-EP-NOEXP",
    "error",
    "Expert parallelism needs a model with experts",
    needs_model=True,
    engine="megatron",
)
def ep_needs_experts(job: Job) -> Iterator[Finding]:
    """
    EP > 1 splits routed experts over ranks; a dense model has none.

    Why:
    `TransformerConfig.__post_init__` raises `ValueError: num_moe_experts must be non None to use
    expert-parallel.`

    Fix:
    Set EP to 1, or use a MoE model.

    Source:
    megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__ (megatron-core 0.16.1).
    """
    if job.model.is_moe:
        return
    for e in engines(job):
        ep = need(e.ep, f"{e.key_prefix}.expert_model_parallel_size")
        if ep > 1:
            yield finding(
                "MCORE-TC-MOE-EP-NOEXP",
                f"[{e.role}] EP {ep} but {job.model.name} is a dense model (megatron-core: "
                '"num_moe_experts must be non None to use expert-parallel.")',
                where(e.ep),
                fix=f"{e.key_prefix}.expert_model_parallel_size=1",
                role=e.role,
            )


@rule("MCORE-BUILD-EXPERTS-EP", "error", "Routed experts must divide by EP", needs_model=True, engine="megatron")
def experts_ep(job: Job) -> Iterator[Finding]:
    """
    Each EP rank holds `num_moe_experts / EP` local experts; the count must divide evenly (ETP
    does not matter here).

    Why:
    `BaseMoELayer.__init__` asserts `num_moe_experts % expert_model_parallel_size == 0` (a bare
    AssertionError) while the model is built, after weights start loading.

    Fix:
    Choose EP that divides the number of routed experts.

    Source:
    megatron/core/transformer/moe/moe_layer.py, BaseMoELayer.__init__ (megatron-core 0.16.1).
    """
    experts = job.model.num_experts
    if not experts:
        return
    for e in engines(job):
        ep = need(e.ep, f"{e.key_prefix}.expert_model_parallel_size")
        if experts % ep:
            yield finding(
                "MCORE-BUILD-EXPERTS-EP",
                f"[{e.role}] {job.model.name} has {experts} routed experts, not divisible by EP {ep} "
                "(megatron-core asserts num_moe_experts % expert_model_parallel_size == 0)",
                where(e.ep),
                fix=f"EP must divide {experts}: {_valid(experts, lambda d: experts % d == 0)}",
                role=e.role,
            )


STAGE_LIMIT = 4096  # pipeline stages listed one by one; a larger PP is not split here


def layer_split(layout: MegatronLayout, num_layers: int, version: str = DEFAULT) -> Split | SplitError | None:
    """The pipeline split of ``layout`` on megatron-core ``version`` (None when a value it needs is unknown or a
    layout string is used)."""
    values = (
        layout.pp,
        layout.vpp,
        layout.first_stage_layers,
        layout.last_stage_layers,
        layout.account_for_embedding,
        layout.account_for_loss,
    )
    if not all(v.known for v in values) or (layout.layout_string.known and layout.layout_string.value):
        return None
    if not isinstance(layout.pp.value, int) or layout.pp.value > STAGE_LIMIT:
        return None  # past what shardcheck lists stage by stage (mesh and the rank rules still judge the sizes)
    return _split(
        num_layers,
        layout.pp.value,
        layout.first_stage_layers.value,
        layout.last_stage_layers.value,
        layout.vpp.value,
        bool(layout.account_for_embedding.value),
        bool(layout.account_for_loss.value),
        version,
    )


@lru_cache(maxsize=256)
def _split(num_layers, pp, first, last, vpp, emb, loss, version):
    return split_layers(
        num_layers,
        pp,
        first=first,
        last=last,
        vpp=vpp,
        account_for_embedding=emb,
        account_for_loss=loss,
        version=version,
    )


def _split_findings(job: Job, rule_id: str, kind: Kind) -> Iterator[Finding]:
    layers = job.model.num_hidden_layers
    if not layers:
        return
    for e in engines(job):
        need(e.pp, f"{e.key_prefix}.pipeline_model_parallel_size")
        need(e.vpp, f"{e.key_prefix}.virtual_pipeline_model_parallel_size")
        need(e.first_stage_layers, f"{e.key_prefix}.override_transformer_config.num_layers_in_first_pipeline_stage")
        need(e.last_stage_layers, f"{e.key_prefix}.override_transformer_config.num_layers_in_last_pipeline_stage")
        result = layer_split(e, layers, job.megatron_core_version)
        if not isinstance(result, SplitError) or result.kind is not kind:
            continue
        first, last = e.first_stage_layers.value, e.last_stage_layers.value
        uneven = first is not None or last is not None
        facts = f"{layers} layers, PP {e.pp.value}"
        if uneven:
            facts += (
                f", first stage {first if first is not None else '-'}, last stage {last if last is not None else '-'}"
            )
        if e.vpp.value is not None:
            facts += f", VPP {e.vpp.value}"
        said = _quoting(job.megatron_core_version)
        if result.starts:
            quoted = f"{result.message}; {said} does not check this: the job starts with another model than configured"
        elif result.raised in ("ZeroDivisionError", "TypeError"):
            quoted = f'{said} raises {result.raised}: "{result.message}"'
        else:
            quoted = f'{said}: "{result.message}"'

        lost = _lost_split(job, e)
        yield finding(
            rule_id,
            f"[{e.role}] {facts}: {quoted}{lost}",
            where(e.first_stage_layers, e.last_stage_layers, e.pp, e.vpp) if uneven or lost else where(e.pp, e.vpp),
            fix=_split_fix(e, layers),
            role=e.role,
            severity="warning" if result.starts else None,
        )


def _lost_split(job: Job, e: MegatronLayout) -> str:
    """Why an engine lacks the actor's uneven split, when an override replaced the inherited dict."""
    actor = job.layout("actor")
    if actor is None or e is actor or e.first_stage_layers.origin.first_script_line() is None:
        return ""
    if e.first_stage_layers.known and e.first_stage_layers.value is not None:
        return ""
    had = [t.value for t in (actor.first_stage_layers, actor.last_stage_layers) if t.known and t.value is not None]
    if not had:
        return ""
    word = e.first_stage_layers.origin.first_script_line()
    return (
        f" (the actor's first/last stage layers are not inherited: line {word.line} replaced the "
        f"inherited {e.key_prefix}.override_transformer_config with a new dict)"
    )


_TRIED = 1 << 16  # first/last stage sizes tried for a fix text


def _split_fix(e: MegatronLayout, layers: int) -> str:
    pp, vpp = e.pp.value, e.vpp.value
    first, last = e.first_stage_layers.value, e.last_stage_layers.value
    base = f"{e.key_prefix}.override_transformer_config"
    if first is None and last is None:
        fits = [
            p for p in range(1, min(layers, 64) + 1) if layers % p == 0 and (vpp is None or (layers // p) % vpp == 0)
        ]
        options = []
        for f in range(1, min(layers, _TRIED)):  # the first few are shown: never a loop to a hostile layer count
            if (
                pp > 2
                and (layers - 2 * f) > 0
                and (layers - 2 * f) % (pp - 2) == 0
                and (vpp is None or (f % vpp == 0 and ((layers - 2 * f) // (pp - 2)) % vpp == 0))
            ):
                options.append(f)
                if len(options) == 8:
                    break
        text = f"a PP dividing {layers}: {', '.join(map(str, fits))}"
        if options:
            text += (
                f"; or keep PP {pp} with an uneven split: +{base}.num_layers_in_first_pipeline_stage=F and "
                f"+{base}.num_layers_in_last_pipeline_stage=F with F in {', '.join(map(str, options[:8]))}"
            )
        return text
    fixes = []
    if pp > 2:
        for f in range(1, min(layers, _TRIED)):
            rest = layers - 2 * f
            if rest > 0 and rest % (pp - 2) == 0 and (vpp is None or (f % vpp == 0 and (rest // (pp - 2)) % vpp == 0)):
                fixes.append(f)
                if len(fixes) == 8:
                    break
    if fixes:
        return (
            f"with PP {pp}, first = last = F layers works for F in {', '.join(map(str, fixes[:8]))} "
            f"({base}.num_layers_in_first/last_pipeline_stage)"
        )
    return f"choose first/last stage layers so the other {pp - 2 if pp > 2 else 0} stages get equal whole layers"


@rule(
    "MCORE-TC-UNEVEN-POS",
    "error",
    "First/last pipeline stage layer counts must be positive",
    needs_model=True,
    engine="megatron",
    problems=(Kind.SPLIT_UNEVEN_POS,),
)
def tc_uneven_pos(job: Job) -> Iterator[Finding]:
    """
    `num_layers_in_first_pipeline_stage` / `num_layers_in_last_pipeline_stage`, when set, must be > 0.

    Why:
    `TransformerConfig.__post_init__` raises `ValueError: num_layers_in_first_pipeline_stage must be larger than 0`.

    Versions:
    From megatron-core 0.11. Before (the fields are `first_pipeline_num_layers` / `last_pipeline_num_layers`)
    nothing checks the count: the first / last stage builds what it is given.

    Fix:
    Remove the override or set a positive number of layers.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ and
    megatron/core/transformer/transformer_block.py get_num_layers_to_build (megatron-core 0.9.0 … 0.19.0, each
    minor its own: frameworks/megatron/pipeline.py).
    """
    return _split_findings(job, "MCORE-TC-UNEVEN-POS", Kind.SPLIT_UNEVEN_POS)


@rule(
    "MCORE-TC-UNEVEN-MIDDLE",
    "error",
    "Uneven pipeline: the middle stages must get equal whole layers",
    needs_model=True,
    engine="megatron",
    problems=(Kind.SPLIT_UNEVEN_MIDDLE,),
)
def tc_uneven_middle(job: Job) -> Iterator[Finding]:
    """
    With an uneven split, the layers left after the first/last stage (M = L − first − last) are
    shared equally by the S remaining stages: M > 0 exactly when S > 0, and M % S == 0.

    Why:
    `TransformerConfig.__post_init__` raises `ValueError: Mismatch: M middle layers remaining but S
    middle PP stages available.` or `number of layers at middle stage: M must be divisible bythe
    middle pipeline model parallel size S`.

    Versions:
    0.9/0.10: only `get_num_layers_to_build` asserts `With uneven pipelineing the left over layers must be
    divisible by left over stages` on the middle ranks. 0.11/0.12: the middle check divides by the middle
    stages even when none is left: PP 2 with both stages set fails with `ZeroDivisionError: integer modulo by
    zero`. 0.13-0.15 accept no middle stage, or an empty one. 0.16+: the `Mismatch` text.

    Fix:
    Choose first/last so that (L − first − last) divides by PP − 2 (or by PP − 1 with only one of them).

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ and
    megatron/core/transformer/transformer_block.py get_num_layers_to_build (megatron-core 0.9.0 … 0.19.0, each
    minor its own: frameworks/megatron/pipeline.py).
    """
    return _split_findings(job, "MCORE-TC-UNEVEN-MIDDLE", Kind.SPLIT_UNEVEN_MIDDLE)


@rule(
    "MCORE-TC-UNEVEN-VPP",
    "error",
    "Uneven pipeline with VPP: each stage's layers must divide by VPP",
    needs_model=True,
    engine="megatron",
    problems=(Kind.SPLIT_UNEVEN_VPP,),
)
def tc_uneven_vpp(job: Job) -> Iterator[Finding]:
    """
    With the interleaved schedule every pipeline stage is split into VPP chunks: the first, last and
    middle stages' layer counts must each divide by VPP.

    Why:
    `TransformerConfig.__post_init__` raises `ValueError: number of layers at first stage: Xmust be
    divisible by virtual pipelineparallel degree V` (Megatron's text, spaces missing as in the source).

    Versions:
    0.9/0.10 refuse uneven stages with VPP altogether (`get_num_layers_to_build` asserts `Uneven number of
    layer not compatible with interleaved pipeline schedule`); the per-stage checks from 0.11.

    Fix:
    Make first, last and the middle-stage layer counts multiples of VPP, or drop VPP.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ and
    megatron/core/transformer/transformer_block.py get_num_layers_to_build (megatron-core 0.9.0 … 0.19.0, each
    minor its own: frameworks/megatron/pipeline.py).
    """
    return _split_findings(job, "MCORE-TC-UNEVEN-VPP", Kind.SPLIT_UNEVEN_VPP)


@rule(
    "MCORE-TC-UNEVEN-ACCOUNT",
    "error",
    "Uneven first/last stages exclude account_for_embedding/loss",
    needs_model=True,
    engine="megatron",
    problems=(Kind.SPLIT_UNEVEN_ACCOUNT,),
)
def tc_uneven_account(job: Job) -> Iterator[Finding]:
    """
    `num_layers_in_first/last_pipeline_stage` cannot be combined with
    `account_for_embedding_in_pipeline_split` or `account_for_loss_in_pipeline_split`.

    Why:
    `get_num_layers_to_build` asserts "Does not support standalone embedding stage and standalone
    loss stage with uneven pp" when the model is built.

    Versions:
    From megatron-core 0.11 (before it there is no account_* field at all: MCORE-TC-ACCOUNT-SPLIT).

    Fix:
    Remove one of the two override groups.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ and
    megatron/core/transformer/transformer_block.py get_num_layers_to_build (megatron-core 0.9.0 … 0.19.0, each
    minor its own: frameworks/megatron/pipeline.py).
    """
    return _split_findings(job, "MCORE-TC-UNEVEN-ACCOUNT", Kind.SPLIT_UNEVEN_ACCOUNT)


@rule(
    "MCORE-BUILD-NEGATIVE-STAGE",
    "warning",
    "The uneven split builds another layer count than the model has",
    needs_model=True,
    engine="megatron",
    problems=(Kind.SPLIT_NEGATIVE_STAGE,),
)
def build_negative_stage(job: Job) -> Iterator[Finding]:
    """
    With an uneven split, `num_layers_in_first_pipeline_stage + num_layers_in_last_pipeline_stage`
    larger than the layer count leaves the middle stages a negative number of layers; with no middle
    stage, first + last other than the layer count builds more or fewer layers than the model has.

    Why:
    megatron-core does not check it: `get_num_layers_to_build` returns the negative count and those
    stages build no layers, so the job starts with another model than the one configured (a warning:
    shardcheck's own check; there is no Megatron error text).

    Versions:
    0.16+: negative middle stages (the middle check passes on e.g. −2 layers over 2 stages). 0.13-0.15 also
    accept PP 2 with first + last ≠ L. 0.9/0.10 return the first / last stage's count unchecked (0 or negative
    included).

    Fix:
    Lower the first/last stage layer counts.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ and
    megatron/core/transformer/transformer_block.py get_num_layers_to_build (megatron-core 0.9.0 … 0.19.0, each
    minor its own: frameworks/megatron/pipeline.py).
    """
    return _split_findings(job, "MCORE-BUILD-NEGATIVE-STAGE", Kind.SPLIT_NEGATIVE_STAGE)


@rule(
    "MCORE-TC-ACCOUNT-SPLIT",
    "error",
    "With account_for_embedding/loss, L+e+l must split evenly over PP (and VPP)",
    needs_model=True,
    engine="megatron",
    problems=(Kind.SPLIT_ACCOUNT,),
)
def tc_account_split(job: Job) -> Iterator[Finding]:
    """
    When the embedding and/or loss count as a layer in the pipeline split, L + e + l must divide by
    PP, and the per-stage count by VPP.

    Why:
    `TransformerConfig.__post_init__` raises `ValueError: number of middle layers: N must be
    divisible by middle pipeline_model_parallel_size P`.

    Versions:
    Before 0.11 `TransformerConfig` has no such field: `TypeError: TransformerConfig.__init__() got an
    unexpected keyword argument 'account_for_embedding_in_pipeline_split'`. 0.11 without VPP checks
    L % (PP − e − l) (`ZeroDivisionError: integer modulo by zero` when no stage is left); 0.12+ (L+e+l) % PP.

    Fix:
    Change PP, or drop one of the account_* overrides.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ and
    megatron/core/transformer/transformer_block.py get_num_layers_to_build (megatron-core 0.9.0 … 0.19.0, each
    minor its own: frameworks/megatron/pipeline.py).
    """
    return _split_findings(job, "MCORE-TC-ACCOUNT-SPLIT", Kind.SPLIT_ACCOUNT)


@rule(
    "MCORE-BUILD-LAYERS-PP",
    "error",
    "Even pipeline split: layers must divide by PP",
    needs_model=True,
    engine="megatron",
    problems=(Kind.SPLIT_LAYERS_PP,),
)
def build_layers_pp(job: Job) -> Iterator[Finding]:
    """
    Without an uneven split, every pipeline stage builds L / PP layers.

    Why:
    `TransformerConfig` accepts any L and PP; the model build then asserts `num_layers should be
    divisible by pipeline_model_parallel_size` (get_num_layers_to_build), after weights start loading.

    Versions:
    0.9/0.10 do not check it: every stage builds ⌊L / PP⌋ layers (30 layers on PP 4: 7, 7, 7, 7, 28 of 30)
    and the job starts with another model; a warning there. 0.11-0.16 assert `num_layers should be divisible
    by pipeline_model_parallel_size`; 0.17+ `num_layers=30 should be divisible by
    config.pipeline_model_parallel_size=4`.

    Fix:
    Choose PP dividing the layers, or set num_layers_in_first/last_pipeline_stage.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ and
    megatron/core/transformer/transformer_block.py get_num_layers_to_build (megatron-core 0.9.0 … 0.19.0, each
    minor its own: frameworks/megatron/pipeline.py).
    """
    return _split_findings(job, "MCORE-BUILD-LAYERS-PP", Kind.SPLIT_LAYERS_PP)


@rule(
    "MCORE-BUILD-VPP",
    "error",
    "Even split with VPP: layers per stage must divide by VPP",
    needs_model=True,
    engine="megatron",
    problems=(Kind.SPLIT_VPP,),
)
def build_vpp(job: Job) -> Iterator[Finding]:
    """
    With the interleaved schedule each stage's L / PP layers are split into VPP chunks.

    Why:
    `get_num_layers_to_build` asserts `num_layers_per_pipeline_rank N should be divisible by
    vp_size V` when the model is built.

    Versions:
    0.9/0.10 do not check it (each chunk builds ⌊L / PP / VPP⌋ layers: a warning, another model); 0.11 asserts
    `num_layers_per_pipeline_rank should be divisible by vp_size`; 0.12+ name the counts.

    Fix:
    Choose a VPP dividing L / PP.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ and
    megatron/core/transformer/transformer_block.py get_num_layers_to_build (megatron-core 0.9.0 … 0.19.0, each
    minor its own: frameworks/megatron/pipeline.py).
    """
    return _split_findings(job, "MCORE-BUILD-VPP", Kind.SPLIT_VPP)


_RECOMPUTE = "override_transformer_config"


@rule(
    "MCORE-TC-RECOMPUTE",
    "error",
    "Activation recompute settings must be a combination Megatron-Core accepts",
    engine="megatron",
)
def recompute(job: Job) -> Iterator[Finding]:
    """
    `recompute_granularity` is `full` or `selective`; `full` needs `recompute_method` `block` or
    `uniform` and a `recompute_num_layers`; `selective` forbids `recompute_num_layers`.

    Why:
    `TransformerConfig.__post_init__` raises e.g. `ValueError: Using recompute_granularity: full
    so recompute_method must be "block" or "uniform"` when verl builds the model.

    Fix:
    Set all three for full recompute, or use `selective` without `recompute_num_layers`.

    Source:
    megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__ (megatron-core 0.16.1).
    """
    for e in engines(job):
        ov = e.transformer_overrides
        gran_t = ov.get("recompute_granularity")
        if gran_t is None:
            continue
        gran = need(gran_t, f"{e.key_prefix}.{_RECOMPUTE}.recompute_granularity")
        if gran is None:
            continue
        method_t = ov.get("recompute_method", Traced(None, gran_t.origin))
        layers_t = ov.get("recompute_num_layers", Traced(None, gran_t.origin))
        method = need(method_t, f"{e.key_prefix}.{_RECOMPUTE}.recompute_method")
        layers = need(layers_t, f"{e.key_prefix}.{_RECOMPUTE}.recompute_num_layers")
        message = fix = None
        at = gran_t
        if gran not in ("full", "selective"):
            message = f'When using recompute_granuarlity: {gran} must be "full"or "selective".'
            fix = "recompute_granularity=full or selective"
        elif method is not None and method not in ("block", "uniform"):
            message, at = f'recompute_method: {method} must be "block" or "uniform".', method_t
            fix = "recompute_method=uniform (or block)"
        elif method is None and gran != "selective":
            message = f'Using recompute_granularity: {gran} so recompute_method must be "block" or "uniform"'
            fix = f"+{e.key_prefix}.{_RECOMPUTE}.recompute_method=uniform"
        elif gran != "selective" and layers is None:
            message = (
                f"When using recompute_granularity: {gran} recompute_num_layers must be between 1 and "
                "num_layers_per_pipeline_rank"
            )
            fix = f"+{e.key_prefix}.{_RECOMPUTE}.recompute_num_layers=1"
        elif gran == "selective" and layers is not None:
            message, at = f"When using recompute_granularity: {gran} recompute_num_layers must be None.", layers_t
            fix = "remove recompute_num_layers"
        if message:
            yield finding(
                "MCORE-TC-RECOMPUTE", f'[{e.role}] megatron-core: "{message}"', where(at), fix=fix, role=e.role
            )


def _provider_value(e: MegatronLayout, name: str) -> tuple[object, Traced | None]:
    """What the Megatron config gets for ``name``: the user's override, else what verl sets."""
    ov = e.transformer_overrides
    if name in ov:
        return need(ov[name], f"{e.key_prefix}.{_RECOMPUTE}.{name}"), ov[name]
    return PROVIDER_DEFAULTS[name], None


@rule(
    "MCORE-TC-MOE-DISPATCH",
    "error",
    "The MoE token dispatcher must support verl's variable sequence lengths",
    frameworks=("verl",),
    engine="megatron",
)
def moe_dispatch(job: Job) -> Iterator[Finding]:
    """
    verl packs sequences of different lengths and sets `variable_seq_lengths=True` and the
    `alltoall` dispatcher on the Megatron config; an `override_transformer_config` that switches
    to the `allgather` dispatcher, or enables DeepEP without the `flex` dispatcher, is rejected.

    Why:
    `TransformerConfig.__post_init__` raises `ValueError: Token dispatcher type: allgather does not
    support variable sequence length, please use alltoall dispatcher instead.` or `DeepEP backend
    is only supported with flex token dispatcher.`

    Fix:
    Remove the dispatcher override, or use `alltoall` / `flex`.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ (megatron-core
    0.16.1); verl/workers/engine/megatron/transformer_impl.py _build_tf_config (verl 0.9.1).
    """
    for e in engines(job):
        dispatcher, d_origin = _provider_value(e, "moe_token_dispatcher_type")
        variable, v_origin = _provider_value(e, "variable_seq_lengths")
        deepep, p_origin = _provider_value(e, "moe_enable_deepep")
        if deepep and dispatcher != "flex":
            yield finding(
                "MCORE-TC-MOE-DISPATCH",
                f"[{e.role}] moe_enable_deepep with the {dispatcher} dispatcher (megatron-core: "
                '"DeepEP backend is only supported with flex token dispatcher.")',
                where(*(o for o in (p_origin, d_origin) if o is not None)),
                fix="moe_token_dispatcher_type=flex",
                role=e.role,
            )
        elif dispatcher == "allgather" and variable is True:
            yield finding(
                "MCORE-TC-MOE-DISPATCH",
                f"[{e.role}] the allgather dispatcher with verl's variable_seq_lengths=True (megatron-core: "
                '"Token dispatcher type: allgather does not support variable sequence length, please use '
                'alltoall dispatcher instead.")',
                where(*(o for o in (d_origin, v_origin) if o is not None)),
                fix=f"remove {e.key_prefix}.{_RECOMPUTE}.moe_token_dispatcher_type (verl uses alltoall)",
                role=e.role,
            )
