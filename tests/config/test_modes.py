"""The modes table (trinity/config/modes.py): its invariants, and every consumer reading it, shown by changing one
attribute of one entry and watching the derived config, the launch plan, preflight or the run directory follow."""

import dataclasses
import typing

import pytest

from tests.conftest import REFERENCE
from trinity.config import modes
from trinity.config.compose import Request
from trinity.config.derive.values import NOT_RUN
from trinity.config.resolve import resolve
from trinity.config.schema import RunConfig
from trinity.config.schema.run import StageConfig
from trinity.errors import ConfigError
from trinity.launch.plan import build_plan
from trinity.runtime.driver.loops import LOOPS
from trinity.runtime.records.run_dir import RunDir

ENTRIES = list(modes.MODES.values())


def resolved(*overrides):
    return resolve(Request(REFERENCE, ("hardware=a100", *overrides))).config


def roles(config):
    return {a.role for a in build_plan(config, {}).actors}


@pytest.fixture
def change(monkeypatch):
    """Replace attributes of one mode's entry for the test."""

    def _change(name, **attributes):
        monkeypatch.setitem(modes.MODES, name, dataclasses.replace(modes.MODES[name], **attributes))

    return _change


# --- the table ----------------------------------------------------------------------------------------------------


def test_every_mode_the_schema_accepts_has_an_entry_in_the_tables_order():
    for annotation in (RunConfig.model_fields["mode"].annotation, StageConfig.model_fields["mode"].annotation):
        literal = next(a for a in (annotation, *typing.get_args(annotation)) if typing.get_origin(a) is typing.Literal)
        assert typing.get_args(literal) == tuple(modes.MODES)


def test_an_unknown_mode_names_the_modes_there_are():
    with pytest.raises(
        ValueError, match="unknown mode 'serving' \\(modes: both, explore, train, bench, serve, colocate"
    ):
        modes.mode("serving")


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda m: m.name)
def test_each_entry_keeps_the_invariants(entry):
    assert modes.mode(entry.name) is entry
    assert not entry.syncs or (entry.explores and entry.trains)  # a synchronizer joins this run's trainer and engines
    assert not entry.shares_devices or entry.syncs  # taking turns on the devices needs both sides in this run
    # the trainer reads what it trains on through the buffer: experiences beside it, or those an explore run wrote
    assert not entry.trains or entry.buffers
    assert entry.locks and all(entry.locks)
    assert entry.loop in LOOPS  # every mode runs: tests/runtime/driver/loops/test_registry.py finds its loop
    assert entry.splits_devices == (entry.explores and entry.trains and not entry.shares_devices)
    assert not entry.evaluates_checkpoints or (entry.explores and not entry.trains and not entry.buffers)
    # a server's engines answer outside agents, and what they are told goes through the buffer to a train run
    assert not entry.serves or (entry.runs_engines and entry.buffers and not entry.explores and not entry.trains)


def test_two_runs_that_may_share_a_directory_hold_disjoint_locks():
    both, explore, train = (set(modes.mode(n).locks) for n in ("both", "explore", "train"))
    assert explore.isdisjoint(train) and both == explore | train


def test_every_mode_runs_and_none_is_refused():
    assert "mode" not in NOT_RUN
    assert resolved("mode=serve", "buffer.trainer_input.experience_buffer.storage_type=sql").mode == "serve"


# --- every consumer reads it --------------------------------------------------------------------------------------


def test_the_plan_places_the_roles_the_table_names():
    assert roles(resolved("mode=both")) == {"trainer", "rollout", "explorer", "buffer"}
    assert roles(resolved("mode=explore")) == {"rollout", "explorer", "buffer"}
    assert roles(resolved("mode=train")) == {"trainer", "buffer"}
    assert roles(resolved("mode=bench")) == {"rollout", "explorer"}


def test_buffers_decides_the_buffer_actor(change):
    config = resolved("mode=both")
    change("both", buffers=False)
    assert "buffer" not in roles(config)


@pytest.mark.parametrize("syncs", [True, False])
def test_syncs_decides_the_drivers_synchronizer(change, tmp_path, syncs):
    from tests.runtime.stand_ins import InlineWatcher, World, handles_for
    from trinity.runtime.driver.stage import RoleHandles, Stage, StageStart
    from trinity.runtime.records.metrics import MetricsLog

    config = resolved("mode=both")
    change("both", syncs=syncs)
    stage = Stage(config, None, 0, RunDir(tmp_path), MetricsLog(tmp_path / "m.jsonl"), StageStart("m", 0), quiet=True)
    actors = build_plan(config, {}).actors
    stage.setup(RoleHandles.of(list(actors), handles_for(actors, World())), InlineWatcher())
    assert (stage.synchronizer is not None) is syncs


def test_explores_decides_the_engines_their_devices_and_the_explorer(change):
    change("train", explores=True)
    config = resolved("mode=train")
    assert config.cluster.rollout_gpu_num == 4 and {"rollout", "explorer"} <= roles(config)


def test_trains_decides_the_trainers_devices(change):
    assert resolved("mode=explore").cluster.trainer_gpu_num == 0
    change("explore", trains=True)
    assert resolved("mode=explore").cluster.trainer_gpu_num == 2  # what the 4 engines leave of 6


def test_shares_devices_decides_the_sync_method_and_the_device_shares(change):
    assert resolved("mode=both").synchronizer.sync_method == "nccl"
    change("both", shares_devices=True)
    config = resolved("mode=both")
    assert config.synchronizer.sync_method == "memory" and config.cluster.trainer_gpu_num == 6
    trainer = next(a for a in build_plan(config, {}).actors if a.role == "trainer")
    assert trainer.options["num_gpus"] == 0.5  # half of a device, beside an engine


def test_locks_decide_which_runs_share_a_directory(change, tmp_path):
    with RunDir(tmp_path).lock("explore"), RunDir(tmp_path).lock("train"):
        pass
    change("explore", locks=("explore", "train"))
    with pytest.raises(ConfigError, match="train lock held"):
        with RunDir(tmp_path).lock("explore"), RunDir(tmp_path).lock("train"):
            pass


def test_a_staged_run_holds_the_locks_of_every_stages_mode(tmp_path):
    with RunDir(tmp_path).lock(("bench", "explore")):
        with pytest.raises(ConfigError, match="bench lock held"):
            with RunDir(tmp_path).lock("bench"):
                pass
        with RunDir(tmp_path).lock("train"):  # an explore and a train run may share the directory
            pass


def test_evaluates_checkpoints_drops_the_evaluation_interval(change):
    written = ("mode=bench", "synchronizer.sync_interval=4", "explorer.eval_interval=6")
    assert resolved(*written).explorer.eval_interval == 6  # nothing to round to: bench evaluates each checkpoint
    change("bench", evaluates_checkpoints=False)
    assert resolved(*written).explorer.eval_interval == 4


def test_the_loops_the_stage_runs():
    assert {n: m.loop for n, m in modes.MODES.items()} == {
        "both": "both",
        "explore": "explore",
        "train": "train",
        "bench": "bench",
        "serve": "serve",
        "colocate": "both",  # the loop of `both`, taking turns on the devices (shares_devices)
    }


def test_colocate_gives_the_trainer_every_device_in_turn_with_the_engines():
    config = resolved("mode=colocate", "explorer.rollout_model.engine_num=6")
    assert config.synchronizer.sync_method == "memory" and config.cluster.trainer_gpu_num == 6
    plan = build_plan(config, {})
    assert {a.options["num_gpus"] for a in plan.actors if a.role in ("trainer", "rollout")} == {0.5}


@pytest.mark.parametrize("name", ["both", "colocate"])
def test_a_run_that_explores_and_trains_excludes_explore_and_train_runs(name, tmp_path):
    with RunDir(tmp_path).lock(name):
        for other in ("explore", "train"):
            with pytest.raises(ConfigError, match=f"{other} lock held"):
                with RunDir(tmp_path).lock(other):
                    pass


def test_serve_runs_engines_and_the_buffer_and_may_share_a_directory_with_a_train_run(tmp_path):
    # engines on their endpoints, no explorer (no tasksets) and no trainer; its experiences go to the buffer's storage
    serve = modes.mode("serve")
    assert (serve.explores, serve.trains, serve.buffers, serve.serves, serve.runs_engines) == (
        False, False, True, True, True,
    )  # fmt: skip
    config = resolved("mode=serve", "buffer.trainer_input.experience_buffer.storage_type=sql")
    assert config.explorer.rollout_model.enable_openai_api and config.synchronizer.sync_method == "checkpoint"
    assert {a.role for a in build_plan(config, {}).actors} == {"rollout", "buffer"}
    with RunDir(tmp_path).lock("serve"), RunDir(tmp_path).lock("train"):
        pass


@pytest.mark.parametrize("name", list(modes.MODES))
@pytest.mark.parametrize("written", [True, False])
@pytest.mark.parametrize("devices", [1, 2, 8])
def test_only_a_mode_nobody_wrote_that_splits_the_devices_takes_turns_on_a_single_device(name, written, devices):
    runs, entries = modes.on_devices(name, written, devices), modes.MODES
    if not written and devices == 1 and entries[name].splits_devices:
        assert entries[runs].shares_devices and entries[runs].loop == entries[name].loop  # the same loop, taking turns
    else:
        assert runs == name


@pytest.mark.parametrize(
    "overrides,until_drained",
    [
        (("mode=train",), True),  # another run's experiences, no step count: until they stop coming
        (("mode=train", "trainer.total_steps=5"), False),
        (("mode=train", "+buffer.total_steps=5"), False),
        (("mode=train", "algorithm.algorithm_type=sft"), False),  # a data set: its epochs
        (("mode=both",), False),  # the explorer's tasks set the length
        (("mode=explore",), False),
    ],
)
def test_only_a_train_run_of_experiences_without_a_step_count_trains_until_they_stop(overrides, until_drained):
    config = resolved("~stages", "~trainer.total_steps", *overrides)
    assert modes.trains_until_drained(config) is until_drained
