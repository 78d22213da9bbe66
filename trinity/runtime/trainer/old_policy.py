"""The old policy's log-probs from the update's own forward pass, where nothing reads them before the update.

Each train step is one mini-batch of one epoch (step.Step._meta): the update's forward pass runs on the step's batch
at the weights the rollouts' old policy is taken at, so its log-probs, detached, are the old policy's. The forward
pass trinity would otherwise run before the update (verl's compute_log_prob: a third of the update's compute, as a
forward is a third of a forward and backward) repeats it; verl's own actor does the same where a step is one
mini-batch of one epoch (dp_actor: old_log_prob = log_prob.detach()). Where the step reads the old policy before its
update (queries.reads_old_policy_before_update) or takes the engines' as it (algorithm.bypass_old_logprobs), the
trainer computes it before, as ever.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...config.algorithms.queries import is_rl_loss, reads_old_policy_before_update
from ...config.schema import RunConfig

if TYPE_CHECKING:
    from tensordict import TensorDict

# the mean absolute difference between the trainer's log-probs of the responses and the engines', over the batch's
# response tokens: how far the engines' numerics were from the trainer's (TrainResult's logprob_diff)
DIFF = "logprob_diff"


def taken_in_update(config: RunConfig) -> bool:
    """Whether the run's train steps take the old policy from the update's forward pass."""
    algorithm = config.algorithm
    rl = is_rl_loss(algorithm.policy_loss_fn)  # SFT and DPO batches have no old policy
    return rl and not algorithm.bypass_old_logprobs and not reads_old_policy_before_update(algorithm)


def in_update(loss: Callable) -> Callable:
    """`loss` (verl's actor loss: model_output, data, dp_group) on each micro-batch with the engines' log-probs in its
    data's old_log_probs replaced by the forward pass's own, detached; their difference is the metric DIFF."""

    def old_policy_loss(model_output: dict, data: "TensorDict", dp_group: Any = None) -> tuple[Any, dict]:
        from verl.utils.metric import AggregationType, Metric

        from ..verl.repadding import padded_responses

        current = padded_responses(model_output["log_probs"], data).detach()
        engines = data["old_log_probs"]
        mask = data["response_mask"].to(current.dtype)
        # a share of the whole batch's mean: verl sums a SUM metric over micro-batches and averages it over ranks
        share = ((current - engines).abs() * mask).sum() * data["dp_size"] / data["batch_num_tokens"]
        data["old_log_probs"] = current
        value, metrics = loss(model_output=model_output, data=data, dp_group=dp_group)
        return value, metrics | {DIFF: Metric(AggregationType.SUM, share)}

    return old_policy_loss
