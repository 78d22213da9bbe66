"""Rules for the optimizer: its schedule (upstream's deprecated name of it) and its gradient clip (two names of one
value)."""

from ._context import Context
from ._rule import rule

OPTIM = "algorithm.optimizer"


@rule(
    reads=("algorithm.optimizer.lr_scheduler_type", "algorithm.optimizer.warmup_style"),
    writes=("algorithm.optimizer.lr_scheduler_type",),
)
def lr_scheduler(ctx: Context) -> None:
    """The deprecated optimizer.warmup_style is copied to lr_scheduler_type with a warning, as Trinity-RFT does."""
    style = ctx.get(f"{OPTIM}.warmup_style")
    if style is None:
        return
    ctx.report(
        "warning",
        f"{OPTIM}.warmup_style",
        f"is deprecated in Trinity-RFT; lr_scheduler_type is set to {style!r}",
        hint=f"write algorithm.optimizer.lr_scheduler_type: {style}",
    )
    if ctx.user_set(f"{OPTIM}.lr_scheduler_type") and ctx.get(f"{OPTIM}.lr_scheduler_type") != style:
        ctx.report(
            "error",
            f"{OPTIM}.warmup_style",
            f"{style!r} contradicts lr_scheduler_type={ctx.get(f'{OPTIM}.lr_scheduler_type')!r} "
            f"({ctx.where(f'{OPTIM}.lr_scheduler_type')})",
            hint="remove warmup_style",
        )
        return
    ctx.set(f"{OPTIM}.lr_scheduler_type", style, "lr_scheduler", (ctx.input(f"{OPTIM}.warmup_style"),))


@rule(
    reads=("algorithm.optimizer.clip_grad", "trainer.grad_clip"),
    writes=("algorithm.optimizer.clip_grad", "trainer.grad_clip"),
)
def gradient_clip(ctx: Context) -> None:
    """algorithm.optimizer.clip_grad (what verl clips by) and trainer.grad_clip are one value: whichever you wrote."""
    clip, grad = f"{OPTIM}.clip_grad", "trainer.grad_clip"
    written = [k for k in (clip, grad) if ctx.user_set(k)]
    if len(written) == 2 and ctx.get(clip) != ctx.get(grad):
        ctx.report(
            "error",
            grad,
            f"{ctx.get(grad)} contradicts {clip}={ctx.get(clip)} ({ctx.where(clip)}); both are the gradient-norm clip",
            allowed=str(ctx.get(clip)),
            hint=f"write only one of {clip} and {grad}",
        )
        return
    source = written[0] if written else clip
    for key in (clip, grad):
        if key != source:
            ctx.set(key, ctx.get(source), "gradient_clip", (ctx.input(source),))
