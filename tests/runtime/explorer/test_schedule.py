"""Which rows each explore step reads (trinity/runtime/explorer/schedule.py): the tasksets' selectors, several tasksets
dealt slots as Trinity-RFT 0.6.0's taskset scheduler deals them, every step a function of the step, and the pass rates
a learning selector was fed given back on resume."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from trinity.config.schema.buffer import DataSelectorConfig
from trinity.runtime.data import selectors
from trinity.runtime.explorer.schedule import FeedbackLog, Schedule, eval_rows


def selector(size, name="sequential", **settings):
    rows = [{"weak": (i % 4) / 4, "strong": 0.2 + (i % 4) / 5} for i in range(size)]
    features = ["weak", "strong"] if name == "difficulty_based" else []
    return selectors.build(rows, DataSelectorConfig(selector_type=name, feature_keys=features, **settings))


# Trinity-RFT 0.6.0's TasksetScheduler (buffer/task_scheduler.py, run with a sequential taskset of 5 rows and a shuffle
# one of 3 rows, seed 7, batch_size 4): the (taskset, row) of each of its first six reads
UPSTREAM = [
    [(0, 0), (0, 1), (0, 2), (1, 0)],
    [(1, 2), (1, 1), (0, 3), (0, 4)],
    [(1, 1), (0, 0), (0, 1), (0, 2)],
    [(0, 3), (0, 4), (1, 2), (1, 0)],
    [(1, 2), (1, 0), (1, 1), (0, 0)],
    [(0, 1), (0, 2), (0, 3), (0, 4)],
]


def test_several_tasksets_are_dealt_slots_as_trinity_rfts_scheduler_deals_them():
    schedule = Schedule([selector(5), selector(3, "shuffle", seed=7)], 4)
    assert [schedule.batch(step) for step in range(1, 7)] == UPSTREAM


def test_one_taskset_reads_its_selectors_positions():
    only = selector(10, "shuffle")
    schedule = Schedule([only], 4)
    assert [schedule.batch(s) for s in (1, 3)] == [[(0, r) for r in only.pick(0, 4)], [(0, r) for r in only.pick(8, 4)]]


@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.integers(1, 7))
def test_the_slots_read_every_row_of_every_taskset_as_often(sizes, batch):
    """Whatever the sizes and the batch: as many steps as the tasksets have rows read each row batch_size times."""
    schedule = Schedule([selector(n, "shuffle") for n in sizes], batch)
    read = Counter(slot for step in range(1, sum(sizes) + 1) for slot in schedule.batch(step))
    assert sorted(read) == [(t, r) for t, n in enumerate(sizes) for r in range(n)]
    assert set(read.values()) == {batch}


@given(st.integers(1, 30))
def test_a_step_reads_the_same_whatever_was_read_before(step):
    """A resumed run, which starts at its step with nothing read, reads what an unbroken one reads there."""
    unbroken = Schedule([selector(5), selector(7, "random")], 3)
    for before in range(1, step):
        unbroken.batch(before)
    assert Schedule([selector(5), selector(7, "random")], 3).batch(step) == unbroken.batch(step)


def learning(rates_by_step):
    schedule = Schedule([selector(8, "difficulty_based", kwargs={"tau": 0})], 2)
    for rates in rates_by_step:
        schedule.feedback(rates)
    return schedule


RATES = [{(0, 0): 1.0, (0, 1): 0.0}, {(0, 2): 0.5, (0, 3): 1.0}, {(0, 4): 0.0, (0, 5): 0.25}]


def test_the_feedback_log_gives_a_resumed_selector_what_it_had_learnt_by_the_checkpoint(tmp_path):
    log = FeedbackLog(tmp_path / "selectors" / "stage_0.jsonl")
    for step, rates in enumerate(RATES, 1):
        log.add(step, rates)
    resumed = learning([])
    log.replay(resumed, done=2)  # resumed from step 2's checkpoint
    assert resumed.batch(3) == learning(RATES[:2]).batch(3) != learning(RATES).batch(3)
    # step 3, explored again after the resume, is forgotten: the log holds what the checkpoint's steps taught
    assert [line.split(",")[0] for line in log.path.read_text().splitlines()] == ['{"step": 1', '{"step": 2']
    again = learning([])
    FeedbackLog(log.path).replay(again, done=0)
    assert again.batch(3) == learning([]).batch(3) and log.path.read_text() == ""


def test_feedback_reaches_only_the_taskset_it_is_about():
    learner, fixed = selector(4, "difficulty_based", kwargs={"tau": 0}), selector(4)
    schedule = Schedule([fixed, learner], 4)
    schedule.feedback({(1, 3): 1.0, (1, 1): 0.0})
    assert learner.estimate.mean()[3] > 0.5 > learner.estimate.mean()[1]
    assert schedule.learns and not Schedule([fixed], 4).learns


def test_an_evaluation_reads_as_many_rows_as_its_taskset_has_a_batch_at_a_time():
    assert eval_rows(selector(5), 2) == [0, 1, 2, 3, 4]
    shuffled = selector(5, "shuffle")
    assert eval_rows(shuffled, 2) == shuffled.pick(0, 5)
    drawn = selector(5, "random")  # each batch a fresh draw: rows may repeat, others go unread
    assert eval_rows(drawn, 2) == drawn.pick(0, 2) + drawn.pick(2, 2) + drawn.pick(4, 2)[:1]
