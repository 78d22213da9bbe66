"""Which stages replace a dead engine or explorer and which say why not (driver/replace.py refusal): the reasons on
configs the resolver gives. tests/cli/test_run_replacements.py and test_run_lora.py (vLLM) kill the engines of real
runs."""

from types import SimpleNamespace

import pytest

from tests.runtime.rollout.test_vllm_args import resolved
from trinity.config import modes
from trinity.runtime.driver.blame import Failure
from trinity.runtime.driver.replace import grant, refusal, say_why_not
from trinity.runtime.driver.restarts import RestartBudget
from trinity.runtime.driver.watcher import RoleFailed


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


ENGINES = [object(), object()]
DIED = [Failure(f"rollout.engine{i}", True, "killed by SIGKILL", at=1.0) for i in range(2)]


def live(config, budget=None, notes=None):
    """A stage with two engines (rollout.engine0 and 1) and a judge's engine, drawing on `budget`."""
    judge = object()
    return SimpleNamespace(
        **vars(stage(config, budget=budget or RestartBudget(3, 3600.0))),
        handles=SimpleNamespace(
            actors={"rollout.engine0": ENGINES[0], "rollout.engine1": ENGINES[1], "judge.engine0": judge},
            roles={"rollout": ENGINES, "auxiliary": [judge]},
        ),
        progress=SimpleNamespace(note=(notes if notes is not None else []).append),
    )


def test_a_death_not_replaced_in_place_says_why_on_a_progress_line():
    notes = []
    say_why_not(live(resolved("a100", "mode=colocate"), notes=notes), RoleFailed.of([DIED[0]]))
    say_why_not(live(resolved("a100"), notes=notes), RoleFailed.of([Failure("judge.engine0", True, "exit 1", 1.0)]))
    say_why_not(live(resolved("a100"), notes=notes), RoleFailed.of([DIED[0]]))  # replaced in place: nothing to say
    assert notes == [
        "rollout.engine0 is not replaced in place: mode colocate: the engines share the trainer's devices",
        "judge.engine0 is not replaced in place: it is an auxiliary model's engine",
    ]


def test_a_budget_short_of_every_replacement_grants_none_and_says_it_is_spent():
    budget = RestartBudget(1, 3600.0)
    with pytest.raises(RoleFailed) as ended:
        grant(live(resolved("a100"), budget), ["rollout.engine0", "rollout.engine1"], RoleFailed.of(DIED), 3)
    assert budget.restarts == []  # the one granted first is given back
    assert str(ended.value).splitlines()[1] == f"not restarted: the restart budget is spent ({budget.spent()})"
    assert ended.value.record()["not_restarted"].startswith("the restart budget is spent")
