"""Models from the Hugging Face cache and, only when asked, the Hub; quantization and VL configs read into the
model facts (issue 28, item 2; models/hf_cache.py, models/hub.py, models/quantization.py)."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading

import pytest

from shardcheck.api import check
from shardcheck.models import hub
from shardcheck.models.facts import load_model, read_config_json
from shardcheck.models.quantization import read_quantization
from shardcheck.rules.examples import verl_launch

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TINY = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "hidden_size": 256,
    "intermediate_size": 512,
    "vocab_size": 1000,
}
# The shape of OpenGVLab/InternVL2_5-8B's config.json: its language model (InternLM2.5-7B) under llm_config.
INTERNVL = {
    "architectures": ["InternVLChatModel"],
    "model_type": "internvl_chat",
    "llm_config": {
        "architectures": ["InternLM2ForCausalLM"],
        "model_type": "internlm2",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "vocab_size": 92553,
    },
    "vision_config": {"model_type": "intern_vit_6b", "num_hidden_layers": 24, "hidden_size": 1024},
}


def cache_entry(cache, repo, config, *, ref=COMMIT, text=None):
    entry = cache / ("models--" + repo.replace("/", "--"))
    (entry / "snapshots" / COMMIT).mkdir(parents=True)
    (entry / "snapshots" / COMMIT / "config.json").write_text(text if text is not None else json.dumps(config))
    if ref is not None:
        (entry / "refs").mkdir()
        (entry / "refs" / "main").write_text(ref)
    return entry


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "hub"
    d.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(d))
    return d


def test_a_repository_id_is_read_from_the_cache_snapshot_refs_main_names(cache):
    cache_entry(cache, "Org/Tiny-Model", TINY)
    facts, problem = load_model("Org/Tiny-Model", True)
    assert problem is None and facts.num_hidden_layers == 4
    assert facts.source == f"the Hugging Face cache (Org/Tiny-Model, {COMMIT[:12]})"


def test_hf_home_is_honoured(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    (tmp_path / "hub").mkdir()
    cache_entry(tmp_path / "hub", "Org/Tiny-Model", TINY)
    assert load_model("Org/Tiny-Model", True)[0].num_hidden_layers == 4


def test_a_path_not_on_disk_is_found_by_its_name_when_one_entry_has_it(cache):
    cache_entry(cache, "Org/Tiny-Model", TINY)
    assert load_model("/home/me/models/Tiny-Model", True)[0].name == "Org/Tiny-Model"
    cache_entry(cache, "Other/Tiny-Model", TINY)  # two organisations: which one is not known
    facts, problem = load_model("/home/me/models/Tiny-Model", True)
    assert facts is None and "none in the Hugging Face cache" in problem


def test_a_single_snapshot_without_refs_main_is_used(cache):
    cache_entry(cache, "Org/Tiny-Model", TINY, ref=None)
    assert load_model("Org/Tiny-Model", True)[0].num_hidden_layers == 4


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"ref": "f" * 40}, "refs/main names snapshot ffffffffffff, which has no config.json"),
        ({"ref": "not a commit"}, "does not hold a commit hash"),
        ({"text": "{ not json"}, "not valid JSON"),
        ({"text": '{"model_type": "x"}'}, "not an HF model config"),
    ],
)
def test_a_corrupt_cache_entry_is_one_line_naming_it(cache, kwargs, said):
    entry = cache_entry(cache, "Org/Tiny-Model", TINY, **kwargs)
    facts, problem = load_model("Org/Tiny-Model", True)
    assert facts is None and said in problem and str(entry) in problem and "\n" not in problem


def test_a_corrupt_entry_is_a_finding_not_a_traceback(cache, tmp_path):
    cache_entry(cache, "Org/Tiny-Model", TINY, text="{")
    script = tmp_path / "run.sh"
    script.write_text(verl_launch(model="Org/Tiny-Model").replace("/models/Org/Tiny-Model", "Org/Tiny-Model"))
    r = check(script)
    assert [f for f in r.findings if f.rule == "MODEL-NOT-FOUND" and "models--Org--Tiny-Model" in f.message]


@contextlib.contextmanager
def fake_hub(monkeypatch, files: dict[str, dict]):
    seen: list[tuple[str, str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            body = files.get(self.path)
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def no_hub_library(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # the urllib path, whether or not it is installed


def test_the_hub_is_asked_only_with_online(cache, monkeypatch, no_hub_library):
    with fake_hub(monkeypatch, {"/Org/Remote/resolve/main/config.json": TINY}) as seen:
        facts, problem = load_model("Org/Remote", True)
        assert facts is None and "--online" in problem and seen == []
        with hub.online(True):
            facts, problem = load_model("Org/Remote", True)
        assert problem is None and facts.num_hidden_layers == 4
        assert facts.source.startswith("the Hugging Face Hub (http://127.0.0.1:")
        assert seen == [("/Org/Remote/resolve/main/config.json", None)]


def test_the_hub_gets_the_token(cache, monkeypatch, no_hub_library):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    with fake_hub(monkeypatch, {"/Org/Remote/resolve/main/config.json": TINY}) as seen, hub.online(True):
        load_model("Org/Remote", True)
    assert seen[0][1] == "Bearer hf_secret"


def test_a_failing_request_is_one_line(cache, monkeypatch, no_hub_library):
    with fake_hub(monkeypatch, {}), hub.online(True):
        facts, problem = load_model("Org/Missing", True)
    assert facts is None and "HTTP 404" in problem and "\n" not in problem
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with hub.online(True):
        facts, problem = load_model("Org/Missing", True)
    assert facts is None and problem.startswith("Org/Missing: GET http://127.0.0.1:9/") and "\n" not in problem


def test_offline_mode_is_honoured(cache, monkeypatch, no_hub_library):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with fake_hub(monkeypatch, {"/Org/Remote/resolve/main/config.json": TINY}) as seen, hub.online(True):
        facts, problem = load_model("Org/Remote", True)
    assert facts is None and "HF_HUB_OFFLINE" in problem and seen == []


def test_check_online_reads_the_hub(cache, monkeypatch, tmp_path, no_hub_library):
    script = tmp_path / "run.sh"
    script.write_text(verl_launch(model="Org/Remote").replace("/models/Org/Remote", "Org/Remote"))
    with fake_hub(monkeypatch, {"/Org/Remote/resolve/main/config.json": TINY}):
        assert check(script).job.model is None
        assert check(script, online=True).job.model.num_hidden_layers == 4


def test_internvl_llm_config_is_read(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(INTERNVL))
    facts = read_config_json(tmp_path / "config.json")
    assert (facts.num_hidden_layers, facts.num_key_value_heads, facts.model_type) == (32, 8, "internlm2")
    assert facts.text_key == "llm_config" and facts.vision_config["hidden_size"] == 1024
    assert facts.vision_model_type == "internvl_chat"


def test_a_text_config_model_keeps_its_vision_config(tmp_path):
    config = {"model_type": "qwen2_5_vl", "text_config": dict(TINY), "vision_config": {"depth": 32}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    facts = read_config_json(tmp_path / "config.json")
    assert facts.text_key == "text_config" and facts.vision_config == {"depth": 32}


@pytest.mark.parametrize(
    ("q", "want"),
    [
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, ("fp8", 8, None, (128, 128))),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, ("awq", 4, 128, None)),
        ({"quant_method": "gptq", "bits": 8, "group_size": -1}, ("gptq", 8, None, None)),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 32}}},
            },
            ("compressed-tensors", 4, 32, None),
        ),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, ("bitsandbytes", 4, None, None)),
        ({"quant_method": "mxfp4"}, ("mxfp4", 4, None, None)),
        ({"quant_method": "something-new"}, ("something-new", None, None, None)),
    ],
)
def test_quantization_config(q, want):
    got = read_quantization({"quantization_config": q})
    assert (got.method, got.bits, got.group_size, got.weight_block_size) == want


def test_no_quantization_config_is_none(tmp_path):
    assert read_quantization(TINY) is None
    (tmp_path / "config.json").write_text(json.dumps({**INTERNVL, "quantization_config": {"quant_method": "awq"}}))
    assert read_config_json(tmp_path / "config.json").quantization.method == "awq"  # the top level of a VL model


def test_the_online_flag_and_setting(cache, monkeypatch, tmp_path, capsys, no_hub_library):
    from shardcheck.cli import main

    script = tmp_path / "run.sh"
    script.write_text(verl_launch(model="Org/Remote").replace("/models/Org/Remote", "Org/Remote"))
    with fake_hub(monkeypatch, {"/Org/Remote/resolve/main/config.json": TINY}) as seen:
        main(["check", str(script), "--exit-zero", "--online"])
        assert "the Hugging Face Hub (http://127.0.0.1:" in capsys.readouterr().out
        n = len(seen)
        main(["check", str(script), "--exit-zero"])
        assert "the Hub is asked only with --online" in capsys.readouterr().out and len(seen) == n
        (tmp_path / "pyproject.toml").write_text("[tool.shardcheck]\nonline = true\n")
        main(["check", str(script), "--exit-zero"])
        assert "the Hugging Face Hub (http://127.0.0.1:" in capsys.readouterr().out
