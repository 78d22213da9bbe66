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
    assert store.rewind(after_step=1) == 2  # the run resumes from the checkpoint of step 1
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


def test_sft_data_set_shuffles_each_epoch_and_covers_every_sample():
    rows = [{"prompt": f"{i}+0=", "response": str(i)} for i in range(6)]
    from trinity.config.schema.buffer import FormatConfig

    data = stores.DataSet(rows, FormatConfig(), Tokenizer(), seed=3)
    first, second = data.take(3, step=1) + data.take(3, step=2), data.take(3, step=3) + data.take(3, step=4)
    as_text = lambda items: sorted("".join(map(chr, e.response_ids[:-1])) for e in items)  # noqa: E731
    assert as_text(first) == as_text(second) == [str(i) for i in range(6)]
    assert first[0].response_ids[-1] == Tokenizer.eos_token_id  # the model learns to stop
    assert data.take(3, step=1) == data.take(3, step=1)  # by position: the same step reads the same samples


def test_dpo_pairs_stay_adjacent_and_whole_in_every_step():
    from trinity.config.schema.buffer import FormatConfig

    rows = [{"prompt": f"{i}+1=", "chosen": str(i + 1), "rejected": str(i + 2)} for i in range(5)]
    data = stores.DataSet(rows, FormatConfig(), Tokenizer(), seed=1, data="pairs")
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

    data = stores.DataSet([{"text": "abc"}], FormatConfig(prompt_key="text"), WithBos(), seed=0, data="text")
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
    assert restarted.persist.rewind(after_step=2) == 5  # dropped ones count as the step's too
    restarted = stores.MemoryQueue(SqliteStore(path))
    assert restarted.drop_stale(min_version=2, step=3) == 3 and rewards(restarted.take(2, step=3)) == [2, 4]


def test_sql_drops_stale_experiences_by_their_weight_version(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    store.add(versioned([3, 1, 4, 1]))
    assert store.drop_stale(min_version=2, step=5) == 2 and store.waiting() == 2
    assert rewards(store.take(2, step=5)) == [0, 2]
