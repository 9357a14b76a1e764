"""The model configs of Lightning-AI/litgpt (``litgpt/config.py``), mapped to the HF config.json field names.

litgpt describes each model it can load from the Hugging Face Hub (``hf_config``: org and name) with its own field
names; loading the HF weights into that model is what makes these sizes the model's own. The mapping (litgpt's
``Config`` after its ``__post_init__``, which fills its defaults; litgpt ``litgpt/config.py`` at the commit in
``COMMIT``):

    n_layer -> num_hidden_layers          n_embd -> hidden_size          n_head -> num_attention_heads
    n_query_groups -> num_key_value_heads head_size -> head_dim          intermediate_size -> intermediate_size
    moe_intermediate_size -> moe_intermediate_size                      padded_vocab_size -> vocab_size
    n_expert -> the family's expert key   n_expert_per_token -> num_experts_per_tok
    n_shared_expert -> n_shared_experts   first_k_dense_replace -> first_k_dense_replace
    latent_attention{q_lora_rank, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim} -> the same names

litgpt records no ``tie_word_embeddings``, no ``max_position_embeddings`` (its ``block_size`` is the context it
trains with, not the config's) and no ``model_type``: the first two are left out (``UNKNOWN``, the reader reports
them unknown), and ``model_type`` / ``architectures`` come only from ``FAMILIES``, each row naming a real
config.json of the family that shows them (checked by the build). tests/test_model_catalogue.py compares every
model litgpt shares with a real config.json source, field by field.
"""

from __future__ import annotations

import re
import sys
import types

REPO = "Lightning-AI/litgpt"
PATH = "litgpt/config.py"
COMMIT = "31e5fcaf8486d08001a2eda2579c45fea307c529"
UNKNOWN = ("tie_word_embeddings", "max_position_embeddings")

# (HF id pattern, model_type, architectures, expert key, witness): a family litgpt lists, what its real
# config.json files say, and one real config.json (an HF id read from a config.json source) that says it.
FAMILIES = (
    (r"^Qwen/(Qwen2\.5-(?!.*VL)|QwQ-)", "qwen2", "Qwen2ForCausalLM", None, "Qwen/Qwen2.5-7B"),
    (r"^Qwen/Qwen3-[\d.]+B(-Base|-Instruct-2507|-Thinking-2507)?$", "qwen3", "Qwen3ForCausalLM", None, "Qwen/Qwen3-8B"),
    (r"^Qwen/Qwen3-\d+B-A\d+B", "qwen3_moe", "Qwen3MoeForCausalLM", "num_experts", "Qwen/Qwen3-30B-A3B"),
    (
        r"^(meta-llama/(Llama-[23]|Meta-Llama-3)|codellama/|deepseek-ai/DeepSeek-R1-Distill-Llama-"
        r"|nvidia/Llama-3\.1-Nemotron-70B-Instruct-HF$)",
        "llama",
        "LlamaForCausalLM",
        None,
        "meta-llama/Llama-3.1-8B",
    ),
    (r"^mistralai/Mixtral-", "mixtral", "MixtralForCausalLM", "num_local_experts", "mistralai/Mixtral-8x7B-v0.1"),
)


def load(source: str) -> list[dict]:
    """litgpt's ``configs`` list, by running its config module (plain dicts and a dataclass; it imports only
    yaml and typing_extensions) in a namespace of its own."""
    module = types.ModuleType("litgpt_config")  # dataclasses look their module up in sys.modules
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, f"{REPO}/{PATH}", "exec"), module.__dict__)  # noqa: S102 - a pinned public data module
        return [(c, module.Config(**c)) for c in module.configs]
    finally:
        del sys.modules[module.__name__]


def family(hf_id: str) -> tuple | None:
    return next((row for row in FAMILIES if re.search(row[0], hf_id)), None)


def hf_config(config) -> dict:
    """One litgpt ``Config`` as the HF config.json fields it determines (see the module's mapping)."""
    out = {
        "num_hidden_layers": config.n_layer,
        "hidden_size": config.n_embd,
        "num_attention_heads": config.n_head,
        "num_key_value_heads": config.n_query_groups,
        "head_dim": config.head_size,
        "intermediate_size": config.intermediate_size,
        "vocab_size": config.padded_vocab_size,
    }
    if config.n_expert:
        if config.moe_intermediate_size:  # Mixtral: its experts are intermediate_size wide, as in its config.json
            out["moe_intermediate_size"] = config.moe_intermediate_size
        out["num_experts_per_tok"] = config.n_expert_per_token
        if config.n_shared_expert:
            out["n_shared_experts"] = config.n_shared_expert
        if config.first_k_dense_replace is not None:
            out["first_k_dense_replace"] = config.first_k_dense_replace
    if config.latent_attention:
        for key in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            out[key] = config.latent_attention[key]
    return out


def entries(source: str) -> dict[str, dict]:
    """HF id -> {"config", "source", "unknown"} for every model litgpt lists."""
    out = {}
    for raw, config in load(source):
        hf = raw.get("hf_config") or {}
        if not hf.get("org") or not hf.get("name"):
            continue
        hf_id = f"{hf['org']}/{hf['name']}"
        cfg = hf_config(config)
        row = family(hf_id)
        if row:
            cfg["model_type"], cfg["architectures"] = row[1], [row[2]]
            if config.n_expert:
                cfg[row[3] or "num_experts"] = config.n_expert
        elif config.n_expert:
            cfg["num_experts"] = config.n_expert
        src = {"repo": REPO, "path": f"{PATH} ({raw.get('name', hf['name'])})", "commit": COMMIT}
        out[hf_id] = {"config": cfg, "source": src, "unknown": list(UNKNOWN)}
    return out
