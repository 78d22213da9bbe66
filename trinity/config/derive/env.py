"""Rules for `env` beyond the profile layer: blocks that depend on the config, timeouts, explorer.env_vars.

The profile's own `env:` is a layer under the user's file (see compose); values a user wrote are never replaced.
"""

from ._context import Context
from ._rule import rule

ROLES = ("common", "trainer", "rollout")


# The keys the shipped profiles' env_when blocks name (profiles/*.yaml): a profile naming others reads and writes
# those. The rollout's variables are read as written: explorer.env_vars (explorer_env_vars, later) may set them.
@rule(
    reads=(
        "env.common.HCCL_HOST_SOCKET_PORT_RANGE",
        "env.common.HCCL_NPU_SOCKET_PORT_RANGE",
        "explorer.rollout_model.enforce_eager",
        "mode",
    ),
    writes=(
        "env.common.HCCL_HOST_SOCKET_PORT_RANGE",
        "env.common.HCCL_NPU_SOCKET_PORT_RANGE",
        "env.rollout.TASK_QUEUE_ENABLE",
    ),
    before=("env.rollout.TASK_QUEUE_ENABLE",),
)
def env_when(ctx: Context) -> None:
    """Profile `env_when` blocks whose `when:` entries all match the config."""
    for i, block in enumerate(ctx.loaded.profile.env_when):
        if all(ctx.get(key) == want for key, want in block.when.items()):
            because = (
                f"profile {ctx.loaded.name} env_when[{i}] ({ctx.loaded.where(('env_when', i))})",
                *(ctx.input(key) for key in block.when),
            )
            for role in ROLES:
                for var, value in getattr(block, role).items():
                    if not ctx.user_set(f"env.{role}.{var}"):
                        ctx.set(f"env.{role}.{var}", value, "env_when", because)


# the variables the shipped profiles list in collective_timeout_env (profiles/*.yaml)
@rule(reads=("env.common.HCCL_EXEC_TIMEOUT", "synchronizer.sync_timeout"), writes=("env.common.HCCL_EXEC_TIMEOUT",))
def collective_timeouts(ctx: Context) -> None:
    """Collective timeout variables are raised to synchronizer.sync_timeout so a long weight sync is not cut off."""
    need = ctx.get("synchronizer.sync_timeout")
    for var in ctx.facts.collective_timeout_env:
        key = f"env.common.{var}"
        current = ctx.get(key) or ""
        if ctx.user_set(key):
            if current.isdigit() and int(current) < need:
                ctx.report(
                    "warning",
                    key,
                    f"{var}={current} is shorter than synchronizer.sync_timeout={need}: a long weight sync will be "
                    "cut off",
                    allowed=f">= {need}",
                    hint=f"remove env.common.{var} to have it derived, or lower synchronizer.sync_timeout",
                )
        elif not current.isdigit() or int(current) < need:
            ctx.set(
                key,
                str(need),
                "collective_timeouts",
                (ctx.input("synchronizer.sync_timeout"), ctx.fact("collective_timeout_env")),
            )


@rule(reads=("explorer.env_vars",), writes=("env.rollout.*",))
def explorer_env_vars(ctx: Context) -> None:
    """explorer.env_vars are the rollout engines' variables: they land in env.rollout, over everything else."""
    for var, value in ctx.get("explorer.env_vars").items():
        ctx.set(
            f"env.rollout.{var}",
            value,
            "explorer_env_vars",
            (f"explorer.env_vars.{var} ({ctx.where(f'explorer.env_vars.{var}')})",),
        )
