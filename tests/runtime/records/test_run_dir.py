"""The run directory: one live run per mode, config with its hash, checkpoints published whole."""

import json
import multiprocessing
import os

import pytest

from trinity.errors import ConfigError, LockError
from trinity.runtime.records.run_dir import Checkpoint, RunDir, config_hash


def hold_lock(root, mode, ready, release):
    with RunDir(root).lock(mode):
        ready.set()
        release.wait(30)


def test_a_second_run_of_the_same_name_is_refused_while_the_first_lives(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=hold_lock, args=(tmp_path, "both", ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(
            ConfigError, match=rf"is in use by a live run \(explore lock held by pid {holder.pid}"
        ) as err:
            with RunDir(tmp_path).lock("explore"):
                pass
        assert isinstance(err.value, LockError)
        assert err.value.report().startswith("trinity: the run directory is in use\nerror: name: ")
    finally:
        release.set()
        holder.join(30)
    with RunDir(tmp_path).lock("both"):  # released when its holder ended
        pass


def test_explore_and_train_runs_may_share_a_run(tmp_path):
    with RunDir(tmp_path).lock("explore"), RunDir(tmp_path).lock("train"):
        pass


def made_id(root, ready, go, out):
    ready.set()
    go.wait(30)
    out.put(RunDir(root).run_id())


def test_a_runs_id_is_made_once_and_read_the_same_by_any_path_and_by_runs_starting_at_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    ready, go, out = [ctx.Event() for _ in range(4)], ctx.Event(), ctx.Queue()
    racers = [ctx.Process(target=made_id, args=(tmp_path / "run", r, go, out)) for r in ready]
    for racer in racers:
        racer.start()
    for r in ready:
        r.wait(30)
    go.set()  # four processes make it at once: one's id wins, and each reads that one
    ids = {out.get(timeout=30) for _ in racers}
    for racer in racers:
        racer.join(30)
    (tmp_path / "link").symlink_to(tmp_path / "run")
    assert len(ids) == 1 and ids == {RunDir(tmp_path / "link").run_id()}
    (tmp_path / "run").rename(tmp_path / "moved")
    assert RunDir(tmp_path / "moved").run_id() in ids and not [p for p in os.listdir(tmp_path / "moved") if "." in p]


def test_a_file_written_once_is_readable_as_a_plain_file_is_and_made_where_links_are_not_had(tmp_path, monkeypatch):
    from trinity.utils import atomic

    assert atomic.write_once(tmp_path / "a", "first\n") == "first\n" == atomic.write_once(tmp_path / "a", "second\n")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o666 & ~umask  # a train run of another uid reads it

    def no_links(*args):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "link", no_links)
    assert atomic.write_once(tmp_path / "b", "made\n") == "made\n" == atomic.write_once(tmp_path / "b", "other\n")
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]


def test_config_is_saved_with_its_hash(tmp_path):
    data = {"name": "x", "model": {"model_path": "m"}}
    run = RunDir(tmp_path)
    digest = run.write_config(data)
    assert run.config.read_text().startswith(f"# sha256: {digest}\n") and run.saved_config() == data
    assert digest == config_hash({"model": {"model_path": "m"}, "name": "x"})  # key order does not matter


def test_only_published_checkpoints_count_and_old_ones_are_pruned(tmp_path):
    run = RunDir(tmp_path)
    for step in (1, 2, 3):
        run.save_checkpoint(
            Checkpoint(tmp_path, step, "s", 0, step, 3),
            lambda folder: (folder / "model.safetensors").write_text("w"),
            keep=2,
        )
    (run.checkpoints / "global_step_9").mkdir()  # a crash mid-write leaves no state.json
    assert [c.global_step for c in run.complete_checkpoints()] == [2, 3]
    assert run.latest().stage_done and json.loads((run.latest().path / "state.json").read_text())["stage_step"] == 3


def test_a_checkpoint_that_fails_midway_leaves_nothing(tmp_path):
    run = RunDir(tmp_path)

    def broken(folder):
        (folder / "half").write_text("x")
        raise OSError("disk full")

    with pytest.raises(OSError):
        run.save_checkpoint(Checkpoint(tmp_path, 5, "s", 0, 5, 9), broken, keep=None)
    assert os.listdir(run.checkpoints) == [] and run.latest() is None


def test_pruning_keeps_the_full_model_a_kept_lora_checkpoint_adapts(tmp_path):
    """A full stage, then LoRA checkpoints naming its last checkpoint as their base: pruning spares that base."""
    run = RunDir(tmp_path)
    run.save_checkpoint(
        Checkpoint(tmp_path, 1, "sft", 0, 1, 1), lambda folder: (folder / "model.safetensors").write_text("w"), keep=1
    )
    base = str(run.checkpoints / "global_step_1")

    def adapter(folder):
        (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base}))

    for step in (2, 3):
        run.save_checkpoint(Checkpoint(tmp_path, step, "grpo", 1, step - 1, 2), adapter, keep=1)
    assert [c.global_step for c in run.complete_checkpoints()] == [1, 3]  # 2 pruned, 1 kept as 3's base
