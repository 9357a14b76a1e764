"""The rule registry: one definition per id, typed problems mapped to rules, scope, removed/renamed ids."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_rules import SMALL_MOE, rule_findings, slime

from shardcheck.problems import Kind
from shardcheck.rules import ids
from shardcheck.rules.registry import NOT_RULE_MODULES, all_rules, check_id, rule_id, rule_of_kind

SRC = Path(__file__).resolve().parents[1] / "src" / "shardcheck"


def test_every_problem_kind_belongs_to_one_rule():
    assert set(rule_of_kind()) == set(Kind)
    assert rule_id(Kind.SHELL_SYNTAX) == "SHELL-SYNTAX" and rule_id(Kind.GRID_WORLD) == "MCORE-PS-WORLD"


def test_rule_modules_are_discovered_from_the_package():
    modules = {p.stem for p in (SRC / "rules").glob("*.py")} - {"__init__"} - NOT_RULE_MODULES
    defining = {r.check.__module__.rsplit(".", 1)[-1] for r in all_rules().values()}
    defining |= {r.render.__module__.rsplit(".", 1)[-1] for r in all_rules().values() if r.render}
    assert modules <= defining


def test_lower_layers_name_no_rule_ids():
    """inputs/, mesh/ and frameworks/ report typed problems; rule ids live in the rule layer only."""
    current = set(all_rules())
    for folder in ("inputs", "mesh", "frameworks", "memory", "models"):
        for path in (SRC / folder).rglob("*.py"):
            strings = {
                n.value
                for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            }
            assert not strings & current, (path, strings & current)


def test_no_private_names_cross_modules():
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("shardcheck"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                assert not private, (path, private)


def test_removed_and_renamed_ids():
    current = set(all_rules())
    status = check_id("VERL-CFG-ADDED-FIELD")
    assert status.kind == "removed" and "VERL-CFG-ADDED-KEY" in status.note
    assert check_id("mcore-ps-world").kind == "ok" and check_id("MCORE-").kind == "ok"
    assert (check_id("MCORE-TC-HEAD-TP").kind, check_id("MCORE-TC-HEAD-TP").target) == ("unknown", "MCORE-TC-HEADS-TP")
    assert not (ids.REMOVED.keys() | ids.RENAMED.keys()) & current


def test_renamed_ids_redirect(monkeypatch):
    monkeypatch.setitem(ids.RENAMED, "MCORE-WORLD-OLD", "MCORE-PS-WORLD")
    status = check_id("MCORE-WORLD-OLD")
    assert (status.kind, status.target) == ("renamed", "MCORE-PS-WORLD")
    with pytest.raises(ValueError, match="reused"):
        monkeypatch.setitem(ids.RENAMED, "MCORE-PS-VPP-PP", "MCORE-PS-WORLD")
        ids.check_registry(all_rules())


def test_scope_is_declared_and_shown():
    rules = all_rules()
    assert rules["SGLANG-TP-HEADS"].frameworks == ("verl", "verl-gen", "slime")
    assert rules["SGLANG-TP-HEADS"].engines == ("sglang",)
    assert rules["SLIME-SGL-PP"].frameworks == ("slime",)
    from shardcheck.rules.docs import rule_page

    assert "Applies to: verl, verl-gen, slime; engine sglang" in rule_page(rules["SGLANG-TP-HEADS"])


def test_sglang_heads_under_slime(tmp_path):
    """slime starts SGLang with tp_size = --rollout-num-gpus-per-engine: TP 3 over 32 heads fails to load."""
    bad = slime("--rollout-num-gpus 6 --rollout-num-gpus-per-engine 3")
    found, result = rule_findings(tmp_path, bad, "SGLANG-TP-HEADS")
    assert len(found) == 1 and found[0].severity == "error" and result.valid is False
    assert "32 attention heads, split over 3 ranks" in found[0].message
    assert "--rollout-num-gpus-per-engine 3" in found[0].message
    assert found[0].fix.startswith("an attention TP in 1, 2, 4, 8, 16, 32")
    good = slime("--rollout-num-gpus 8 --rollout-num-gpus-per-engine 4")
    found, result = rule_findings(tmp_path, good, "SGLANG-TP-HEADS")
    assert not found and result.valid is True
    assert "--num-attention-heads 32" in SMALL_MOE


def test_explain_a_removed_id(capsys):
    from shardcheck.cli import main

    assert main(["explain", "VERL-CFG-ADDED-FIELD"]) == 2
    assert "removed" in capsys.readouterr().err


def test_one_error_base_class():
    """Every exception class shardcheck defines derives from ShardcheckError (errors.py)."""
    classes = []
    for path in SRC.rglob("*.py"):
        if path.name == "worker.py":  # verify/worker.py runs alone in megatron-core's process
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & {"Exception", "ValueError", "RuntimeError", "ShardcheckError", "InputError"}:
                    classes.append((path.name, node.name, bases))
    assert classes
    for name, cls, bases in classes:
        assert cls == "ShardcheckError" or bases & {"ShardcheckError", "InputError"}, (name, cls, bases)


def test_one_unknown_value_mechanism():
    from shardcheck.frameworks import memory_settings
    from shardcheck.origin import Origin, Traced, UnknownValue, need

    unknown = Traced(None, Origin(kind="default", text="x"), "$X is not set")
    with pytest.raises(UnknownValue) as rule_stop:
        need(unknown, "trainer.nnodes")
    with pytest.raises(UnknownValue) as estimate_stop:
        memory_settings.known(unknown, "trainer.nnodes")
    assert str(rule_stop.value) == str(estimate_stop.value) == "trainer.nnodes is unknown ($X is not set)"


def test_framework_interface():
    """Each framework package answers the same entry points; rules and the API ask through frameworks/interface.py."""
    from shardcheck.frameworks import interface

    for name in interface.PACKAGES:
        resolve = interface.framework_module(name, "resolve")
        assert callable(resolve.detect) and callable(resolve.resolve), name
        settings = interface.framework_module(name, "memory_settings")
        if name in interface.MEMORY_FRAMEWORKS:  # verl's SFT trainers have no memory estimate (yet)
            assert callable(settings.fix_keys) and callable(settings.train_settings), name
        else:
            assert settings is None, name
    assert interface.framework_module("verl", "rollout").sglang_server
    assert interface.framework_module("slime", "rollout").sglang_server
    assert interface.framework_module("megatron-lm", "rollout") is None  # Megatron-LM has no rollout
    rule_sources = "\n".join(p.read_text() for p in (SRC / "rules").glob("*.py"))
    assert "job.framework ==" not in rule_sources and "job.framework !=" not in rule_sources
