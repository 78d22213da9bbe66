"""Rule for `env`: each role's environment from the profile, the config, then the user."""

from ._context import Context

ROLES = ("common", "trainer", "rollout")


def env(ctx: Context) -> None:
    """env.{common,trainer,rollout}: profile, profile blocks whose `when` matches, timeouts, then user values."""
    user = _user_values(ctx)
    ctx.data["env"] = {role: {} for role in ROLES}
    profile, name = ctx.loaded.profile, ctx.loaded.name
    for role in ROLES:
        for var, value in getattr(profile.env, role).items():
            _put(ctx, role, var, value, f"profile {name} ({ctx.loaded.where(('env', role, var))})")
    for i, block in enumerate(profile.env_when):
        if all(ctx.get(key) == want for key, want in block.when.items()):
            because = ", ".join(ctx.input(key) for key in block.when)
            for role in ROLES:
                for var, value in getattr(block, role).items():
                    _put(ctx, role, var, value, f"profile {name} env_when[{i}] ({ctx.loaded.where(('env_when', i))}) as {because}")
    _collective_timeouts(ctx)
    for role, var, value, source in user:
        _put(ctx, role, var, value, source)
    _check_user_timeouts(ctx)


def _user_values(ctx: Context) -> list[tuple[str, str, str, str]]:
    """(role, name, value, source) from the user's `env:` section and explorer.env_vars (rollout)."""
    found = [(role, var, value, ctx.where(f"env.{role}.{var}")) for role in ROLES for var, value in ctx.get(f"env.{role}").items()]
    found += [("rollout", var, value, ctx.where(f"explorer.env_vars.{var}")) for var, value in ctx.get("explorer.env_vars").items()]
    return found


def _put(ctx: Context, role: str, var: str, value: str, source: str) -> None:
    ctx.set(f"env.{role}.{var}", value, "env", (source,))


def _collective_timeouts(ctx: Context) -> None:
    """Collective timeout variables are raised to synchronizer.sync_timeout so a long weight sync is not cut off."""
    need = ctx.get("synchronizer.sync_timeout")
    for var in ctx.facts.collective_timeout_env:
        current = ctx.get(f"env.common.{var}")
        if current is None or (current.isdigit() and int(current) < need):
            _put(ctx, "common", var, str(need), ctx.input("synchronizer.sync_timeout"))


def _check_user_timeouts(ctx: Context) -> None:
    need = ctx.get("synchronizer.sync_timeout")
    for var in ctx.facts.collective_timeout_env:
        value = ctx.get(f"env.common.{var}") or ""
        if value.isdigit() and int(value) < need:
            ctx.report(
                "warning",
                f"env.common.{var}",
                f"{var}={value} is shorter than synchronizer.sync_timeout={need}: a long weight sync will be cut off",
                allowed=f">= {need}",
                hint=f"remove env.common.{var} to have it derived, or lower synchronizer.sync_timeout",
            )
