"""A task's rollouts split into runs (explorer.max_repeat_times_per_runner) and numbered as Trinity-RFT numbers them
(explorer/scheduler.py `_split_and_submit_tasks`: sub-tasks of min(most, rest) runs from run_id_base; eid.run =
run_id_base + i)."""

from hypothesis import given
from hypothesis import strategies as st

from trinity.runtime.experience import Experience
from trinity.runtime.explorer.runs import numbered, split
from trinity.runtime.workflows import Task


def task(repeat_times: int) -> Task:
    return Task("ts/train/0", {"prompt": "1+1="}, None, repeat_times)


@given(repeats=st.integers(1, 64), most=st.one_of(st.none(), st.integers(1, 70)))
def test_the_runs_of_a_split_task_are_its_rollouts_each_once_in_order_at_most_most_in_a_part(repeats, most):
    parts = split(task(repeats), most)
    runs = [base + i for base, part in parts for i in range(part.repeat_times)]
    assert runs == list(range(repeats))  # every rollout once, numbered in order
    assert all(part.repeat_times <= (most or repeats) for _, part in parts)
    assert len(parts) == -(-repeats // (most or repeats))  # as few parts as that allows: upstream's range(0, n, most)
    assert all(part.uid == "ts/train/0" for _, part in parts)  # one task, one group


def test_upstreams_split_of_16_rollouts_by_5():
    assert [(base, part.repeat_times) for base, part in split(task(16), 5)] == [(0, 5), (5, 5), (10, 5), (15, 1)]
    assert [(base, part.repeat_times) for base, part in split(task(16), None)] == [(0, 16)]


def exp(episode: str = "") -> Experience:
    return Experience([1], [2], episode=episode)


def test_each_rollout_is_numbered_from_its_parts_first_run():
    assert [e.run for e in numbered([exp(), exp(), exp()], 5)] == [5, 6, 7]


def test_the_experiences_of_one_episode_are_one_run():
    made = numbered([exp("a"), exp("a"), exp("b"), exp(), exp("b")], 2)
    assert [e.run for e in made] == [2, 2, 3, 4, 3]
