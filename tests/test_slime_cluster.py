"""SLIME-CLUSTER-GPUS judges only a Ray cluster the script starts as a whole (frameworks/slime/resolve.py
ray_cluster_gpus): a worker joining anywhere, a head under an undecided condition, an unknown GPU count or a
multi-node actor leave it unjudged."""

from __future__ import annotations

import pytest

from shardcheck.api import check
from shardcheck.rules.examples import slime_launch

HEAD = "ray start --head --node-ip-address 127.0.0.1 --num-gpus 8 --disable-usage-stats"


def _fired(tmp_path, text: str, env: dict | None = None) -> list:
    path = tmp_path / "run.sh"
    path.write_text(text)
    return [f for f in check(path, env).findings if f.rule == "SLIME-CLUSTER-GPUS"]


def test_fires_on_a_one_node_cluster_too_small(tmp_path):
    (f,) = _fired(tmp_path, slime_launch(before=HEAD))
    assert f.line == 1 and "placement group of 16 GPUs" in f.message


@pytest.mark.parametrize(
    "before",
    [
        HEAD + '\nssh node2 "ray start --address=${MASTER_ADDR}:6379 --num-gpus 8"',
        HEAD + "\nray start --address=${MASTER_ADDR}:6379 --num-gpus 8",
        'if [ "$NODE_RANK" = 0 ]; then\n' + HEAD + "\nfi",
        HEAD.replace("8", "${NUM_GPUS}"),
        HEAD.replace(" --num-gpus 8", ""),
        "",
    ],
)
def test_silent_when_the_cluster_is_not_certain(tmp_path, before):
    assert _fired(tmp_path, slime_launch(before=before)) == []


def test_colocated_needs_the_larger_side_only(tmp_path):
    assert _fired(tmp_path, slime_launch("--colocate", before=HEAD)) == []


def test_multi_node_actor_is_not_judged(tmp_path):
    text = slime_launch(before=HEAD).replace("--actor-num-nodes 1", "--actor-num-nodes 2")
    assert _fired(tmp_path, text) == []
