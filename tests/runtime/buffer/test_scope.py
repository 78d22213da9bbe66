"""A persisted store's rows belong to the stage that stored them: what a stage reads, and what its (re)start gives
back and drops, through the experience buffer as a run drives it (its setup, the explorer's puts, the trainer's
takes), for each storage type that outlives a stage."""

import asyncio
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trinity.config.schema.buffer import ExperienceBufferConfig
from trinity.runtime.buffer.actor import ExperienceBuffer
from trinity.runtime.buffer.scope import Scope, scope_name
from trinity.runtime.buffer.sqlite_store import SqliteStore
from trinity.runtime.buffer.stores import JsonlFile
from trinity.runtime.experience import Experience

PERSISTED = {
    "sql": {"storage_type": "sql"},
    "queue over sqlite": {"storage_type": "queue", "path": "sqlite:///e.db"},
    "file": {"storage_type": "file"},
}
N = 2  # experiences a train step takes


def buffer(folder, storage: str) -> ExperienceBuffer:
    config = ExperienceBufferConfig(name="e", **PERSISTED[storage])
    # a name of its own: a role's logger keeps the file of the first test that made it (test_buffer.py reads "buffer")
    return ExperienceBuffer(storage=config, run_dir=str(folder), name="scoped", role="buffer", log_dir=str(folder))


def scope(stage: str, explores: bool = True) -> Scope:
    return Scope(f"/runs/demo#{stage}", explores, N)


def exps(step: int, count: int, tag: str = "", version: int = 0) -> list[Experience]:
    return [Experience([1], [2], group=f"{tag}{step}.{i}", weight_version=version) for i in range(count)]


def take(buf: ExperienceBuffer, step: int, n: int = N) -> list[str] | None:
    taken = asyncio.run(buf.get(n, step, timeout_s=0, until_drained=True))
    return None if taken is None else [e.group for e in taken]


def test_a_stages_name_in_a_store_says_what_it_does_and_not_which_mode_of_those_that_do_the_same():
    name = {"explores": True, "serves": False, "trains": True}  # both and colocate alike
    assert scope_name("1f2e", "grpo", name) == "1f2e#grpo#explores+trains"
    assert scope_name("1f2e", "run", {"explores": False, "serves": True, "trains": False}) == "1f2e#run#serves"


def waiting_groups(folder, storage: str) -> list[str]:
    """Every row no stage consumed, read past the stores' scopes (JSONL, read by position: every line)."""
    if storage == "file":
        lines = (folder / "e.jsonl").read_text().splitlines()
        return [e.group for e in JsonlFile(folder / "e.jsonl").take(len(lines), 1)]
    return [e.group for e in SqliteStore(folder / "e.db").pending()]


@pytest.mark.parametrize("storage", PERSISTED)
def test_a_stage_that_explores_reads_its_own_rows_and_a_stage_that_only_trains_reads_every_row(tmp_path, storage):
    first = buffer(tmp_path, storage)
    first.setup(scope=scope("grpo"), trained=0)
    first.put(exps(1, 3, "grpo-"), step=1)
    assert take(first, 1) == ["grpo-1.0", "grpo-1.1"]  # one left over
    second = buffer(tmp_path, storage)
    second.setup(scope=scope("grpo2"), trained=0)
    assert take(second, 1) is None  # the earlier stage's leftover is not this stage's
    second.put(exps(1, 2, "grpo2-"), step=1)
    assert take(second, 1) == ["grpo2-1.0", "grpo2-1.1"]
    trains = buffer(tmp_path, storage)  # a train run of what others explored (mode: train)
    assert trains.setup(scope=scope("train", explores=False), trained=0)["waiting"] == (1 if storage != "file" else 5)
    expected = ["grpo-1.2"] if storage != "file" else ["grpo-1.0"]  # JSONL: read by position, from its first line
    assert take(trains, 1, n=1) == expected


@pytest.mark.parametrize("storage", ["sql", "queue over sqlite"])
def test_a_stages_restart_gives_back_its_own_later_steps_and_no_other_stages(tmp_path, storage):
    SqliteStore(tmp_path / "e.db").add(exps(0, 8))  # another run's explorer
    first = buffer(tmp_path, storage)
    first.setup(scope=scope("a", explores=False), trained=0)
    assert [take(first, step) for step in (1, 2, 3)] == [["0.0", "0.1"], ["0.2", "0.3"], ["0.4", "0.5"]]
    second = buffer(tmp_path, storage)
    second.setup(scope=scope("b", explores=False), trained=0)
    assert take(second, 1) == ["0.6", "0.7"]
    again = buffer(tmp_path, storage)  # stage b restarted from the start: its step 1 given back, not a's steps 2, 3
    assert again.setup(scope=scope("b", explores=False), trained=0, resumed=True)["waiting"] == 2
    assert take(again, 1) == ["0.6", "0.7"]
    resumed = buffer(tmp_path, storage)  # stage a resumed from its checkpoint of step 1
    assert resumed.setup(scope=scope("a", explores=False), trained=1, resumed=True)["waiting"] == 4
    assert take(resumed, 2) == ["0.2", "0.3"]


@pytest.mark.parametrize("storage", PERSISTED)
def test_a_resumed_stage_drops_its_later_explore_steps_and_keeps_a_step_a_kept_train_step_took_part_of(
    tmp_path, storage
):
    """Explore steps 1-4 stored 1, 3, 2, 2 experiences, train steps 1-3 took 2 each (step 1 explore step 1's one and
    the first of explore step 2): resumed from the checkpoint of train step 1, explore step 2, which it took part of,
    is kept whole (its second run stores nothing) and steps 3 and 4 are dropped, to be explored again."""
    buf = buffer(tmp_path, storage)
    buf.setup(scope=scope("grpo"), trained=0)
    other = buffer(tmp_path, storage)
    other.setup(scope=scope("other"), trained=0)
    for step, count in ((1, 1), (2, 3), (3, 2), (4, 2)):
        buf.put(exps(step, count), step=step)
        other.put(exps(step, 1, "o"), step=step)  # another stage's rows between: never dropped, never read here
    assert [take(buf, step) for step in (1, 2, 3)] == [["1.0", "2.0"], ["2.1", "2.2"], ["3.0", "3.1"]]
    resumed = buffer(tmp_path, storage)
    info = resumed.setup(scope=scope("grpo"), trained=1, resumed=True)
    assert info["waiting"] == 2 and resumed.explored == {1, 2}
    # train step 2's two given back (a JSONL store, read by position, needs no record of it); 3.0-4.1 dropped
    assert (info["given_back"], info["dropped"]) == (0 if storage == "file" else 2, 4)
    assert resumed.put(exps(2, 3, "again"), step=2) == 0  # explore step 2 runs again: stored once
    assert resumed.put(exps(3, 2, "new"), step=3) == 2
    assert take(resumed, 2) == ["2.1", "2.2"] and take(resumed, 3) == ["new3.0", "new3.1"]
    assert [g for g in waiting_groups(tmp_path, storage) if g.startswith("o")] == ["o1.0", "o2.0", "o3.0", "o4.0"]


@pytest.mark.parametrize("storage", PERSISTED)
def test_an_explore_step_up_to_the_checkpoint_that_no_kept_step_took_stays(tmp_path, storage):
    """Explore steps store 4 each, train steps take 2: resumed from the checkpoint of train step 2 (explore step 1
    taken), explore step 2 waits whole (the explorer goes on at step 3, never making it again); step 3 is dropped."""
    buf = buffer(tmp_path, storage)
    buf.setup(scope=scope("grpo"), trained=0)
    for step in (1, 2, 3):
        buf.put(exps(step, 4), step=step)
    assert [take(buf, step) for step in (1, 2, 3)] == [["1.0", "1.1"], ["1.2", "1.3"], ["2.0", "2.1"]]
    resumed = buffer(tmp_path, storage)
    info = resumed.setup(scope=scope("grpo"), trained=2, resumed=True)
    assert (info["waiting"], info["dropped"], resumed.explored) == (4, 4, {1, 2})
    assert take(resumed, 3) == ["2.0", "2.1"] and take(resumed, 4) == ["2.2", "2.3"]


def test_a_database_of_an_earlier_trinity_gains_the_columns_and_its_rows_count_as_the_stages(tmp_path):
    db = sqlite3.connect(str(tmp_path / "e.db"))
    db.execute("CREATE TABLE experiences (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, consumed_step INT)")
    db.executemany(
        "INSERT INTO experiences (body, consumed_step) VALUES (?, ?)",
        [(e.to_json(), step) for e, step in zip(exps(0, 4), (1, 1, 2, None))],
    )
    db.commit()
    fresh = buffer(tmp_path, "sql")
    assert fresh.setup(scope=scope("grpo"), trained=0)["waiting"] == 1  # a new stage: only what waited
    resumed = buffer(tmp_path, "sql")
    assert resumed.setup(scope=scope("grpo"), trained=1, resumed=True)["waiting"] == 2  # step 2's given back
    assert take(resumed, 2) == ["0.2", "0.3"]


@settings(max_examples=60, deadline=None)
@given(
    storage=st.sampled_from(sorted(PERSISTED)),
    made=st.lists(st.integers(0, 2 * N), min_size=12, max_size=12),  # what each explore step stores
    ops=st.lists(st.sampled_from(["explore", "train", "crash"]), max_size=40),
    ahead=st.integers(0, 2),  # explore steps the explorer may run ahead of the trainer's weights
    back=st.integers(0, 3),  # a crash resumes from the checkpoint this many train steps back
)
def test_across_crashes_each_explore_steps_rows_are_stored_once_and_trained_once(
    tmp_path_factory, storage, made, ops, ahead, back
):
    """A stage that explores and trains, driven as the scheduler does (explore step s with the weights of the last
    train step, at most `ahead` steps ahead; train step t after explore step t, when N experiences wait), crashing
    and resuming from an earlier checkpoint, the explorer going on from it: in the end every explore step's rows of
    one run are trained or waiting, each once, and none kept were made by weights the crash lost."""
    folder = tmp_path_factory.mktemp("run")
    buf, explored, trained, lineage = buffer(folder, storage), 0, 0, {}  # lineage: train step -> groups it took
    buf.setup(scope=scope("grpo"), trained=0)
    runs = {}  # explore step -> (which run of it the buffer keeps, the weights that made it)
    for op in ops:
        if op == "explore" and explored < len(made) and explored <= trained + ahead:
            explored += 1
            run = f"r{len(runs)}-"
            if buf.put(exps(explored, made[explored - 1], run, version=trained), step=explored):
                runs[explored] = (run, trained)
            elif made[explored - 1]:
                assert explored in runs  # a step stored already
        elif op == "train" and trained < explored and (groups := take(buf, trained + 1)) is not None:
            trained += 1
            lineage[trained] = groups
        elif op == "crash":
            checkpoint = max(0, trained - back)
            lineage = {t: g for t, g in lineage.items() if t <= checkpoint}
            buf = buffer(folder, storage)
            buf.setup(scope=scope("grpo"), trained=checkpoint, resumed=True)
            assert all(step in buf.explored for step in runs if step <= checkpoint)  # none a kept step made is lost
            runs = {step: run for step, run in runs.items() if step in buf.explored}
            assert all(version <= checkpoint for _, version in runs.values())  # no weights the crash lost
            explored = trained = checkpoint
    kept = [g for t in sorted(lineage) for g in lineage[t]]
    position = trained * N  # what waits, one at a time (a JSONL store reads by position: one line a step)
    while (one := take(buf, position + 1, n=1)) is not None:
        kept += one
        position += 1
    assert {s for s in range(1, explored + 1) if made[s - 1]} <= set(runs)  # every step explored is stored
    assert len(kept) == len(set(kept))  # none twice
    assert set(kept) == {f"{run}{s}.{i}" for s, (run, _) in runs.items() for i in range(made[s - 1])}


def test_a_jsonl_line_cut_off_by_a_killed_writer_is_dropped_before_the_next_is_written(tmp_path):
    buf = buffer(tmp_path, "file")
    buf.setup(scope=scope("grpo"), trained=0)
    buf.put(exps(1, 2), step=1)
    assert take(buf, 1) == ["1.0", "1.1"]
    with (tmp_path / "e.jsonl").open("a") as fh:
        fh.write(exps(2, 1)[0].to_json(_stored_by=scope("grpo").name, _explore_step=2)[:40])  # killed in its write
    resumed = buffer(tmp_path, "file")
    assert resumed.setup(scope=scope("grpo"), trained=1, resumed=True)["dropped"] == 0  # the file as it was
    assert resumed.put(exps(2, 2, "again"), step=2) == 2
    assert take(resumed, 2) == ["again2.0", "again2.1"]


class Failing:
    """An SQLite connection whose disk fails: inside a put's rows (`at="rows"`, after the first), or at its commit."""

    def __init__(self, db, at: str):
        self.db, self.at = db, at

    @property
    def in_transaction(self) -> bool:
        return self.db.in_transaction

    def execute(self, statement, *args):
        if statement == "COMMIT" and self.at == "commit":
            self.at = ""  # once
            raise sqlite3.OperationalError("disk I/O error")
        return self.db.execute(statement, *args)

    def executemany(self, statement, rows):
        if self.at != "rows":
            return self.db.executemany(statement, rows)
        self.db.execute(statement, rows[0])
        raise sqlite3.OperationalError("disk I/O error")


@pytest.mark.parametrize("at", ["rows", "commit"])
def test_an_sqlite_write_is_all_or_nothing_and_the_next_goes_through(tmp_path, at):
    """A put that fails inside its transaction (the disk, on its second row or at its commit) leaves none of its
    rows, and the store writes on."""
    store = SqliteStore(tmp_path / "e.db", retries=(1, 0.0), scope=scope("grpo"))
    store.db = Failing(store.db, at)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        store.add(exps(1, 2), step=1)
    assert SqliteStore(tmp_path / "e.db").pending() == []
    store.db = store.db.db
    store.add(exps(2, 1), step=2)
    assert [e.group for e in SqliteStore(tmp_path / "e.db").pending()] == ["2.0"]


@pytest.mark.parametrize("storage", PERSISTED)
def test_an_explore_stage_restarted_stores_its_steps_once(tmp_path, storage):
    """A stage that does not train gives back and drops nothing as it sets up again; a step it stored already is not
    stored again."""
    buf = buffer(tmp_path, storage)
    buf.setup(scope=scope("run", explores=False))
    assert buf.put(exps(1, 2), step=1) == 2
    again = buffer(tmp_path, storage)
    assert again.setup(scope=scope("run", explores=False), resumed=True)["dropped"] == 0
    assert again.put(exps(1, 2, "again"), step=1) == 0 and again.put(exps(2, 2), step=2) == 2
    assert waiting_groups(tmp_path, storage) == ["1.0", "1.1", "2.0", "2.1"]
