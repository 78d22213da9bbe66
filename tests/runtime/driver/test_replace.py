"""Which stages replace a dead engine or explorer and which say why not (driver/replace.py refusal): the reasons on
configs the resolver gives. tests/cli/test_run_replacements.py and test_run_lora.py (vLLM) kill the engines of real
runs."""

from types import SimpleNamespace

import pytest

from tests.runtime.rollout.test_vllm_args import resolved
from trinity.config import modes
from trinity.runtime.driver.replace import refusal


def stage(config, restart_actor=lambda name: None, budget=object()):
    return SimpleNamespace(
        config=config, mode=modes.mode(config.mode), restart_actor=restart_actor, budget=budget, engines=[object()]
    )


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ((), None),  # vLLM engines on a node of their own: replaced
        (("hardware=cpu",), None),  # the transformers engine
        (("mode=colocate",), "mode colocate: the engines share the trainer's devices"),
        (
            (
                "cluster.node_num=4",
                "explorer.rollout_model.engine_num=1",
                "explorer.rollout_model.tensor_parallel_size=12",
            ),
            "an engine spans 2 nodes, whose parts start together (not one part anew)",
        ),
    ],
)
def test_a_stage_replaces_its_engines_unless_they_share_the_trainers_devices_or_span_nodes(overrides, why):
    profile = "cpu" if "hardware=cpu" in overrides else "a100"
    config = resolved(profile, *(o for o in overrides if not o.startswith("hardware=")))
    assert refusal(stage(config)) == why


def test_a_launch_that_starts_no_replacement_replaces_nothing():
    config = resolved("a100")
    assert refusal(stage(config, restart_actor=None)) == "its launch starts no replacement"
    assert refusal(stage(config, budget=None)) == "its launch starts no replacement"
