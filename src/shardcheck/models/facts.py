"""Model architecture facts: from a local HF ``config.json``, ``--model-config FILE``, or a built-in preset."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from shardcheck.errors import InputError
from shardcheck.inputs import files, read_policy
from shardcheck.job import ModelFacts
from shardcheck.origin import Origin

_PRESETS = Path(__file__).with_name("data") / "presets.json"
# Keys under which HF configs spell the routed expert count (presets.md, "num_experts").
_EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")

# Model types with linear-attention layers whose config.json may not list `layer_types`
# (Qwen3-Next: Gated DeltaNet layers, full attention every few layers).
_LINEAR_ATTENTION_TYPES = frozenset({"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"})


def presets() -> dict[str, dict]:
    return json.loads(_PRESETS.read_text())["models"]


# Where a vision-language config.json keeps its language model: transformers' text_config (Qwen2.5-VL,
# Gemma 3, Llama 4), InternVL's llm_config (configuration_internvl_chat.py), DeepSeek-VL2's language_config.
TEXT_KEYS = ("text_config", "llm_config", "language_config")


def text_part(config: dict) -> tuple[dict, str | None]:
    """The language model's part of a config and the key it sits under (None: the config is one)."""
    for key in TEXT_KEYS:
        if isinstance(config.get(key), dict):
            return config[key], key
    return config, None


def facts_from_config(config: dict, name: str, source: str, origin: Origin) -> ModelFacts:
    """Read the fields the rules need from an HF config dict (the text part of a multimodal model)."""
    from shardcheck.models.quantization import read_quantization

    cfg, text_key = text_part(config)
    experts = next((cfg[k] for k in _EXPERT_KEYS if isinstance(cfg.get(k), int) and cfg.get(k)), None)
    heads = cfg.get("num_attention_heads")
    kv = cfg.get("num_key_value_heads", heads)
    return ModelFacts(
        name=name,
        source=source,
        origin=origin,
        num_hidden_layers=cfg.get("num_hidden_layers"),
        num_attention_heads=heads,
        num_key_value_heads=kv,
        hidden_size=cfg.get("hidden_size"),
        num_experts=experts,
        num_experts_per_tok=cfg.get("num_experts_per_tok"),
        vocab_size=cfg.get("vocab_size"),
        max_position_embeddings=cfg.get("max_position_embeddings"),
        model_type=cfg.get("model_type"),
        vision_model_type=config.get("model_type") if isinstance(config.get("vision_config"), dict) else None,
        linear_attention="linear_attention" in (cfg.get("layer_types") or ())
        or cfg.get("model_type") in _LINEAR_ATTENTION_TYPES,
        mla=bool(cfg.get("kv_lora_rank")) or bool((cfg.get("mla") or {}).get("kv_lora_rank")),
        config=dict(cfg),
        rope_scaling=_rope(cfg),
        model_max_length=cfg.get("model_max_length"),
        quantization=read_quantization(config) or read_quantization(cfg),
        vision_config=config.get("vision_config") if isinstance(config.get("vision_config"), dict) else None,
        text_key=text_key,
    )


def _rope(cfg: dict) -> dict | None:
    """The RoPE scaling dict, with ``rope_type`` filled from the legacy ``type`` key (as transformers does)."""
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(rope, dict) and rope and all(isinstance(v, dict) for v in rope.values()):
        rope = next(iter(rope.values()))  # per layer type (transformers 5); vLLM assumes one factor
    if not isinstance(rope, dict):
        return None
    if "rope_type" not in rope and "type" in rope:
        rope = {**rope, "rope_type": rope["type"]}
    return rope


def model_config_file(given: str | Path) -> Path:
    """The config.json that ``--model-config`` names: the file itself, or ``config.json`` in a model folder
    (as ``from_pretrained`` reads a folder). A folder without one is bad input, said in one line."""
    path = Path(given)
    if not files.is_directory(path):
        return path
    inside = path / "config.json"
    if files.is_regular(inside):
        return inside
    why = "has a config.json that is not a regular file" if os.path.lexists(inside) else "has no config.json"
    raise files.UnreadableFile(path, f"is a folder that {why}", "give the model's folder or its HF config.json")


def read_config_json(path: Path, *, source: str | None = None, name: str | None = None) -> ModelFacts:
    """The facts of the config.json at ``path``; ``source`` names where it was found (default: the path),
    ``name`` the model when its folder does not (a cache snapshot's folder is a commit)."""
    text = files.read_regular_text(path, limit=files.CONFIG_LIMIT, what="give an HF config.json")
    config = parse_config(text, path)
    name = config.get("_name_or_path") or name or path.parent.name
    origin = Origin(kind="model", path=str(path), line=1, text=f"config.json of {name}")
    return facts_from_config(config, str(name), source or f"config.json at {path}", origin)


def parse_config(text: str, path: Path | str) -> dict:
    """An HF config.json's dict, its fields of the types shardcheck reads; InputError (one line) otherwise."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); give an HF config.json") from None
    except (ValueError, RecursionError) as exc:  # a number past 4,300 digits; arrays nested thousands deep
        why = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long to read"
        raise InputError(f"{path}:1: not a usable config.json ({why}); give an HF config.json") from None
    check_config(config, text, path)
    return config


def check_config(config: object, text: str, where: str | Path) -> None:
    """An HF model config (its text part names the attention heads) whose every field shardcheck reads has the
    JSON type it needs; InputError at ``where``:line otherwise (``text``: the JSON as written, for the line)."""
    if (
        not isinstance(config, dict)
        or any(config.get(k) is not None and not isinstance(config[k], dict) for k in TEXT_KEYS)
        or "num_attention_heads" not in text_part(config)[0]
    ):
        raise InputError(f"{where}:1: not an HF model config (no num_attention_heads); give the model's config.json")
    _check_types(config, text, where)


# The fields shardcheck reads as whole numbers, and whether 0 is a value they may hold (an HF config may
# also write null for the optional ones). Anything else is bad input at its line, never arithmetic on it.
_WHOLE = {
    "num_attention_heads": 1,
    "num_hidden_layers": 1,
    "hidden_size": 1,
    "num_key_value_heads": 1,
    "intermediate_size": 0,
    "moe_intermediate_size": 0,
    "shared_expert_intermediate_size": 0,
    "vocab_size": 1,
    "max_position_embeddings": 1,
    "original_max_position_embeddings": 1,
    "model_max_length": 1,
    "head_dim": 1,
    "kv_lora_rank": 0,
    "q_lora_rank": 0,
    "qk_nope_head_dim": 0,
    "qk_rope_head_dim": 0,
    "v_head_dim": 0,
    "num_experts_per_tok": 0,
    "n_shared_experts": 0,
    "first_k_dense_replace": 0,
    "decoder_sparse_step": 0,
    "linear_num_key_heads": 1,
    "linear_num_value_heads": 1,
    "linear_key_head_dim": 1,
    "linear_value_head_dim": 1,
    "linear_conv_kernel_dim": 1,
    "full_attention_interval": 1,
    "num_nextn_predict_layers": 0,
    "mtp_num_hidden_layers": 0,
    **dict.fromkeys(_EXPERT_KEYS, 0),
}
# The fields read (or passed on to the framework) as real numbers: the open lower bound each must exceed.
_REAL = {"rope_theta": 0, "partial_rotary_factor": 0}
_ROPE_REAL = {"factor": 0, "rope_theta": 0}  # in rope_scaling / rope_parameters (per layer type in transformers 5)
_ROPE_WHOLE = {"original_max_position_embeddings": 1}
# Past 2^53 a JSON number is no longer exact in most readers (a double), and no model has such a size.
_LARGEST = 1 << 53
_SHAPES = {
    "layer_types": list,
    "mlp_only_layers": list,
    "rope_scaling": dict,
    "rope_parameters": dict,
    "model_type": str,
    "quantization_config": dict,
}


def whole_problem(value, low: int) -> str | None:
    """What is wrong with ``value`` as a whole number ≥ ``low`` (at most 2^53), or None."""
    import math

    wanted = f"a whole number ≥ {low}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is not {wanted}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"is not a finite number ({wanted})"
    if value > _LARGEST:
        return f"is too large (> 2^53; {wanted})"
    if value < low:
        return f"is {'negative' if value < 0 else f'less than {low}'} ({wanted})"
    if isinstance(value, float):
        return f"is not {wanted}"
    return None


def real_problem(value, above: float) -> str | None:
    """What is wrong with ``value`` as a finite number > ``above`` (at most 2^53), or None."""
    import math

    wanted = f"a number > {above}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is not {wanted}"
    if not math.isfinite(value):
        return f"is not a finite number ({wanted})"
    if value > _LARGEST:
        return f"is too large (> 2^53; {wanted})"
    if value <= above:
        return f"is {'negative' if value < 0 else 'zero' if value == 0 else 'too small'} ({wanted})"
    return None


def _field_problems(section: dict):
    """(key, value, what is wrong) for each field of a config section that shardcheck cannot read."""
    for key, value in section.items():
        if value is None:
            continue
        why = None
        if key in _WHOLE:
            why = whole_problem(value, _WHOLE[key])
        elif key in _REAL:
            why = real_problem(value, _REAL[key])
        elif key in _SHAPES and not isinstance(value, _SHAPES[key]):
            why = f"is not a JSON {_SHAPES[key].__name__.replace('dict', 'object').replace('str', 'string')}"
        elif key in ("rope_scaling", "rope_parameters"):
            ropes = value.values() if value and all(isinstance(v, dict) for v in value.values()) else [value]
            for rope in ropes:
                for inner, v in rope.items():
                    if v is None:
                        continue
                    if inner in _ROPE_REAL:
                        why = real_problem(v, _ROPE_REAL[inner])
                    elif inner in _ROPE_WHOLE:
                        why = whole_problem(v, _ROPE_WHOLE[inner])
                    if why:
                        yield f"{key}.{inner}", v, why
                        break
                if why:
                    break
            continue
        if why:
            yield key, value, why


def _check_types(config: dict, text: str, path: str | Path) -> None:
    """Every field shardcheck reads has the JSON type it needs: a whole or real number in range (finite,
    at most 2^53), a list, a dict."""
    import re

    for section in (config, *(config.get(k) for k in TEXT_KEYS)):
        if not isinstance(section, dict):
            continue
        for key, value, why in _field_problems(section):
            m = re.search(rf'"{re.escape(key.rpartition(".")[2])}"\s*:', text)
            line = text.count("\n", 0, m.start()) + 1 if m else 1
            shown = json.dumps(value)
            shown = shown if len(shown) <= 40 else shown[:39] + "…"
            raise InputError(f'{path}:{line}: "{key}": {shown} {why}; give the model\'s config.json')


def match_preset(component: str) -> str | None:
    """The preset named by a path's last component: its exact name or a declared alias (case-insensitive),
    never a prefix: an Instruct or Base model's config differs from the one a prefix would pick."""
    key = component.lower()
    for name, entry in presets().items():
        if key == name.lower() or key in (a.lower() for a in entry.get("aliases", ())):
            return name
    return None


def nearest_preset(component: str) -> str | None:
    """The longest preset name that prefixes ``component`` (for the "not this one" hint only)."""
    key = component.lower()
    hits = [n for n in presets() if key.startswith((n.lower() + "-", n.lower() + "_"))]
    return max(hits, key=len) if hits else None


def load_model(
    path_text: str | None, path_known: bool, model_config: str | None = None, *, base: Path | None = None
) -> tuple[ModelFacts | None, str | None]:
    """Model facts for the job, and a one-line problem when none could be found.

    ``path_text`` is the model path with unknown pieces left as placeholders; a path whose last
    component is known can still name a preset (``${WORK_DIR}/Qwen3-8B``).
    """
    if model_config is not None:
        return read_config_json(model_config_file(model_config)), None
    text = path_text
    if not text or "__shardcheck_unknown_" in text.rstrip("/").rsplit("/", 1)[-1]:
        return None, "the model path is unknown; pass --model-config config.json"
    try:
        local = Path(text).expanduser() if not text.startswith(("hdfs://", "s3://", "gs://")) else None
    except RuntimeError:  # ~user of a user this machine does not have
        local = None
    if local is not None and not local.is_absolute() and base is not None:
        local = base / local
    if local is not None and path_known:
        candidate = local / "config.json" if files.is_directory(local) else local
        if files.is_regular(candidate) and candidate.name.endswith(".json"):
            refused = read_policy.refusal(candidate)  # a path the script names: the source policy
            if refused is None:
                return read_config_json(candidate), None
            return _by_name_instead(text, candidate, refused)
    return _by_name(text, path_known)


def _by_name_instead(text: str, candidate: Path, refused: str) -> tuple[ModelFacts | None, str | None]:
    """A config.json the read policy refuses: the preset or catalogued model of the same name, the report saying
    the file was not read (so a model at /models/Qwen3-8B outside the script's tree is still judged)."""
    facts, problem = _by_name(text, True)
    not_read = f"the model's config.json is not read: {refused}, or pass --model-config"
    if facts is None:
        return None, not_read
    note = f"{facts.source}, by name ({candidate} not read: see {read_policy.ALLOW_OPTION})"
    origin = replace(facts.origin, text=f"{facts.origin.text}; {candidate} not read ({refused})")
    return replace(facts, source=note, origin=origin), problem


def _by_name(text: str, path_known: bool) -> tuple[ModelFacts | None, str | None]:
    """The model the path names when no config.json of its own is read: the Hugging Face cache, the built-in
    preset, the bundled catalogue (models/catalogue.py, loaded only then), then the Hub under ``--online``."""
    from shardcheck.models import sources

    component = text.rstrip("/").rsplit("/", 1)[-1]
    cached = sources.from_cache(text)  # by repository id, or by the last part of a path
    if cached is not None:
        return cached
    preset = match_preset(component)
    if preset is None:
        found = sources.from_catalogue(text) or (sources.from_hub(text) if path_known else None)
        if found is not None:
            return found
        near = nearest_preset(component)
        hint = f" ({near} is a different model: its config may differ)" if near else ""
        return None, (
            f"no config.json at {text}, none in the Hugging Face cache, no built-in preset and no catalogued model "
            f"named {component!r}{hint}{sources.hub_hint(text)}; pass --model-config config.json"
        )
    entry = presets()[preset]
    how = "named" if preset.lower() == component.lower() else f"the declared alias {component!r}"
    origin = Origin(kind="model", text=f"built-in preset {preset} ({how}; source {entry.get('source', '?')})")
    return facts_from_config(entry, preset, f"built-in preset {preset}", origin), None
