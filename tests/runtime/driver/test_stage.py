"""The real Stage, its scheduler and its bookkeeping, in this process: stand-in role handles, no Ray.

What Ray adds (actors, placement, a role that dies) is tested in tests/launch and tests/cli/test_run.py.
"""

import dataclasses
import json
import time

import pytest

from tests.runtime.stand_ins import InlineWatcher, World, handles_for
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.launch.plan import build_plan
from trinity.runtime.driver.loops import loop
from trinity.runtime.driver.stage import RoleHandles, Stage, StageStart
from trinity.runtime.driver.watcher import RoleFailed
from trinity.runtime.records.metrics import MetricsLog
from trinity.runtime.records.run_dir import Checkpoint, RunDir


def stage_run(tmp_path, *overrides: str, pick=lambda kinds: 0, world: World | None = None, start=None, watcher=None):
    """Resolve the demo's GRPO stage with `overrides`, run it on stand-ins (watched by `watcher`, else InlineWatcher
    picking by `pick`); (world, metrics records, summary)."""
    config = resolve(Request(None, ("hardware=cpu", "~stages", "trainer.total_steps=3", *overrides))).config
    plan = build_plan(config)
    world = world or World(experiences=config.buffer.train_batch_size)
    run_dir = RunDir(tmp_path / "run")
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    stage = Stage(config, "grpo", 0, run_dir, metrics, start or StageStart("model", 0), quiet=True)
    stage.setup(RoleHandles.of(list(plan.actors), handles_for(plan.actors, world)), watcher or InlineWatcher(pick))
    summary = stage.run(loop(stage.mode))
    stage.finish()
    metrics.close()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return world, records, summary


@pytest.fixture(autouse=True)
def demo(demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))


def test_strictly_on_policy_each_step_explores_with_the_last_weights(tmp_path):
    world, records, summary = stage_run(tmp_path)
    assert world.log == [
        ("evaluate", 0, 0),  # explorer.eval_on_startup
        ("explore", 1, 0),
        ("train", 1, "awake"),
        ("sync", 1),
        ("explore", 2, 1),
        ("train", 2, "awake"),
        ("sync", 2),
        ("explore", 3, 2),
        ("train", 3, "awake"),
        ("sync", 3),
        ("evaluate", 3, 3),
        ("save", 3, True),
    ]
    roles = [(r["role"], r["step"]) for r in records]
    assert roles[:4] == [("eval", 0), ("explorer", 1), ("trainer", 1), ("synchronizer", 1)] and roles[-1] == ("eval", 3)
    explored = [r for r in records if r["role"] == "explorer"]
    assert [r["weight_version"] for r in explored] == [0, 1, 2]
    assert all(r["accuracy_mean"] == 0.5 and "workflow_metrics" not in r for r in explored)  # the workflows' own, flat
    assert summary.steps == 3 and summary.eval_last == {"eval": 0.3}
    assert set(summary.peak_rss_mb) == {
        a.name for a in build_plan(resolve(Request(None, ("hardware=cpu", "~stages"))).config).actors
    } | {"driver"}


@pytest.mark.parametrize(
    "overrides,together",
    [
        ((), True),
        (("mode=colocate",), False),
        # the trainer's steps are epochs over the explorer's tasks: it learns their number first
        (("trainer.total_steps=null", "buffer.total_steps=null", "buffer.total_epochs=1"), False),
    ],
)
def test_the_trainer_sets_up_beside_the_rollout_side_unless_they_share_devices(tmp_path, overrides, together):
    watcher = InlineWatcher()
    stage_run(tmp_path, *overrides, watcher=watcher)
    setups = [set(w) for w in watcher.waits if any(m.endswith(".setup") for m in w)]
    assert setups[0] == {"Buffer.setup"}
    # then the synchronizer forms the weight-sync group (gloo): trainer rank 0 hosts it, the engine joins; colocate
    # syncs by memory, with no group
    last = max(i for i, w in enumerate(watcher.waits) if any(m.endswith(".setup") for m in w))
    group = [{"Trainer.rendezvous"}, {"Trainer.join_sync_group", "Engine.join_sync_group"}, {"Trainer.weight_specs"}]
    assert ([set(w) for w in watcher.waits[last + 1 : last + 4]] == group) is ("mode=colocate" not in overrides)
    beside = {"Engine.setup", "Explorer.setup", "Trainer.setup"}
    assert (beside in setups) is together  # one wait for all three, or the rollout side's first
    if not together:
        assert setups[1:3] == [{"Engine.setup", "Explorer.setup"}, {"Trainer.setup"}]


def test_an_explorer_one_step_ahead_overlaps_training(tmp_path):
    # the watcher finishes the newest call first: train step 1 ends while explore step 2 still runs on weights 0
    world, _, _ = stage_run(tmp_path, "synchronizer.sync_offset=1", pick=lambda kinds: len(kinds) - 1)
    assert world.log[1:5] == [("explore", 1, 0), ("train", 1, "awake"), ("explore", 2, 0), ("sync", 1)]


def test_steps_that_end_together_are_each_recorded(tmp_path):
    world, records, _ = stage_run(tmp_path, "synchronizer.sync_offset=1", pick=None)
    assert world.log[1:4] == [("explore", 1, 0), ("explore", 2, 0), ("train", 1, "awake")]
    assert [r["step"] for r in records if r["role"] == "trainer"] == [1, 2, 3]
    assert [r["step"] for r in records if r["role"] == "explorer"] == [1, 2, 3]


def test_colocate_engines_sleep_through_every_train_step(tmp_path):
    world, records, _ = stage_run(tmp_path, "mode=colocate")
    assert [e for e in world.log if e[0] == "train"] == [("train", s, "asleep") for s in (1, 2, 3)]
    handoffs = [(r["holder"], r["step"], r["engines_asleep"]) for r in records if r["role"] == "devices"]
    # each step: the engines sleep through the update; the sync wakes their weights alone (the KV cache still
    # sleeps: 1 engine asleep); then the rest wakes
    assert handoffs == [(holder, step, asleep) for step in (1, 2, 3) for holder, asleep in ROUND]
    # before every wake, while the engines still sleep, the trainer hands its cached device memory back; what it still
    # reserves is recorded with the handoff
    assert [e for e in world.log if e[0] == "hand back"] == [("hand back", "asleep")] * 6
    assert [r.get("trainer_reserved_mib") for r in records if r["role"] == "devices"] == [None, 0.0, 0.0] * 3
    turn = world.log[world.log.index(("train", 1, "asleep")) - 1 : world.log.index(("explore", 2, 1))]
    assert [e for e in turn if e[0] != "hand back"] == [
        ("sleep", 1),  # the cpu platform keeps the weights in every sleep
        ("train", 1, "asleep"),
        ("wake", "weights"),
        ("sync", 1),
        ("wake", "kv_cache"),
    ]


ROUND = (("trainer", 1), ("sync", 1), ("rollout", 0))


@pytest.mark.parametrize(
    "overrides,levels",
    [
        ((), [2, 2, 2]),  # a sync follows every train step: the weights need no host copy
        # the trainer offers every 2 steps and the explorer, taking at each of its steps, runs ahead: train step 1 is
        # followed by explore step 3 on the old weights; train steps 3 and 4 hold the devices together, then a sync
        (
            (
                "synchronizer.sync_style=trainer_driven",
                "synchronizer.sync_interval=2",
                "synchronizer.explorer_sync_interval=1",
                "trainer.total_steps=4",
            ),
            [1, 2, 2],
        ),
        # taking every 2 explore steps, it runs to its check point at step 4 first: each train turn ends in a sync
        (
            ("synchronizer.sync_style=trainer_driven", "synchronizer.sync_interval=2", "trainer.total_steps=4"),
            [2, 2],
        ),
        (("+model.lora_configs=[{lora_rank: 8}]",), [1, 1, 1]),  # an adapter's sync leaves the base as it is
    ],
)
def test_engines_discard_their_weights_in_a_sleep_only_where_a_sync_refills_every_one_of_them(
    tmp_path, monkeypatch, overrides, levels
):
    """The platform's deepest level (Platform.rollout_sleep_level; vLLM's level 2 on GPUs) keeps no host copy of the
    weights, which a wake would copy back for the sync to overwrite; the cpu record's 1 is raised to 2 here."""
    from trinity.platforms import PLATFORMS

    monkeypatch.setitem(PLATFORMS, "cpu", dataclasses.replace(PLATFORMS["cpu"], rollout_sleep_level=2))
    world, _, _ = stage_run(tmp_path, "mode=colocate", *overrides)
    assert [e[1] for e in world.log if e[0] == "sleep"] == levels


def test_colocate_that_one_turn_cannot_fill_stops_with_the_reason(tmp_path):
    with pytest.raises(RoleFailed, match=r"colocate stalled after explore step 1: the buffer holds 4 experiences"):
        stage_run(tmp_path, "mode=colocate", world=World(experiences=4))


def test_a_resume_without_hugging_face_weights_first_gives_the_engines_the_trainers(tmp_path):
    saved = tmp_path / "global_step_2"
    saved.mkdir()  # the trainer's state only (save_hf_checkpoint: last)
    resume = Checkpoint(saved, 2, "grpo", 0, 2, 4)
    world, records, _ = stage_run(tmp_path, "trainer.total_steps=4", start=StageStart("model", 0, resume))
    assert world.log[:3] == [("sync", 2), ("evaluate", 2, 2), ("explore", 3, 2)]
    assert [r["step"] for r in records if r["role"] == "trainer"] == [3, 4]


MIX = ("algorithm.algorithm_type=mix", "+buffer.trainer_input.auxiliary_buffers.sft_dataset={path: /d.jsonl}")


@pytest.mark.parametrize(
    "mode, does, trained, rollouts, more",
    [
        ("both", "explores+trains", 2, 8, ()),
        ("colocate", "explores+trains", 2, 8, ()),
        ("train", "trains", 2, 8, ("buffer.trainer_input.experience_buffer.storage_type=sql",)),
        ("explore", "explores", None, 8, ()),
        ("both", "explores+trains", 2, 4, (*MIX, "buffer.batch_size=1", "algorithm.repeat_times=4")),  # 4 + 4 SFT
    ],
)
def test_the_buffer_is_set_back_to_the_stages_checkpoint_in_the_stages_own_scope(
    tmp_path, mode, does, trained, rollouts, more
):
    """Where the stage trains, the buffer hears the stage's scope (the run's id, the stage's name, what it does;
    whether it reads only what it explored; the rollouts a train step reads), the train steps its checkpoint holds
    and that it resumed (buffer/scope.py)."""
    saved = tmp_path / "global_step_2"
    saved.mkdir()
    resume = Checkpoint(saved, 2, "grpo", 0, 2, 4)
    world = World(experiences=8)
    overrides = ("trainer.total_steps=4", f"mode={mode}", "buffer.train_batch_size=8", *more)
    stage_run(tmp_path, *overrides, world=world, start=StageStart("model", 0, resume))
    [(scope, steps, resumed)] = world.buffer_setups
    run_id = (tmp_path / "run" / "run_id").read_text().strip()
    assert scope == (f"{run_id}#grpo#{does}", does == "explores+trains", rollouts) and (steps, resumed) == (
        trained,
        True,
    )


def test_a_colocated_stage_trains_on_what_its_resumed_buffer_kept(tmp_path):
    """The buffer kept 8 experiences (an explore step a kept train step took part of, whose second run stores
    nothing): colocate's next train step takes them rather than waiting for an explore step to store them; the one
    after waits for experiences no step stores."""
    with pytest.raises(RoleFailed, match=r"colocate stalled after explore step 2: the buffer holds 0 experiences"):
        stage_run(tmp_path, "mode=colocate", "buffer.train_batch_size=8", world=World(experiences=0, waiting=8))


def test_checkpoints_follow_save_interval_and_hf_weights_the_policy(tmp_path):
    world, _, summary = stage_run(
        tmp_path, "trainer.total_steps=5", "trainer.save_interval=2", "trainer.save_hf_checkpoint=last"
    )
    assert [e for e in world.log if e[0] == "save"] == [("save", 2, False), ("save", 4, False), ("save", 5, True)]
    assert summary.checkpoint.endswith("global_step_5")


class SlowBroadcast(InlineWatcher):
    """A watcher whose waits on the weights' broadcast run out of time (as RayWatcher' raise TimeoutError)."""

    def wait(self, refs: list, timeout_s: float | None = None) -> list:
        if timeout_s is not None and any(r.method.__name__ == "receive_weights" for r in refs):
            self.timeout_s = timeout_s
            raise TimeoutError
        return super().wait(refs, timeout_s)


def test_a_sync_that_outlasts_sync_timeout_ends_the_stage_with_what_it_waited_for(tmp_path):
    watcher = SlowBroadcast()
    with pytest.raises(RoleFailed, match=r"^broadcasting weights v1 took longer than synchronizer.sync_timeout=7 s$"):
        stage_run(tmp_path, "synchronizer.sync_timeout=7", watcher=watcher)
    assert 6.5 < watcher.timeout_s <= 7


class TimedWaits(InlineWatcher):
    """Keeps the timeout of every wait on a sync's calls; each such wait takes 50 ms."""

    SYNC_CALLS = ("weight_piece", "load_piece", "end_weight_pieces")

    def __init__(self):
        super().__init__()
        self.timeouts: list[float] = []

    def wait(self, refs: list, timeout_s: float | None = None) -> list:
        if any(r.method.__name__ in self.SYNC_CALLS for r in refs):
            self.timeouts.append(timeout_s)
            time.sleep(0.05)
        return super().wait(refs, timeout_s)


def test_a_memory_syncs_pieces_share_one_sync_timeout(tmp_path):
    """colocate syncs by memory, a piece at a time (3 here: gather, load, each; then release): every call of one sync
    waits only for what is left of synchronizer.sync_timeout, so a slow sync cannot take pieces x sync_timeout."""
    watcher = TimedWaits()
    stage_run(tmp_path, "mode=colocate", "trainer.total_steps=1", "synchronizer.sync_timeout=60", watcher=watcher)
    first_sync = watcher.timeouts[:7]  # 3 x (gather, load) and the release
    assert len(first_sync) == 7 and first_sync[0] <= 60
    assert all(later < earlier for earlier, later in zip(first_sync, first_sync[1:]))
    assert first_sync[0] - first_sync[-1] >= 0.3  # the 50 ms of each wait before it came off the sync's time


def test_previews_are_shown_every_sync_interval_steps_and_at_the_stages_end(tmp_path):
    """trainer.enable_preview: each train step's rows, gathered and shown as one table every sync_interval steps (as
    Trinity-RFT's trainer), the rest at the stage's last step; the trainer's own line stays numbers."""
    world = World(experiences=8, preview=True)
    _, records, _ = stage_run(tmp_path, "synchronizer.sync_interval=2", "trainer.enable_preview=true", world=world)
    previews = [r for r in records if r["role"] == "preview"]
    assert [(r["step"], r["table"], [row["prompt"] for row in r["rows"]]) for r in previews] == [
        (2, "rollout_examples", ["1+1=", "2+1="]),
        (3, "rollout_examples", ["3+1="]),
    ]
    assert all("preview" not in r for r in records if r["role"] == "trainer")


def test_an_auxiliary_models_engines_load_their_model_once_and_are_never_synced_slept_or_woken(tmp_path):
    """A both-mode stage with a judge: the judge's engine sets up with its own model at version 0, the explorer gets it
    as the first auxiliary model's engines, and no weight sync, sleep or wake reaches it while the rollout engine is
    synced every step."""
    from tests.runtime.stand_ins import Engine, Explorer, Handle

    class Judge(Engine):
        def __init__(self, world):
            super().__init__(world)
            self.calls = []

        async def setup(self, model_path: str, version: int) -> dict:
            self.calls.append((model_path, version))
            return {}

        def _synced(self, version: int) -> int:
            raise AssertionError("an auxiliary engine was given weights")

        async def sleep(self, level: int = 1) -> bool:
            raise AssertionError("an auxiliary engine was put to sleep")

        async def wake_up(self, tags=None) -> bool:
            raise AssertionError("an auxiliary engine was woken")

    class Asking(Explorer):
        def setup(self, engines, buffer, model_path, feedback=None, done=0, auxiliary=None):
            self.auxiliary = auxiliary
            return {}

    judge_model = "explorer.auxiliary_models=[{model_path: /models/judge, engine_num: 1}]"
    overrides = ("hardware=cpu", "~stages", "trainer.total_steps=2", "cluster.gpu_per_node=3", judge_model)
    config = resolve(Request(None, overrides)).config
    plan = build_plan(config)
    world = World(experiences=config.buffer.train_batch_size)
    handles = handles_for([a for a in plan.actors if a.role not in ("auxiliary", "explorer")], world)
    judge, explorer = Judge(World()), Asking(world)
    handles["auxiliary0.engine0"], handles["explorer"] = Handle(judge), Handle(explorer)
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    stage = Stage(config, "grpo", 0, RunDir(tmp_path / "run"), metrics, StageStart("model", 0), quiet=True)
    stage.setup(RoleHandles.of(list(plan.actors), handles), InlineWatcher())
    stage.run(loop(stage.mode))
    stage.finish()
    metrics.close()
    assert judge.calls == [("/models/judge", 0)]
    assert [len(group) for group in explorer.auxiliary] == [1] and explorer.auxiliary[0][0].role is judge
    assert [e for e in world.log if e[0] == "sync"] == [("sync", 1), ("sync", 2)]  # the rollout engine's alone
