"""On-policy distillation (Trinity-RFT's `on_policy_distill`, after Tinker's; and `jsd`): the advantage of each
response token is how much more likely a teacher model finds it than the student that sampled it, so the policy
gradient pulls the student toward the teacher on the student's own samples. The trainer computes the teacher's
log-probs of every response (model.teacher_model_path) beside the student's (the old policy's); rewards are not
read. `importance_sampling` is the unclipped ratio loss upstream pairs with it."""

import math

import torch

from ..functions import own_loss, register_advantage


@register_advantage("on_policy_distill")
def on_policy_distill_advantage(
    response_mask: torch.Tensor,
    old_log_probs: torch.Tensor,
    teacher_log_probs: torch.Tensor,
    kl_coef: float = 1.0,
    **_: object,
):
    """advantage = kl_coef * (log p_teacher - log p_student) on each response token: minus the reverse-KL sample."""
    with torch.no_grad():
        advantages = kl_coef * (teacher_log_probs - old_log_probs) * response_mask
        return advantages, advantages.clone()


def jsd(student: torch.Tensor, teacher: torch.Tensor, beta: float) -> torch.Tensor:
    """Per-token generalised JSD from sampled log-probs, in log space: beta KL(t||m) + (1 - beta) KL(s||m) with
    m = beta t + (1 - beta) s; beta 0 is KL(student||teacher) (s - t), beta 1 is t - s."""
    if beta == 0:
        return student - teacher
    if beta == 1:
        return teacher - student
    mixture = torch.logsumexp(torch.stack([student + math.log1p(-beta), teacher + math.log(beta)]), dim=0)
    return beta * (teacher - mixture) + (1 - beta) * (student - mixture)


@register_advantage("jsd")
def jsd_advantage(
    response_mask: torch.Tensor,
    old_log_probs: torch.Tensor,
    teacher_log_probs: torch.Tensor,
    lambda_coef: float = 0.5,
    kl_coef: float = 1.0,
    temperature: float = 1.0,
    chunk_size: int | None = None,
    **_: object,
):
    """advantage = -kl_coef * JSD_lambda(student, teacher) per token, both log-probs divided by `temperature`;
    `chunk_size` bounds how many tokens are computed at once (memory only: the values are the same)."""
    with torch.no_grad():
        student, teacher = old_log_probs / temperature, teacher_log_probs / temperature
        kept = response_mask.bool()
        values = torch.zeros_like(student)
        flat_s, flat_t = student[kept], teacher[kept]
        size = chunk_size or max(1, flat_s.numel())
        values[kept] = torch.cat(
            [jsd(s, t, lambda_coef) for s, t in zip(flat_s.split(size), flat_t.split(size))] or [flat_s.new_zeros(0)]
        )
        advantages = -kl_coef * values
        return advantages, advantages.clone()


@own_loss("importance_sampling")
def importance_sampling_loss(log_prob, old_log_prob, advantages, response_mask, agg, **_):
    """agg(-A * pi / mu), the log-ratio clamped to [-20, 20] (upstream's guard against overflow); no clipping."""
    log_ratio = (log_prob - old_log_prob).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    loss = agg(-advantages * ratio)
    mask = response_mask.float()
    mean = lambda v: float((v.detach() * mask).sum() / mask.sum().clamp(min=1))  # noqa: E731
    return loss, {"actor/is_ratio": mean(ratio), "actor/ppo_kl": mean(-log_ratio)}
