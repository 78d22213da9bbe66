"""SFT data mixed into RL batches (Trinity-RFT's `mix`, and CHORD's `mix_chord`, arXiv 2508.11408): one loss over a
batch whose rows are rollouts and samples of an SFT data set (sample strategy mix marks the samples):
(1 - mu) x verl's PPO loss on the rollouts + mu x an SFT loss on the samples, each aggregated over its own part of
the whole batch (every rank and micro-batch). mix_chord moves mu on a schedule and weights each SFT token by
p(1 - p) (`sft_phi`), so tokens the policy already finds certain, or impossible, teach little; `sft_is` weights them
by p. These replace verl's whole actor loss (the entry's `actor_loss`): verl hands a policy loss no way to tell the
rows apart."""

import math

import torch

# what the trainer's batch info names each part's global counts (rank.py, sampling)
PARTS = {"rollout": ("rollout_tokens", "rollout_rows"), "sample": ("sample_tokens", "sample_rows")}


def mu_schedule(step: int, warmup: int, decay: int, peak: float, valley: float) -> float:
    """CHORD's mu at `step`: rising linearly to `peak` over `warmup` steps, then a cosine to `valley` over `decay`."""
    if step < warmup:
        return step / warmup * peak
    if step >= warmup + decay:
        return valley
    return (peak - valley) * 0.5 * (1 + math.cos(math.pi * (step - warmup) / decay)) + valley


def token_weights(log_prob: torch.Tensor, weight: str, cutoff_prob: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs to train, their detached weights): none (1), is (p), or phi (p(1 - p)) with the log-probs clamped
    at log(cutoff_prob); the weights come from the unclamped probabilities, as upstream's."""
    p = log_prob.detach().exp()
    weights = {"none": torch.ones_like(p), "is": p, "phi": p * (1 - p)}[weight]
    if cutoff_prob < 1.0:
        log_prob = log_prob.clamp(max=math.log(cutoff_prob))
    return log_prob, weights


def mix_loss(config, model_output, data, dp_group=None, *, args: dict, step: int, info: dict):
    """Trinity-RFT's mix: a constant mu, plain SFT on the samples."""
    return _mixed(config, model_output, data, args, info, args["mu"], "none")


def chord_loss(config, model_output, data, dp_group=None, *, args: dict, step: int, info: dict):
    """CHORD: mu on its schedule, the samples' tokens weighted by p(1 - p) (enable_phi_function) or not."""
    mu = mu_schedule(step, args["mu_warmup_steps"], args["mu_decay_steps"], args["mu_peak"], args["mu_valley"])
    return _mixed(config, model_output, data, args, info, mu, "phi" if args["enable_phi_function"] else "none")


def _mixed(config, model_output, data, args: dict, info: dict, mu: float, weight: str):
    from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty
    from verl.utils.metric import AggregationType, Metric

    from ...verl.repadding import padded_responses

    log_prob = padded_responses(model_output["log_probs"], data)
    fields = ["response_mask", "old_log_probs", "advantages", "expert_mask"]
    padded = data.select(*fields, *(["ref_log_prob"] if config.use_kl_loss else [])).to_padded_tensor()
    mask = padded["response_mask"].bool()
    samples = padded["expert_mask"].bool() & mask
    rollouts = mask & ~samples
    scale = {"dp_size": data["dp_size"], "loss_scale_factor": config.loss_scale_factor}

    def over(part: str) -> dict:
        tokens, rows = PARTS[part]
        return {**scale, "batch_num_tokens": info[tokens], "global_batch_size": info[rows]}

    metrics = {"actor/mu": mu}
    pg_loss = sft_loss = log_prob.new_zeros(())
    if info["rollout_tokens"]:
        config.global_batch_info.update(over("rollout"))  # verl's PPO loss aggregates over the batch's rollouts
        pg_loss, pg_metrics = get_policy_loss_fn(config.policy_loss.get("loss_mode", "vanilla"))(
            old_log_prob=padded["old_log_probs"],
            log_prob=log_prob,
            advantages=padded["advantages"],
            response_mask=rollouts,
            loss_agg_mode=args.get("grpo_loss_agg_mode") or config.loss_agg_mode,
            config=config,
        )
        metrics |= Metric.from_dict(pg_metrics, aggregation=AggregationType.MEAN)
    if info["sample_tokens"]:
        trained, weights = token_weights(log_prob, weight)
        mode = args.get("sft_loss_agg_mode") or config.loss_agg_mode
        sft_loss = agg_loss(loss_mat=-trained * weights, loss_mask=samples, loss_agg_mode=mode, **over("sample"))
    loss = (1 - mu) * pg_loss + mu * sft_loss
    metrics["actor/pg_loss"] = Metric(value=pg_loss, aggregation=AggregationType.SUM)
    metrics["actor/sft_loss"] = Metric(value=sft_loss, aggregation=AggregationType.SUM)
    if config.entropy_coeff and "entropy" in model_output and info["rollout_tokens"]:  # entropy "mix": rollouts only
        entropy = padded_responses(model_output["entropy"], data)
        bonus = agg_loss(loss_mat=entropy, loss_mask=rollouts, loss_agg_mode=config.loss_agg_mode, **over("rollout"))
        loss = loss - config.entropy_coeff * bonus
        metrics["actor/entropy_loss"] = Metric(value=bonus, aggregation=AggregationType.SUM)
    if config.use_kl_loss:  # as verl's ppo_loss: every row, over the whole batch
        whole = {**scale, "batch_num_tokens": data["batch_num_tokens"], "global_batch_size": data["global_batch_size"]}
        kld = kl_penalty(logprob=log_prob, ref_logprob=padded["ref_log_prob"], kl_penalty=config.kl_loss_type)
        kl = agg_loss(loss_mat=kld, loss_mask=mask, loss_agg_mode=config.loss_agg_mode, **whole)
        loss = loss + kl * config.kl_loss_coef
        metrics["kl_loss"] = Metric(value=kl, aggregation=AggregationType.SUM)
    return loss, metrics


def sft_is_loss(config, model_output, data, dp_group=None, *, args: dict, step: int, info: dict):
    """SFT with each token's -log p weighted by p (not differentiated): a data set's tokens the policy finds
    unlikely move it less."""
    return _weighted_sft(model_output, data, "is", 1.0)


def sft_phi_loss(config, model_output, data, dp_group=None, *, args: dict, step: int, info: dict):
    """SFT with each token's -log p weighted by p(1 - p) (CHORD-phi), the log-probs clamped at log(cutoff_prob)."""
    return _weighted_sft(model_output, data, "phi", args["cutoff_prob"])


def _weighted_sft(model_output, data, weight: str, cutoff_prob: float):
    # as verl's sft_loss on packed sequences: the loss mask shifted onto the log-probs, a mean over the whole batch
    log_prob = model_output["log_probs"].values()
    mask = torch.roll(data["loss_mask"].values(), shifts=-1, dims=0).bool()
    trained, weights = token_weights(log_prob, weight, cutoff_prob)
    loss = -(trained * weights)[mask].sum() / data["batch_num_tokens"] * data["dp_size"]
    return loss, {}
