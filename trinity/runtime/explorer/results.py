"""What a batch of rollouts measured: the explore and serve steps' metrics, and an evaluation's spread over its
tasks."""

import statistics

from ..experience import Experience


def batch_metrics(exps: list[Experience], seconds: float, failed: int = 0) -> dict:
    """The metrics of a batch of rollouts made in `seconds` (an explore or serve step), `failed` tasks aside."""
    tokens = sum(sum(e.mask()) for e in exps)  # the model's: an episode's environment turns were not generated
    versions = [e.weight_version for e in exps]
    # what the workflows measured beyond the reward (accuracy, turns, tool_calls, ...), as a mean over the rollouts
    named = sorted({k for e in exps for k in e.metrics} - {"prompt_truncated"})
    means = {f"{k}_mean": sum(e.metrics.get(k, 0.0) for e in exps) / len(exps) for k in named}
    return {
        "workflow_metrics": means,
        "reward_mean": sum(e.reward for e in exps) / len(exps) if exps else 0.0,
        "response_length_mean": tokens / len(exps) if exps else 0.0,
        "tokens_per_s": tokens / seconds if seconds > 0 else 0.0,
        "weight_version": max(versions) if versions else None,
        "experiences": len(exps),
        "failed_tasks": failed,
        "truncated_prompts": sum(1 for e in exps if e.metrics.get("prompt_truncated")),
        "seconds": seconds,
    }


# monitor.detailed_stats -> what an evaluation line gives over an eval taskset's tasks beside each mean (Trinity-RFT's
# aggregate_eval_metrics: the mean alone, or mean, max, min and std)
EVAL_STATS: dict[bool, tuple[str, ...]] = {False: (), True: ("max", "min", "std")}
STATISTICS = {"max": max, "min": min, "std": statistics.pstdev}  # numpy's std, as upstream's, is the population's


def task_spread(exps: list[Experience], stats: tuple[str, ...]) -> dict[str, float]:
    """`stats` over the tasks of `exps` of their accuracy, reward and each workflow metric, each task's rollouts
    averaged first (Trinity-RFT's per-task metrics): {name}_{stat}."""
    by_task: dict[str, list[Experience]] = {}
    for exp in exps:
        by_task.setdefault(exp.group, []).append(exp)
    tasks = [_task_means(group) for group in by_task.values()]
    names = sorted({name for task in tasks for name in task})
    return {f"{name}_{stat}": STATISTICS[stat]([t.get(name, 0.0) for t in tasks]) for name in names for stat in stats}


def _task_means(exps: list[Experience]) -> dict[str, float]:
    """A task's accuracy (its reward where the workflow reports none), reward and workflow metrics, averaged."""
    values = [
        {"accuracy": e.metrics.get("accuracy", e.reward), "reward": e.reward}
        | {k: v for k, v in e.metrics.items() if k not in ("accuracy", "prompt_truncated")}
        for e in exps
    ]
    names = {name for v in values for name in v}
    return {name: sum(v.get(name, 0.0) for v in values) / len(values) for name in names}
