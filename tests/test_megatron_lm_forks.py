"""Megatron-LM forks (frameworks/megatron_lm/forks.py, issue 26 false alarm 6): the flags a fork's code in the
script's repository declares are read from its ``add_argument`` calls; MindSpeed-LLM's ``--num-layer-list`` is its
per-stage split; a fork whose table lies partly outside the repository gets one "flags of <fork>, not judged"
line instead of one MLM-FLAG-UNKNOWN warning per flag."""

from __future__ import annotations

from shardcheck.api import check
from shardcheck.rules.examples import megatron_lm_launch

# a GPT model of 61 layers (DeepSeek-V3's count): 61 does not divide by PP 4
MODEL = (
    "--num-layers 61 --hidden-size 1024 --num-attention-heads 16 --ffn-hidden-size 4096 --seq-length 4096 "
    "--max-position-embeddings 4096 --vocab-size 32000"
)
FEATURE = """\
class NumLayerListFeature:
    def register_args(self, parser):
        group = parser.add_argument_group(title="num-layer-list")
        group.add_argument('--num-layer-list', type=str, help='a list of number of layers, seperated by comma')
        group.add_argument('--use-fused-rmsnorm', action='store_true', default=False)
        group.add_argument('--swap-attention-layers', type=int, default=0)
"""


def _run(tmp_path, flags: str, *, fork: str | None = "mindspeed_llm", megatron: str | None = None):
    repo = tmp_path / "repo"
    if fork is not None:
        (repo / fork / "features").mkdir(parents=True)
        (repo / fork / "features" / "num_layer_list.py").write_text(FEATURE)
    if megatron is not None:
        (repo / "megatron" / "training").mkdir(parents=True)
        (repo / "megatron" / "training" / "arguments.py").write_text(megatron)
    (repo / "examples").mkdir(parents=True, exist_ok=True)
    path = repo / "examples" / "pretrain.sh"
    path.write_text(megatron_lm_launch(flags, model=MODEL))
    result = check(path)
    assert result.error is None, result.error
    return result


def _rules(result, rule):
    """The findings of ``rule``, a grouped one counted as its members."""
    return [m for f in result.findings if f.rule == rule for m in (f.members or (f,))]


def test_mindspeed_num_layer_list_is_the_stage_split(tmp_path):
    result = _run(tmp_path, "--pipeline-model-parallel-size 4 --num-layer-list 15,15,15,16")
    layout = result.job.layouts[0]
    assert (layout.first_stage_layers.value, layout.last_stage_layers.value) == (15, 16)
    assert not _rules(result, "MCORE-BUILD-LAYERS-PP")
    assert not _rules(result, "MLM-FLAG-UNKNOWN")  # the fork declares --num-layer-list


def test_without_the_list_61_layers_on_pp_4_is_an_error(tmp_path):
    assert _rules(_run(tmp_path, "--pipeline-model-parallel-size 4"), "MCORE-BUILD-LAYERS-PP")


def test_an_uneven_middle_is_unknown_not_guessed(tmp_path):
    result = _run(tmp_path, "--pipeline-model-parallel-size 4 --num-layer-list 10,20,15,16")
    assert result.job.layouts[0].first_stage_layers.known is False
    assert not _rules(result, "MCORE-BUILD-LAYERS-PP")


def test_a_partial_fork_names_its_unknown_flags_once(tmp_path):
    result = _run(tmp_path, "--use-fused-rmsnorm --swap-attention-layers 2 --use-ascend-mc2 --moe-zero-memory alltoall")
    (found,) = _rules(result, "MLM-FLAG-UNKNOWN")
    assert found.severity == "info" and "flags of MindSpeed-LLM, not judged" in found.message
    assert "--use-ascend-mc2" in found.message and "--moe-zero-memory" in found.message
    assert "--use-fused-rmsnorm" not in found.message


def test_without_the_fork_code_each_flag_is_unknown(tmp_path):
    result = _run(tmp_path, "--use-fused-rmsnorm --use-ascend-mc2", fork=None)
    assert [f.severity for f in _rules(result, "MLM-FLAG-UNKNOWN")] == ["warning", "warning"]


def test_a_fork_carrying_its_megatron_is_judged_flag_by_flag(tmp_path):
    own = "def add(parser):\n    parser.add_argument('--my-fork-flag', type=int, default=3)\n"
    result = _run(tmp_path, "--my-fork-flag 4 --not-anywhere-flag", fork=None, megatron=own)
    found = _rules(result, "MLM-FLAG-UNKNOWN")
    assert [f.severity for f in found] == ["warning"] and "--not-anywhere-flag" in found[0].message
    assert result.job.values["--my-fork-flag"].value == 4


def test_a_list_flag_of_unknown_content_is_unknown_not_missing(tmp_path):
    """``DATA_PATH=$4 … --data-path $DATA_PATH``: the word may expand to any words, so the value is unknown
    (issue 26 false alarm 3), while a flag followed by another flag still has no values."""
    path = tmp_path / "train.sh"
    path.write_text("DATA_PATH=$4\n" + megatron_lm_launch("--data-path $DATA_PATH", model=MODEL))
    result = check(path)
    assert not _rules(result, "VALUE-BAD-TYPE")
    assert result.job.values["--data-path"].known is False
    path.write_text(megatron_lm_launch("--data-path --lr 1e-4", model=MODEL))
    assert any(f.rule.startswith("VALUE-BAD-") and "--data-path" in f.message for f in check(path).findings)
