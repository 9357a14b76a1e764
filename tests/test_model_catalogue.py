"""The bundled model catalogue (issue 28, item 2): open models' config.json facts, found by HF id or path tail.

The catalogue (src/shardcheck/models/data/model_catalogue.json.gz) is built by tools/build_model_catalogue.py
from public copies of the models' own config.json; these tests read it as shipped, and small catalogues
written here for the ambiguous and corrupt cases.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shardcheck.models import catalogue
from shardcheck.models.architecture import NotModelled, architecture
from shardcheck.models.facts import load_model, read_config_json

ROOT = Path(__file__).resolve().parent.parent
MIRRORS = Path(os.environ.get("SHARDCHECK_MIRRORS", "/work/.mirror"))  # where fetch leaves the bare mirrors
ENTRIES = json.loads(gzip.decompress(catalogue.DATA.read_bytes()))["models"]
# what the model reader derives; name, source and origin say where the facts came from and differ by design
COMPARED = [f.name for f in dataclasses.fields(catalogue.ModelFacts) if f.name not in ("name", "source", "origin")]


def _write(path: Path, models: dict) -> Path:
    path.write_bytes(gzip.compress(json.dumps({"about": "test", "models": models}).encode()))
    return path


def test_catalogue_loads_with_a_source_for_every_entry():
    assert len(catalogue.names()) == len(ENTRIES) >= 300
    for hf_id, entry in ENTRIES.items():
        assert hf_id.count("/") == 1, hf_id
        source = entry["source"]
        assert (source.get("repo") and source.get("path") and len(source.get("commit", "")) == 40) or source.get(
            "url"
        ), hf_id


@pytest.mark.parametrize("hf_id", sorted(ENTRIES))
def test_every_entry_reads_as_its_config_json_would(hf_id, tmp_path):
    """The same reader and checks as a config.json on disk: same facts; the architecture counted or refused
    with NotModelled, never another exception."""
    got = catalogue.lookup(hf_id)
    (tmp_path / "config.json").write_text(json.dumps(ENTRIES[hf_id]["config"], indent=2))
    on_disk = read_config_json(tmp_path / "config.json")
    assert {k: getattr(got, k) for k in COMPARED} == {k: getattr(on_disk, k) for k in COMPARED if k != "unknown"} | {
        "unknown": set(ENTRIES[hf_id].get("unknown", ()))
    }
    assert got.name == hf_id and got.source.startswith(f"catalogue: {hf_id}, from ")
    assert got.num_attention_heads  # (Nemotron-H lists its layers in layers_block_type: no num_hidden_layers)
    try:
        architecture(got)
    except NotModelled:
        pass


def _litgpt():
    """tools/litgpt_configs.py and litgpt's config module at its pinned commit (from the fetched mirror)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import litgpt_configs as lit
    finally:
        sys.path.pop(0)
    mirror = MIRRORS / lit.REPO.replace("/", "+") / "repo"
    if not mirror.is_dir():
        pytest.skip(f"no mirror of {lit.REPO} at {mirror} (fetch github:{lit.REPO})")
    show = ["git", "-C", str(mirror), "show", f"{lit.COMMIT}:{lit.PATH}"]
    return lit, lit.entries(subprocess.run(show, capture_output=True, text=True, check=True).stdout)


def _counted(facts):
    try:
        return architecture(facts)
    except NotModelled as exc:  # Mixtral: neither config names moe_intermediate_size
        return str(exc)


def test_litgpt_mapping_agrees_with_every_real_config_json_it_shares():
    """Every model litgpt lists that a config.json source also gives: each mapped field equals the config.json's
    (num_key_value_heads and head_dim as the reader derives them when config.json leaves them out), and the
    architectures shardcheck counts from the two are the same. The one known disagreement is litgpt's vocab for
    Mixtral-8x22B-v0.1 (it shares the Instruct model's 32768; the base config.json says 32000)."""
    lit, mapped = _litgpt()
    real = {k: v for k, v in ENTRIES.items() if "litgpt" not in str(v["source"].get("repo"))}
    shared = sorted(set(mapped) & set(real))
    assert len(shared) >= 25
    known = {("mistralai/Mixtral-8x22B-v0.1", "vocab_size")}
    for hf_id in shared:
        cfg = real[hf_id]["config"]
        cfg = cfg.get("text_config", cfg)
        derived = {
            "num_key_value_heads": cfg["num_attention_heads"],
            "head_dim": cfg["hidden_size"] // cfg["num_attention_heads"],
        }
        for key, value in mapped[hf_id]["config"].items():
            if (hf_id, key) not in known:
                assert cfg.get(key, derived.get(key)) == value, (hf_id, key)
        if lit.family(hf_id) and (hf_id, "vocab_size") not in known:
            facts = catalogue.facts(hf_id, {**mapped[hf_id], "unknown": []})
            untied = dict(
                mapped[hf_id],
                config={**mapped[hf_id]["config"], "tie_word_embeddings": cfg.get("tie_word_embeddings", False)},
            )
            assert _counted(catalogue.facts(hf_id, untied)) == _counted(catalogue.lookup(hf_id)), hf_id
            assert facts.num_experts == catalogue.lookup(hf_id).num_experts, hf_id


def test_litgpt_entries_leave_out_what_litgpt_does_not_record():
    _, mapped = _litgpt()
    for hf_id, entry in ENTRIES.items():
        if entry["source"].get("repo") == "Lightning-AI/litgpt":
            assert hf_id in mapped and entry["config"] == mapped[hf_id]["config"], hf_id
            assert not {"tie_word_embeddings", "max_position_embeddings"} & set(entry["config"]), hf_id
            assert entry["unknown"] == ["tie_word_embeddings", "max_position_embeddings"], hf_id


def test_a_field_the_source_does_not_record_is_unknown_not_a_default():
    """Qwen2.5-7B-Instruct comes from litgpt: no max_position_embeddings and no tie_word_embeddings. The reader
    says so; the memory count stops on the tie rather than assuming untied."""
    from shardcheck.memory.params import Sharding, StageParams, stage_params
    from shardcheck.origin import UnknownValue

    facts = catalogue.lookup("Qwen/Qwen2.5-7B-Instruct")
    assert facts.max_position_embeddings is None and facts.unknown == {"tie_word_embeddings", "max_position_embeddings"}
    assert "not recorded there: tie_word_embeddings, max_position_embeddings" in facts.source
    with pytest.raises(UnknownValue, match="max_position_embeddings"):
        facts.max_positions()
    arch = architecture(facts)
    assert arch.tied is None and arch.model_type == "qwen2" and arch.qkv_bias
    layers = tuple(range(arch.num_layers))
    with pytest.raises(UnknownValue, match="tie_word_embeddings is not recorded"):
        stage_params(arch, layers, 0, Sharding(1, 1, 1, 1))  # one stage: output layer shared or not
    two = Sharding(1, 1, 1, 2)
    last = stage_params(arch, layers[14:], 1, two)  # a last stage without the embedding has its own output layer
    assert isinstance(last, StageParams) and last.output == arch.vocab * arch.hidden
    assert catalogue.lookup("Qwen/Qwen2.5-7B").max_positions() == 131072  # a config.json: known
    assert architecture(catalogue.lookup("Qwen/Qwen2.5-7B")).tied is False


@pytest.mark.parametrize(
    ("model", "rule"), [("Qwen2.5-7B-Instruct", "VALUE-UNKNOWN"), ("Qwen2.5-7B", "VERL-RO-MAXLEN")]
)
def test_a_max_model_len_against_an_unrecorded_limit_is_unknown_not_valid(tmp_path, model, rule):
    """max_model_len 200000: the config.json's limit (131072) makes it verl's error; litgpt's entry records no
    limit, so the check is undecided (VALUE-UNKNOWN naming max_position_embeddings), never silently valid."""
    from shardcheck.api import check
    from shardcheck.rules.examples import verl_launch

    script = tmp_path / "run.sh"
    overrides = (
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4 actor_rollout_ref.rollout.name=vllm "
        "actor_rollout_ref.rollout.max_model_len=200000"
    )
    script.write_text(verl_launch(overrides, model=f"Qwen/{model}").replace("/models/Qwen/", "Qwen/"))
    result = check(script, env={})
    assert result.job.model.name.endswith(model)  # Qwen2.5-7B: the built-in preset (a config.json copy)
    hits = [f for f in result.findings if f.rule == rule]
    assert hits and result.valid is not True
    if rule == "VALUE-UNKNOWN":
        assert any("max_position_embeddings" in f.message for f in hits)


def test_lookup_by_hf_id_and_by_path_tail_case_insensitive():
    by_id = catalogue.lookup("Qwen/Qwen3.5-27B")
    assert by_id.name == "Qwen/Qwen3.5-27B" and by_id.num_hidden_layers == 64
    assert catalogue.lookup("$HOME/models/qwen3.5-27b").name == "Qwen/Qwen3.5-27B"
    assert catalogue.lookup("/data/ckpt/Qwen/QWEN3.5-27B/").name == "Qwen/Qwen3.5-27B"
    assert "from ai-dynamo/aiconfigurator@" in by_id.source


def test_a_miss_is_none():
    assert catalogue.lookup("$HOME/models/my-own-finetune-7B") is None
    assert catalogue.lookup("") is None


def test_an_ambiguous_tail_names_the_candidates_and_an_id_still_decides(tmp_path):
    config = ENTRIES["Qwen/Qwen3-8B"]["config"]
    src = {"url": "https://example.invalid/config.json", "revision": "main"}
    data = _write(
        tmp_path / "c.json.gz",
        {"A/Tiny-1B": {"config": config, "source": src}, "B/tiny-1b": {"config": config, "source": src}},
    )
    with pytest.raises(catalogue.Ambiguous, match=r"'Tiny-1B' names 2 catalogued models \(A/Tiny-1B, B/tiny-1b\)"):
        catalogue.lookup("/models/Tiny-1B", data)
    assert catalogue.lookup("b/TINY-1B", data).name == "B/tiny-1b"


def test_load_model_uses_the_catalogue_after_the_presets(monkeypatch, tmp_path):
    facts, problem = load_model("$HOME/models/Qwen3-VL-8B-Instruct", False)
    assert problem is None and facts.name == "Qwen/Qwen3-VL-8B-Instruct"
    assert facts.vision_model_type == "qwen3_vl" and facts.model_type == "qwen3_vl_text"
    facts, _ = load_model("Qwen/Qwen3-8B", False)
    assert facts.source == "built-in preset Qwen3-8B"  # the curated preset wins over the catalogue's entry
    config = ENTRIES["Qwen/Qwen3-8B"]["config"]
    src = {"url": "https://example.invalid/config.json"}
    data = _write(
        tmp_path / "c.json.gz",
        {"A/Tiny-1B": {"config": config, "source": src}, "B/Tiny-1B": {"config": config, "source": src}},
    )
    monkeypatch.setattr(catalogue, "DATA", data)
    facts, problem = load_model("/models/Tiny-1B", False)
    assert facts is None and "names 2 catalogued models (A/Tiny-1B, B/Tiny-1B)" in problem
    assert "pass --model-config" in problem


def test_a_corrupt_entry_is_one_line_naming_it(monkeypatch, tmp_path):
    bad = dict(ENTRIES["Qwen/Qwen3-8B"]["config"], num_hidden_layers="36")
    data = _write(
        tmp_path / "c.json.gz",
        {"A/Broken-1B": {"config": bad, "source": {"url": "x"}}, "A/Empty-1B": {"source": {"url": "x"}}},
    )
    monkeypatch.setattr(catalogue, "DATA", data)
    facts, problem = load_model("/models/Broken-1B", False)
    assert facts is None and "\n" not in problem
    assert "catalogue entry A/Broken-1B:" in problem and '"num_hidden_layers": "36" is not a whole number' in problem
    facts, problem = load_model("A/Empty-1B", False)
    assert facts is None and "catalogue entry A/Empty-1B has no config object" in problem
    (tmp_path / "c.json.gz").write_bytes(b"not gzip")
    catalogue._LOADED.clear()
    facts, problem = load_model("/models/Broken-1B", False)
    assert facts is None and "cannot be read" in problem and str(data) in problem


def test_the_check_of_a_verl_vl_launch_is_decided(tmp_path):
    """A launch naming a VL model by its HF id: found in the catalogue, the model rules run."""
    from shardcheck.api import check
    from shardcheck.rules.examples import verl_launch

    script = tmp_path / "run_qwen3_vl_8b.sh"
    script.write_text(
        verl_launch(
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", model="Qwen/Qwen3-VL-8B-Instruct"
        ).replace("/models/Qwen/", "Qwen/")
    )
    result = check(script, env={})
    assert result.job.model is not None and result.job.model.name == "Qwen/Qwen3-VL-8B-Instruct"
    assert "catalogue: Qwen/Qwen3-VL-8B-Instruct, from " in result.job.model.source
    assert not [f for f in result.findings if f.rule == "MODEL-NOT-FOUND"]
    assert result.valid is not None


def test_the_catalogue_is_loaded_only_when_the_presets_miss():
    code = (
        "import sys; from shardcheck.models.facts import load_model; load_model('/m/Qwen3-8B', False);"
        "print('shardcheck.models.catalogue' in sys.modules);"
        "load_model('/m/Qwen3.5-27B', False); print('shardcheck.models.catalogue' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]


def test_the_build_keeps_what_the_reader_reads_and_the_nested_configs():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from build_model_catalogue import compact
    finally:
        sys.path.pop(0)
    config = {
        "num_attention_heads": 8,
        "initializer_range": 0.02,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
        "text_config": {"num_hidden_layers": 4, "bos_token_id": 1},
        "llm_config": {"hidden_size": 64, "eos_token_id": 2},
        "vision_config": {"depth": 2, "image_mean": [0.5]},
    }
    assert compact(config) == {
        "num_attention_heads": 8,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
        "text_config": {"num_hidden_layers": 4},
        "llm_config": {"hidden_size": 64},
        "vision_config": {"depth": 2},
    }


@pytest.mark.parametrize(("cp", "fires"), [(4, True), (1, False)])
def test_a_catalogued_hybrid_model_decides_a_layout_rule(tmp_path, cp, fires):
    """Qwen3.5-35B-A3B named by a path tail only: its Gated DeltaNet layers come from the catalogue, so CP 4
    is the error megatron-core raises (without the facts the launch read as valid) and CP 1 stays silent."""
    from shardcheck.api import check
    from shardcheck.rules.examples import verl_launch

    script = tmp_path / "run.sh"
    parallel = (
        f"actor_rollout_ref.actor.megatron.context_parallel_size={cp} "
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 "
        "actor_rollout_ref.actor.megatron.expert_model_parallel_size=8"
    )
    script.write_text(verl_launch(parallel, model="/data/models/Qwen3.5-35B-A3B", nodes=2))
    result = check(script, env={})
    assert result.job.model.name == "Qwen/Qwen3.5-35B-A3B"
    assert [f.rule for f in result.findings if f.severity == "error"] == (["MCORE-TC-GDN-TP"] if fires else [])
    assert result.valid is (not fires)
