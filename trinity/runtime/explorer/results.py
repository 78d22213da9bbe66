"""What a batch of rollouts measured: the explore and serve steps' metrics."""

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
