"""Rules for the trainer section: checkpoints kept, and the shape of the verl passthrough."""

from ._context import Context

PASSTHROUGH = "trainer.trainer_config"
# Where Trinity-RFT reads trainer_config's keys: verl's actor_rollout_ref sections, wrapped or flat.
VERL_SECTIONS = ("model", "actor", "ref", "rollout")


def checkpoints_kept(ctx: Context) -> None:
    """trainer.max_actor_ckpt_to_keep (what the runtime reads) = max_checkpoints_to_keep, 0 meaning all."""
    key, keep = "trainer.max_actor_ckpt_to_keep", ctx.get("trainer.max_checkpoints_to_keep")
    value = keep or None
    if ctx.user_set(key) and ctx.get(key) != value:
        ctx.report(
            "error",
            key,
            f"is derived from trainer.max_checkpoints_to_keep ({value}) and must not be set to {ctx.get(key)}",
            hint="set trainer.max_checkpoints_to_keep instead (0 keeps all)",
        )
        return
    ctx.set(key, value, "checkpoints_kept", (ctx.input("trainer.max_checkpoints_to_keep"),))


def trainer_config(ctx: Context) -> None:
    """trainer.trainer_config holds verl sections (model, actor, ref, rollout), bare or under actor_rollout_ref."""
    for name, value in ctx.get(PASSTHROUGH).items():
        key = f"{PASSTHROUGH}.{name}"
        if name == "actor_rollout_ref" and isinstance(value, dict):
            for inner in value:
                if inner not in VERL_SECTIONS:
                    _refuse(ctx, f"{key}.{inner}", inner)
        elif name not in VERL_SECTIONS:
            _refuse(ctx, key, name)
        elif not isinstance(value, dict):
            ctx.report(
                "error",
                key,
                f"must be a mapping of verl's {name} keys (got {value!r})",
                hint=f"write {key}: {{KEY: VALUE}}",
            )


def _refuse(ctx: Context, key: str, name: str) -> None:
    reason = (
        "trinity has no critic model yet"
        if name == "critic"
        else "trinity passes verl's actor_rollout_ref sections only (Trinity-RFT drops the rest silently)"
    )
    ctx.report(
        "error",
        key,
        f"not a verl section trinity passes on: {reason}",
        allowed="actor_rollout_ref, " + ", ".join(VERL_SECTIONS),
        hint=f"remove {key}",
    )
