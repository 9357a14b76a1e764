"""Build shardcheck's bundled model catalogue from public copies of models' own config.json files.

Usage:
    python tools/build_model_catalogue.py [--mirrors DIR] [--check]

Nothing is invented here: an entry exists only where a model's real ``config.json`` was read, and each entry
records where: the repository, the path in it and the commit (for a Git source), or the page address and the
revision (for a copy read from huggingface.co and saved under ``tools/data/model_configs/``).

Sources, in the order they are read (a later source never replaces an earlier entry of the same HF id):

1. ``tools/data/model_configs/<Org>--<Name>.json``: ``{"url", "revision", "config"}``, the config.json of
   ``Org/Name`` as its Hugging Face page shows it (``url`` the page's address).
2. Git repositories that carry HF configs under ``<Org>--<Name>_config.json`` (GITS below), read with
   ``git show COMMIT:PATH`` from a bare mirror ``<mirrors>/<owner>+<name>/repo`` (what the search tool's
   ``fetch`` leaves): every such file in the repository's history, each at the last commit that wrote it.
3. Markdown notes holding config.json copies under a heading naming the model (NOTES below), at a pinned
   commit; only the headings listed there, each mapped to its HF id.
4. mlc-ai/mlc-llm's ``model_preset.py`` (MLC below): HF config.json dicts kept verbatim under MLC's own preset
   names; only the presets listed there, each mapped to the HF id its ``_name_or_path`` or name says.
5. Lightning-AI/litgpt's ``litgpt/config.py`` (tools/litgpt_configs.py): litgpt's own field names mapped to the
   HF ones; the fields litgpt does not record are left out and listed in the entry's ``unknown``. A model an
   earlier (config.json) source has keeps that entry; where litgpt's mapped facts disagree, the disagreement is
   printed (the build log).

Written to ``src/shardcheck/models/data/model_catalogue.json.gz``: ``{"about", "models": {hf_id: {"config",
"source"}}}``, each config cut down to the fields shardcheck's model reader uses (KEEP), the
``quantization_config`` and the nested ``text_config`` / ``llm_config`` / ``vision_config`` (cut the same way).
``--check`` rebuilds in memory and fails when the bundled file differs (for CI).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src/shardcheck/models/data/model_catalogue.json.gz"
SAVED = ROOT / "tools/data/model_configs"

# (repository, folders, path pattern with the HF org and name): repositories whose files are verbatim HF
# config.json (a mirror may lack the objects of other folders, so the history is read folder by folder).
GITS = (
    (
        "ai-dynamo/aiconfigurator",
        ("src/aiconfigurator/model_configs", "aic-core/src/aiconfigurator_core/model_configs"),
        re.compile(
            r"^(?:src/aiconfigurator|aic-core/src/aiconfigurator_core)/model_configs/"
            r"(?P<org>[A-Za-z0-9][A-Za-z0-9._-]*)--(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)_config\.json$"
        ),
    ),
)

# (repository, path, commit, {heading: HF id}): Markdown files holding config.json copies, each under a heading
# line naming the model (the heading's HF organisation is the model's own: Qwen, meta-llama).
NOTES = (
    (
        "citsjtu2020/LLM-Prof",
        "sglang/Model_Config.md",
        "8434c8d19c396b2f95d92a67845a7c0a0e0dd512",
        {
            "Llama-3.1-8B": "meta-llama/Llama-3.1-8B",
            "Llama-3.2-3B": "meta-llama/Llama-3.2-3B",
            **{n: f"Qwen/{n}" for n in ("Qwen2.5-3B", "Qwen2.5-14B", "Qwen3-4B", "Qwen3-14B")},
        },
    ),
)

# (repository, path, commit, {preset: HF id}): mlc-llm's presets whose HF id is sure: the preset's own
# ``_name_or_path`` (marked *) or a preset name that spells the HF model.
MLC = (
    "mlc-ai/mlc-llm",
    "python/mlc_llm/model/model_preset.py",
    "d1ea69a87280e821611643958bfec385b62dafd3",
    {
        "llama2_13b": "meta-llama/Llama-2-13b-hf",  # *
        "codellama_7b": "codellama/CodeLlama-7b-hf",  # *
        "phi-3_5": "microsoft/Phi-3.5-mini-instruct",  # * Phi-3.5-mini-instruct
        "phi-3_5-vision": "microsoft/Phi-3.5-vision-instruct",  # * Phi-3.5-vision-instruct
        "phi-4": "microsoft/Phi-4-mini-instruct",  # * Phi-4-mini-instruct
        "qwen2": "Qwen/Qwen1.5-1.8B-Chat",  # *
        "gemma3_1b_it": "google/gemma-3-1b-it",
    },
)

# The fields shardcheck's model reader (models/facts.py, models/architecture.py) and its rules read.
KEEP = frozenset(
    {
        "architectures",
        "model_type",
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "moe_intermediate_size",
        "shared_expert_intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "swa_num_key_value_heads",
        "head_dim",
        "num_experts",
        "n_routed_experts",
        "num_local_experts",
        "moe_num_experts",
        "num_experts_per_tok",
        "n_shared_experts",
        "first_k_dense_replace",
        "moe_layer_freq",
        "decoder_sparse_step",
        "mlp_only_layers",
        "tie_word_embeddings",
        "max_position_embeddings",
        "original_max_position_embeddings",
        "model_max_length",
        "rope_theta",
        "rope_scaling",
        "rope_parameters",
        "torch_dtype",
        "dtype",
        "attention_bias",
        "qk_norm",
        "use_qk_norm",
        "kv_lora_rank",
        "q_lora_rank",
        "qk_nope_head_dim",
        "qk_rope_head_dim",
        "v_head_dim",
        "layer_types",
        "full_attention_interval",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
        "num_nextn_predict_layers",
        "mtp_num_hidden_layers",
        "sliding_window",
        "use_sliding_window",
        "quantization_config",
    }
)
# Vision encoders: their sizes as the VL configs name them.
KEEP_VISION = KEEP | {"depth", "num_heads", "patch_size", "out_hidden_size", "spatial_merge_size", "image_size"}
NESTED = {"text_config": KEEP, "llm_config": KEEP, "vision_config": KEEP_VISION}


def compact(config: dict) -> dict:
    """The fields of an HF config.json the catalogue keeps (nested configs cut the same way)."""
    out = {k: v for k, v in config.items() if k in KEEP}
    for key, keep in NESTED.items():
        if isinstance(config.get(key), dict):
            out[key] = {k: v for k, v in config[key].items() if k in keep}
    return out


def usable(config: object) -> bool:
    """A decoder's config: a JSON object whose text part names its attention heads."""
    if not isinstance(config, dict):
        return False
    text = next((config[k] for k in ("text_config", "llm_config") if isinstance(config.get(k), dict)), config)
    return isinstance(text.get("num_attention_heads"), int)


def git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True, text=True).stdout


def from_git(repo: str, folders: tuple[str, ...], pattern: re.Pattern, mirrors: Path) -> dict[str, dict]:
    """Every ``Org--Name_config.json`` in ``repo``'s history, each at the last commit that wrote it."""
    mirror = mirrors / repo.replace("/", "+") / "repo"
    if not mirror.is_dir():
        sys.exit(f"{mirror}: no mirror of {repo}; fetch github:{repo} first (or pass --mirrors)")
    listed = git(mirror, "log", "--all", "--name-only", "--format=", "--", *folders).split()
    paths = sorted({p for p in listed if pattern.match(p)})
    found: dict[str, tuple[int, dict]] = {}
    for path in paths:
        commit, when = git(mirror, "log", "--all", "-1", "--diff-filter=AM", "--format=%H %ct", "--", path).split()
        try:
            config = json.loads(git(mirror, "show", f"{commit}:{path}"))
        except json.JSONDecodeError as exc:
            print(f"{repo}:{path}@{commit}: not JSON ({exc.msg}); skipped", file=sys.stderr)
            continue
        if not usable(config):
            print(f"{repo}:{path}: no num_attention_heads; skipped", file=sys.stderr)
            continue
        m = pattern.match(path)
        hf_id = f"{m['org']}/{m['name']}"
        entry = {"config": compact(config), "source": {"repo": repo, "path": path, "commit": commit}}
        if hf_id not in found or int(when) > found[hf_id][0]:
            found[hf_id] = (int(when), entry)
    return {k: v for k, (_, v) in found.items()}


def from_notes(repo: str, path: str, commit: str, headings: dict[str, str], mirrors: Path) -> dict[str, dict]:
    """The config.json copies in a Markdown file, each a JSON object right after its heading line."""
    mirror = mirrors / repo.replace("/", "+") / "repo"
    text = git(mirror, "show", f"{commit}:{path}")
    out = {}
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^(?P<name>[A-Za-z0-9._-]+)\n(?=\{)", text, re.M):
        if m["name"] not in headings:
            continue
        config, _ = decoder.raw_decode(text, m.end())
        if usable(config):
            source = {"repo": repo, "path": f"{path} ({m['name']})", "commit": commit}
            out[headings[m["name"]]] = {"config": compact(config), "source": source}
    missing = set(headings.values()) - set(out)
    if missing:
        sys.exit(f"{repo}:{path}: no config under {sorted(missing)}")
    return out


def from_mlc(repo: str, path: str, commit: str, presets: dict[str, str], mirrors: Path) -> dict[str, dict]:
    """The listed presets of mlc-llm's model_preset.py (a module holding one dict literal, read with ast)."""
    import ast

    mirror = mirrors / repo.replace("/", "+") / "repo"
    tree = ast.parse(git(mirror, "show", f"{commit}:{path}"))
    table = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict)
    )
    found = {ast.literal_eval(k): ast.literal_eval(v) for k, v in zip(table.keys, table.values, strict=True)}
    out = {}
    for preset, hf_id in presets.items():
        if not usable(found.get(preset)):
            sys.exit(f"{repo}:{path}@{commit}: no usable preset {preset!r}")
        source = {"repo": repo, "path": f"{path} ({preset})", "commit": commit}
        out[hf_id] = {"config": compact(found[preset]), "source": source}
    return out


def from_litgpt(mirrors: Path) -> dict[str, dict]:
    """litgpt's configs, mapped to HF names (tools/litgpt_configs.py)."""
    import litgpt_configs as lit

    mirror = mirrors / lit.REPO.replace("/", "+") / "repo"
    if not mirror.is_dir():
        sys.exit(f"{mirror}: no mirror of {lit.REPO}; fetch github:{lit.REPO} first (or pass --mirrors)")
    return lit.entries(git(mirror, "show", f"{lit.COMMIT}:{lit.PATH}"))


def disagreements(real: dict, mapped: dict) -> list[str]:
    """The fields where a mapped entry's config differs from a real config.json's (the text part of a VL one)."""
    text = next((real[k] for k in ("text_config", "llm_config") if isinstance(real.get(k), dict)), real)
    heads = text.get("num_attention_heads")
    implied = {"num_key_value_heads": heads, "head_dim": (text.get("hidden_size") or 0) // (heads or 1)}
    return [
        f"{k}: {text.get(k, implied.get(k))!r} (config.json) vs {v!r}"
        for k, v in mapped.items()
        if text.get(k, implied.get(k)) != v
    ]


def from_saved() -> dict[str, dict]:
    """The config.json copies read from huggingface.co pages, saved as ``Org--Name.json``."""
    out = {}
    for file in sorted(SAVED.glob("*--*.json")):
        saved = json.loads(file.read_text())
        org, name = file.stem.split("--", 1)
        if not usable(saved.get("config")) or not saved.get("url"):
            sys.exit(f"{file}: needs a config with num_attention_heads and the url it was read from")
        source = {"url": saved["url"], "revision": saved.get("revision") or "main"}
        out[f"{org}/{name}"] = {"config": compact(saved["config"]), "source": source}
    return out


def build(mirrors: Path) -> dict:
    models: dict[str, dict] = {}
    sources = (
        from_saved(),
        *(from_git(*source, mirrors) for source in GITS),
        *(from_notes(*source, mirrors) for source in NOTES),
        from_mlc(*MLC, mirrors),
    )
    for found in sources:
        for hf_id, entry in found.items():
            models.setdefault(hf_id, entry)
    import litgpt_configs as lit

    for pattern, model_type, arch, _, witness in lit.FAMILIES:
        real = models.get(witness, {}).get("config", {})
        if real.get("model_type") != model_type or arch not in real.get("architectures", ()):
            sys.exit(f"litgpt family {pattern}: its witness {witness} is not a {model_type} {arch} config.json")
    for hf_id, entry in from_litgpt(mirrors).items():
        if hf_id in models:
            for what in disagreements(models[hf_id]["config"], entry["config"]):
                print(f"{hf_id}: litgpt disagrees, the config.json kept: {what}", file=sys.stderr)
        else:
            models[hf_id] = entry
    return {
        "about": "Architecture facts of open models, cut from their published config.json; each entry names "
        "the public copy it was read from. Built by tools/build_model_catalogue.py.",
        "models": dict(sorted(models.items(), key=lambda kv: kv[0].lower())),
    }


def encode(data: dict) -> bytes:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="where the bare mirrors are")
    parser.add_argument("--check", action="store_true", help="fail when the bundled catalogue is not current")
    args = parser.parse_args()
    data = build(args.mirrors)
    blob = encode(data)
    if args.check:
        if not OUT.is_file() or OUT.read_bytes() != blob:
            sys.exit(f"{OUT} is not what the sources give; run tools/build_model_catalogue.py")
        return
    OUT.write_bytes(blob)
    print(f"{OUT}: {len(data['models'])} models, {len(blob)} bytes")


if __name__ == "__main__":
    main()
