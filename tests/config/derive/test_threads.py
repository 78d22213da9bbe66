"""Rules of trinity/config/derive/threads.py, each through `trinity config render/validate`:
compute threads for roles that take turns.
"""

import pytest

from tests.conftest import MINIMAL

from .texts import STAGED


def threads(cfg):
    return {role: cfg["env"][role].get("OMP_NUM_THREADS") for role in ("trainer", "rollout")}


@pytest.mark.parametrize(
    "overrides,expected",
    [
        # strictly on-policy: rollout and training take turns, each with the node's 4 slots (3 ranks: 1 each)
        ((), {"trainer": "1", "rollout": "4"}),
        (("explorer.rollout_model.engine_num=2",), {"trainer": "2", "rollout": "2"}),
        (("mode=colocate",), {"trainer": "1", "rollout": "4"}),
        # the explorer may run ahead, or several explore steps share one sync: each actor keeps its own slots
        (("synchronizer.sync_offset=1",), {"trainer": "1", "rollout": "1"}),
        (("synchronizer.sync_interval=2",), {"trainer": "1", "rollout": "1"}),
        (("synchronizer.sync_style=explorer_driven",), {"trainer": "1", "rollout": "1"}),
        (
            (
                "explorer.rollout_model.engine_type=vllm",
                "explorer.rollout_model.tensor_parallel_size=2",
                "mode=explore",
            ),
            {"trainer": None, "rollout": "2"},
        ),
        # training alone: the ranks share the node, here a rank on every slot
        (("mode=train",), {"trainer": "1", "rollout": None}),
        (("mode=explore",), {"trainer": None, "rollout": "1"}),  # the engine alone: its own slots
    ],
)
def test_roles_that_take_turns_compute_with_the_nodes_slots(render, overrides, expected):
    text = "algorithm:\n  repeat_times: 2\ncluster:\n  gpu_per_node: 4\n"
    result, cfg = render(text, "hardware=cpu", *overrides)
    assert result.code == 0, result.err
    assert threads(cfg) == expected


@pytest.mark.parametrize(
    "rl,threads",
    [
        ((), "2"),  # the RL stage takes turns: its rank, and the SFT rank kept for it, compute with both cores
        (("+stages.1.synchronizer.sync_offset=1",), "1"),  # the explorer runs ahead: one each, in both stages
        (("synchronizer.sync_interval=2",), "1"),  # the run's own setting, which both stages take
        (("+stages.1.mode=colocate",), "1"),  # colocated: both stages put a rank on every slot
    ],
)
def test_a_train_only_stage_gives_its_rank_the_threads_of_the_stage_it_is_kept_for(cli, write, rl, threads):
    path = write("run.yaml", MINIMAL + STAGED)
    ranks = {}
    for stage in ("sft", "rl"):
        args = ("hardware=cpu", "cluster.gpu_per_node=2", "--stage", stage, "--format", "json", *rl)
        result = cli("config", "render", "-c", path, *args)
        assert result.code == 0, result.err
        ranks[stage] = result.json()["env"]["trainer"]["OMP_NUM_THREADS"]
    assert ranks == {"sft": threads, "rl": threads}  # equal env: the handover keeps the rank


def test_the_stage_a_train_only_stage_is_kept_for_is_read_with_its_interpolations(cli, write, monkeypatch):
    monkeypatch.setenv("OFFSET", "0")
    rl = "{stage_name: rl, synchronizer: {sync_offset: '${oc.env:OFFSET}'}}"
    stages = f"stages:\n  - {{stage_name: sft, mode: train}}\n  - {rl}\n"
    path = write("run.yaml", MINIMAL + stages)
    ranks = {}
    for stage in ("sft", "rl"):
        args = ("hardware=cpu", "cluster.gpu_per_node=2", "--stage", stage, "--format", "json")
        result = cli("config", "render", "-c", path, *args)
        assert result.code == 0, result.err
        ranks[stage] = result.json()["env"]["trainer"]["OMP_NUM_THREADS"]
    assert ranks == {"sft": "2", "rl": "2"}  # offset 0: the RL stage takes turns, read so from both stages


def test_a_train_only_stage_between_two_rl_stages_is_laid_out_for_the_next(cli, write):
    """The launch keeps a stage's actors for the next stage: an SFT stage hands over to the RL stage after it."""
    stages = (
        "stages:\n  - {stage_name: first, synchronizer: {sync_offset: 1}}\n  - {stage_name: sft, mode: train}\n"
        "  - {stage_name: second}\n"
    )
    path = write("run.yaml", MINIMAL + stages)
    args = ("hardware=cpu", "cluster.gpu_per_node=2", "--stage", "sft", "--format", "json")
    result = cli("config", "render", "-c", path, *args)
    assert result.code == 0, result.err
    assert result.json()["env"]["trainer"]["OMP_NUM_THREADS"] == "2"  # the second takes turns; the first did not


def test_two_train_only_stages_keep_a_rank_on_every_slot_with_one_thread_each(cli, write):
    path = write("run.yaml", MINIMAL + STAGED)
    args = ("hardware=cpu", "cluster.gpu_per_node=2", "--stage", "sft", "--format", "json", "+stages.1.mode=train")
    result = cli("config", "render", "-c", path, *args)
    assert result.code == 0, result.err
    rendered = result.json()
    assert (rendered["cluster"]["trainer_gpu_num"], rendered["env"]["trainer"]["OMP_NUM_THREADS"]) == (2, "1")


@pytest.mark.parametrize("overrides", [(), ("mode=colocate",), ("mode=train",), ("mode=explore",)])
def test_a_profile_that_does_not_share_the_node_keeps_each_actor_to_its_slots(render, write, overrides):
    own = write("profiles/ownslots.yaml", "extends: cpu\nfacts:\n  compute_threads:\n    turns_share_node: false\n")
    text = "algorithm:\n  repeat_times: 2\ncluster:\n  gpu_per_node: 4\n"
    result, cfg = render(text, "hardware=ownslots", "--profile-dir", own.parent, *overrides)
    assert result.code == 0, result.err
    assert set(threads(cfg).values()) - {None} == {"1"}


def test_threads_are_the_profiles_to_size_and_yours_to_set(render, cli, write):
    result, cfg = render("algorithm:\n  repeat_times: 2\n", "hardware=a100")
    assert result.code == 0 and threads(cfg) == {"trainer": None, "rollout": None}  # an accelerator computes
    for yours in ("env.common.OMP_NUM_THREADS='3'", "env.trainer.OMP_NUM_THREADS='3'"):
        result, cfg = render("algorithm:\n  repeat_times: 2\n", "hardware=cpu", yours)
        assert result.code == 0 and cfg["env"]["trainer"].get("OMP_NUM_THREADS", "3") == "3"
    explained = cli("config", "render", "-c", write("run.yaml", MINIMAL), "hardware=cpu", "--explain", "env.rollout")
    assert explained.code == 0 and "rule compute_threads" in explained.out
    assert "'turns_share_node': True} (" in explained.out  # the fact, with where the profile says it
