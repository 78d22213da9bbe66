"""An evaluation's spread over its tasks (monitor.detailed_stats): each task's rollouts averaged first, then max, min
and std over the tasks, as Trinity-RFT's aggregate_eval_metrics computes them (numpy's population std)."""

import numpy as np
import pytest

from trinity.runtime.experience import Experience
from trinity.runtime.explorer.results import EVAL_STATS, task_spread


def rollout(task: str, reward: float, **metrics: float) -> Experience:
    return Experience([1], [2], [-0.5], reward=reward, group=task, metrics=metrics)


EXPS = [
    rollout("t0", 1.0, accuracy=1.0, turns=2.0),
    rollout("t0", 0.0, accuracy=0.0, turns=4.0),
    rollout("t1", 1.0, accuracy=1.0, turns=1.0, prompt_truncated=1.0),
    rollout("t2", 0.5),  # a workflow that reports no accuracy: its reward is
]


def test_detailed_stats_give_max_min_and_std_over_the_tasks_of_each_metric():
    spread = task_spread(EXPS, EVAL_STATS[True])
    per_task = {"accuracy": [0.5, 1.0, 0.5], "reward": [0.5, 1.0, 0.5], "turns": [3.0, 1.0, 0.0]}
    for name, values in per_task.items():
        assert spread[f"{name}_max"] == np.max(values) and spread[f"{name}_min"] == np.min(values)
        assert spread[f"{name}_std"] == pytest.approx(np.std(values))
    assert set(spread) == {f"{n}_{s}" for n in per_task for s in ("max", "min", "std")}  # prompt_truncated aside


def test_without_detailed_stats_an_evaluation_gives_its_means_alone():
    assert task_spread(EXPS, EVAL_STATS[False]) == {}
