"""Each experience is consumed exactly once, also across a restart that rewinds to a checkpoint."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trinity.runtime.buffer import stores
from trinity.runtime.buffer.sqlite_store import SqliteStore
from trinity.runtime.experience import Experience


def exps(start, n):
    return [Experience([1], [2], reward=float(i), group=f"g{i}") for i in range(start, start + n)]


def rewards(items):
    return [e.reward for e in items]


def test_queue_with_sqlite_survives_a_restart(tmp_path):
    path = tmp_path / "buffer.db"
    queue = stores.MemoryQueue(SqliteStore(path))
    queue.add(exps(0, 6))
    assert rewards(queue.take(4, step=1)) == [0, 1, 2, 3]
    restarted = stores.MemoryQueue(SqliteStore(path))  # a new trainer process
    assert rewards(restarted.take(2, step=2)) == [4, 5] and restarted.take(1, step=3) == []


@pytest.mark.parametrize("store", ["sqlite", "file"])
def test_a_multi_turn_experience_keeps_its_mask_truncation_episode_and_turn_rewards_in_storage(tmp_path, store):
    made = Experience(
        [1], [2, 3, 4], [-0.5, 0.0, -0.5], 1.0, "g", action_mask=[1, 0, 1], truncated=True, episode="e",
        turn_rewards=[0.25, 0.75],
    )  # fmt: skip
    kept = stores.MemoryQueue(SqliteStore(tmp_path / "b.db")) if store == "sqlite" else stores.JsonlFile(tmp_path / "b")
    kept.add([made])
    if store == "sqlite":
        kept = stores.MemoryQueue(SqliteStore(tmp_path / "b.db"))  # read back from the file, as after a restart
    assert kept.take(1, step=1) == [made]


@pytest.mark.parametrize("store", ["sqlite", "file"])
def test_an_experiences_top_logprobs_and_run_survive_storage(tmp_path, store):
    made = Experience([1], [2, 3], [-0.5, -0.1], 1.0, "g", run=3, top_logprobs=[{2: -0.5, 9: -1.5}, {}])
    kept = stores.MemoryQueue(SqliteStore(tmp_path / "b.db")) if store == "sqlite" else stores.JsonlFile(tmp_path / "b")
    kept.add([made])
    if store == "sqlite":
        kept = stores.MemoryQueue(SqliteStore(tmp_path / "b.db"))
    assert kept.take(1, step=1) == [made]  # token ids as ints again, in their order


def test_top_logprobs_are_one_entry_per_response_token():
    with pytest.raises(ValueError, match="top_logprobs has 1 entries for 2 response tokens"):
        Experience([1], [2, 3], top_logprobs=[{2: -0.5}])


def test_rewind_gives_back_what_steps_after_the_checkpoint_took(tmp_path):
    store = SqliteStore(tmp_path / "b.db")
    store.add(exps(0, 6))
    store.take(2, step=1)
    store.take(2, step=2)
    assert store.rewind(after_step=1).given_back == 2  # the run resumes from the checkpoint of step 1
    assert rewards(store.take(4, step=2)) == [2, 3, 4, 5]


def test_plain_queue_waits_for_a_full_batch():
    queue = stores.MemoryQueue()
    queue.add(exps(0, 3))
    assert queue.take(4, step=1) == [] and rewards(queue.take(3, step=1)) == [0, 1, 2]


def test_jsonl_is_read_by_position(tmp_path):
    log = stores.JsonlFile(tmp_path / "exps.jsonl")
    log.add(exps(0, 5))
    assert rewards(log.take(2, step=2)) == [2, 3]  # step s reads lines (s-1)*n .. s*n-1: a resume needs no state
    assert log.take(2, step=3) == []


def test_sql_is_shared_by_two_processes_of_one_run(tmp_path):
    # an explore run and a train run
    writer, reader = (
        SqliteStore(tmp_path / "shared.db"),
        SqliteStore(tmp_path / "shared.db"),
    )
    writer.add(exps(0, 2))
    assert rewards(reader.take(2, step=1)) == [0, 1] and writer.waiting() == 0


class Tokenizer:
    eos_token_id = 0

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def as_text(items):
    return ["".join(map(chr, e.response_ids[:-1])) for e in items]


def test_an_sft_data_set_is_read_in_order_by_default_as_trinity_rfts():
    rows = [{"prompt": f"{i}+0=", "response": str(i)} for i in range(6)]
    from trinity.config.schema.buffer import FormatConfig

    data = stores.DataSet(rows, FormatConfig(), Tokenizer())
    assert [as_text(data.take(4, step)) for step in (1, 2, 3)] == [["0", "1", "2", "3"], ["4", "5", "0", "1"]] + [
        ["2", "3", "4", "5"]
    ]
    assert data.take(4, step=1)[0].response_ids[-1] == Tokenizer.eos_token_id  # the model learns to stop


SELECTED = [{"prompt": f"{i}+0=", "response": str(i), "easy": i % 3, "strong": 0.9} for i in range(6)]
FEATURES = {"offline_easy2hard": "[easy]", "difficulty_based": "[easy, strong]"}


@pytest.mark.parametrize("place", ["experience_buffer", "auxiliary_buffer"])
@pytest.mark.parametrize("name", ["sequential", "shuffle", "random", "offline_easy2hard", "difficulty_based"])
def test_a_trainers_data_set_reads_the_rows_its_selector_picks_by_step(demo_assets, tmp_path, monkeypatch, name, place):
    """The SFT data set of an SFT run (the buffer's) and of sample strategy mix (the trainer's), each read through
    its data_selector as the config gives it."""
    from tests.cli.test_run import GRPO_ONLY
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.buffer.actor import data_set
    from trinity.runtime.data import selectors
    from trinity.runtime.trainer.sampling import expert_data

    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    rows = tmp_path / "sft.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in SELECTED))
    chosen = f"{{selector_type: {name}, seed: 5, feature_keys: {FEATURES.get(name, '[]')}}}"
    data = f"path: {rows}, format: {{prompt_type: plaintext}}, data_selector: {chosen}"
    if place == "experience_buffer":
        overrides = ("mode=train", "algorithm.algorithm_type=sft", f"buffer.trainer_input.experience_buffer={{{data}}}")
    else:
        overrides = ("algorithm.algorithm_type=mix", f"+buffer.trainer_input.auxiliary_buffers.sft_dataset={{{data}}}")
    config = resolve(Request(None, ("hardware=cpu", *GRPO_ONLY[:1], *overrides))).config
    tokenizer = str(demo_assets / "model")
    if place == "experience_buffer":
        storage = config.buffer.trainer_input.experience_buffer
        read = data_set(storage, {"tokenizer": tokenizer, "model": config.model, "data": "sft"})
    else:
        storage = config.buffer.trainer_input.auxiliary_buffers["sft_dataset"]
        read = expert_data(config, tokenizer)
    picks = selectors.build(SELECTED, storage.data_selector)
    text = lambda items: [read.samples.index([e]) for e in items]  # noqa: E731 (which row each sample is)
    for step in (1, 2, 3):
        assert text(read.take(4, step)) == picks.pick((step - 1) * 4, 4)


def test_dpo_pairs_stay_adjacent_and_whole_in_every_step():
    from trinity.config.schema.buffer import FormatConfig

    rows = [{"prompt": f"{i}+1=", "chosen": str(i + 1), "rejected": str(i + 2)} for i in range(5)]
    data = stores.DataSet(rows, FormatConfig(), Tokenizer(), data="pairs")
    text = lambda e: ("".join(map(chr, e.prompt_ids)), "".join(map(chr, e.response_ids[:-1])))  # noqa: E731
    for step in (1, 2, 3):
        batch = [text(e) for e in data.take(4, step)]  # 4 experiences: 2 pairs
        assert len(batch) == 4
        for (prompt, chosen), (again, rejected) in zip(batch[::2], batch[1::2]):
            i = int(prompt.split("+")[0])
            assert (again, chosen, rejected) == (prompt, str(i + 1), str(i + 2))  # chosen first, same prompt


def test_cpt_text_trains_every_token_but_the_first():
    from trinity.config.schema.buffer import FormatConfig

    class WithBos(Tokenizer):
        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": [1] * add_special_tokens + [ord(c) for c in text]}

    data = stores.DataSet([{"text": "abc"}], FormatConfig(prompt_key="text"), WithBos(), data="text")
    [exp] = data.take(1, step=1)
    assert (exp.prompt_ids, exp.response_ids) == ([1], [ord("a"), ord("b"), ord("c")])  # no end of sequence added


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "take", "restart"]), st.integers(1, 4)), max_size=25))
def test_every_experience_is_trained_exactly_once(tmp_path_factory, ops):
    """Interleave puts, takes and restarts from the last 'checkpoint' (each take is one): none lost, nothing twice."""
    path = tmp_path_factory.mktemp("db") / "b.db"
    queue, produced, step, trained = stores.MemoryQueue(SqliteStore(path)), 0, 0, {}
    for op, n in ops:
        if op == "add":
            queue.add(exps(produced, n))
            produced += n
        elif op == "take":
            batch = queue.take(n, step + 1)
            if batch:
                step += 1
                trained[step] = rewards(batch)
        else:  # a crash after a checkpoint at a random earlier step
            checkpoint = step // 2
            trained = {s: r for s, r in trained.items() if s <= checkpoint}
            step = checkpoint
            queue = stores.MemoryQueue(SqliteStore(path))
            queue.rewind(checkpoint)
    consumed = [r for s in sorted(trained) for r in trained[s]]
    waiting = rewards(queue.take(produced - len(consumed), step + 1)) if produced > len(consumed) else []
    assert sorted(consumed + waiting) == list(range(produced))


def test_sft_samples_go_through_the_models_chat_template(demo_assets, tmp_path):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from trinity.config.schema.buffer import ExperienceBufferConfig
    from trinity.config.schema.model import ModelConfig
    from trinity.runtime.buffer.actor import data_set

    data = tmp_path / "chat.jsonl"
    data.write_text(
        json.dumps({"messages": [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]}) + "\n"
    )
    storage = ExperienceBufferConfig(
        name="sft", storage_type="file", path=str(data), format={"prompt_type": "messages", "messages_key": "messages"}
    )
    model = ModelConfig(model_path=str(demo_assets / "model"), custom_chat_template="{{ messages[-1].content }}=?")
    [[sample]] = data_set(storage, {"tokenizer": model.model_path, "seed": 0, "model": model, "data": "sft"}).samples
    tokenizer = AutoTokenizer.from_pretrained(model.model_path)
    assert sample.prompt_ids == tokenizer("1+1==?", add_special_tokens=False)["input_ids"]


def versioned(versions):
    return [Experience([1], [2], reward=float(i), weight_version=v) for i, v in enumerate(versions)]


def test_stale_experiences_are_dropped_and_a_rewind_gives_them_back_to_be_judged_again(tmp_path):
    path = tmp_path / "b.db"
    queue = stores.MemoryQueue(SqliteStore(path))
    queue.add(versioned([0, 1, 2, 0, 2]))
    assert queue.drop_stale(min_version=1, step=3) == 2  # made by weights 0, older than 1
    assert rewards(queue.take(3, step=3)) == [1, 2, 4] and queue.drop_stale(1, step=4) == 0
    restarted = stores.MemoryQueue(SqliteStore(path))
    assert restarted.persist.rewind(after_step=2).given_back == 5  # dropped ones count as the step's too
    restarted = stores.MemoryQueue(SqliteStore(path))
    assert restarted.drop_stale(min_version=2, step=3) == 3 and rewards(restarted.take(2, step=3)) == [2, 4]


def test_sql_drops_stale_experiences_by_their_weight_version(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    store.add(versioned([3, 1, 4, 1]))
    assert store.drop_stale(min_version=2, step=5) == 2 and store.waiting() == 2
    assert rewards(store.take(2, step=5)) == [0, 2]


def locked(path):
    """Another process's connection holding the database's write lock (as an explorer's write would)."""
    import sqlite3

    holder = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_an_operation_sqlite_refuses_is_tried_max_retry_times_then_its_error_stands(tmp_path):
    """As Trinity-RFT's SQL storage: max(1, max_retry_times) attempts, max_retry_interval seconds apart."""
    import sqlite3
    import time

    path = tmp_path / "b.db"
    for times, attempts in ((3, 3), (0, 1)):
        store = SqliteStore(path, retries=(times, 0.3), busy_s=0.01)
        holder = locked(path)
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            store.add(exps(0, 1))
        assert 0.3 * (attempts - 1) <= time.monotonic() - started < 0.3 * attempts
        holder.rollback()
    assert store.waiting() == 0


def test_a_lock_released_between_attempts_lets_the_next_one_through(tmp_path):
    import threading

    path = tmp_path / "b.db"
    store = SqliteStore(path, retries=(3, 0.6), busy_s=0.01)
    holder = locked(path)
    threading.Timer(0.2, holder.rollback).start()  # released while the store waits to try again
    store.add(exps(0, 2))
    assert rewards(store.take(2, step=1)) == [0.0, 1.0]


def test_the_experience_buffer_gives_its_sqlite_store_its_retries(tmp_path):
    from trinity.config.schema.buffer import ExperienceBufferConfig
    from trinity.runtime.buffer.actor import ExperienceBuffer

    storage = ExperienceBufferConfig(name="e", storage_type="sql", max_retry_times=5, max_retry_interval=2)
    buffer = ExperienceBuffer(storage=storage, run_dir=str(tmp_path), name="buffer", role="buffer")
    buffer.setup()
    assert (buffer.store.attempts, buffer.store.interval) == (5, 2)


def test_an_explore_step_is_stored_once_and_a_new_stage_numbers_its_steps_anew(tmp_path):
    """An explorer that died after the buffer took its step's put, before the call returned, is replaced and runs the
    step again: the second put of that step stores nothing (0), and the buffer's log says so. Puts without a step (the
    serve loop's) are stored as they come; setup (each stage's) starts the steps anew."""
    import asyncio

    from trinity.config.schema.buffer import ExperienceBufferConfig
    from trinity.runtime.buffer.actor import ExperienceBuffer

    storage = ExperienceBufferConfig(name="e", storage_type="queue")
    buffer = ExperienceBuffer(
        storage=storage, run_dir=str(tmp_path), name="buffer", role="buffer", log_dir=str(tmp_path)
    )
    buffer.setup()
    assert buffer.put(exps(0, 2), step=1) == 2
    assert buffer.put(exps(10, 2), step=1) == 0  # the step's second run
    assert buffer.put(exps(20, 1)) == 1 and buffer.put(exps(30, 1)) == 1  # no step: each stored
    assert buffer.put(exps(40, 2), step=2) == 2
    taken = asyncio.run(buffer.get(6, 1, 1.0))
    assert rewards(taken) == rewards(exps(0, 2) + exps(20, 1) + exps(30, 1) + exps(40, 2))
    assert "explore step 1 was stored already" in (tmp_path / "buffer.log").read_text()
    buffer.setup()  # the next stage
    assert buffer.put(exps(50, 2), step=1) == 2
