"""Rules for a train batch that is not plain rollouts: one with SFT samples mixed in (its size follows the explore
step), and one of (chosen, rejected) pairs (whole pairs per rank, rows kept in order)."""

from math import ceil

from ..algorithms.losses import POLICY_LOSSES
from ..algorithms.sampling import SAMPLE_STRATEGIES
from ._context import Context
from ._rule import rule
from .algorithm import SAMPLE


@rule(
    reads=(
        "algorithm.repeat_times",
        "algorithm.sample_strategy",
        "algorithm.sample_strategy_args",
        "buffer.batch_size",
    ),
    writes=("buffer.train_batch_size",),
    # 0 (unset) is filled here, before buffer.train_batch_size fills it for plain rollouts
    before=("buffer.train_batch_size",),
)
def mix_batch(ctx: Context) -> None:
    """With SFT samples mixed in (sample strategy mix), a train batch is Trinity-RFT's split of train_batch_size:
    ceil(expert_data_ratio x it) samples, the rest rollouts; its rollouts are one explore step's (batch_size x
    repeat_times), so the default train_batch_size is the smallest that gives that many, and another is refused."""
    strategy = SAMPLE_STRATEGIES.get(ctx.get(SAMPLE))
    if strategy is None or not strategy.mixes:
        return
    ratio = (ctx.get("algorithm.sample_strategy_args") or {}).get("expert_data_ratio", 0.5)
    rollouts = ctx.get("buffer.batch_size") * ctx.get("algorithm.repeat_times")
    fits = ceil(rollouts / (1 - ratio) - 1e-9)  # t - ceil(ratio t) >= rollouts <=> t >= rollouts / (1 - ratio)
    while fits - ceil(ratio * fits) < rollouts:  # float rounding
        fits += 1
    key, total = "buffer.train_batch_size", ctx.get("buffer.train_batch_size")
    if total == 0:
        sources = (ctx.input("buffer.batch_size"), ctx.input("algorithm.repeat_times"), ctx.input(SAMPLE))
        ctx.set(key, fits, "mix_batch", sources)
    elif total - ceil(ratio * total) != rollouts:
        ctx.report(
            "error",
            key,
            f"{total} splits into {ceil(ratio * total)} SFT samples and {total - ceil(ratio * total)} rollouts; an "
            f"explore step makes {rollouts} (buffer.batch_size x algorithm.repeat_times)",
            allowed=str(fits),
            hint=f"remove {key} to take {fits}",
        )


@rule(
    reads=("algorithm.policy_loss_fn", "buffer.train_batch_size", "cluster.trainer_gpu_num", "trainer.use_dynamic_bsz"),
    writes=("trainer.use_dynamic_bsz",),
)
def pairs_batch(ctx: Context) -> None:
    """A loss on pairs (DPO) reads a chosen and a rejected response in adjacent rows of one micro-batch: each trainer
    rank takes whole pairs, and verl's token-balanced micro-batches (use_dynamic_bsz), which reorder rows, are off."""
    loss = POLICY_LOSSES.get(ctx.get("algorithm.policy_loss_fn"))
    if loss is None or loss.batch != "pairs":
        return
    batch, ranks = ctx.get("buffer.train_batch_size"), ctx.get("cluster.trainer_gpu_num") or 1
    if batch % (2 * ranks):
        ctx.report(
            "error",
            "buffer.train_batch_size",
            f"{batch} experiences do not split into whole (chosen, rejected) pairs over {ranks} trainer rank(s)",
            allowed=f"a multiple of {2 * ranks}",
            hint=f"set buffer.train_batch_size to {2 * ranks * max(1, batch // (2 * ranks))}",
        )
    key = "trainer.use_dynamic_bsz"
    if ctx.user_set(key) and ctx.get(key):
        ctx.report(
            "error",
            key,
            f"{ctx.get('algorithm.policy_loss_fn')!r} pairs adjacent rows; token-balanced micro-batches reorder them",
            allowed="false",
            hint=f"remove {key}",
        )
        return
    ctx.set(key, False, "pairs_batch", (ctx.input("algorithm.policy_loss_fn"),))
