"""Rules that hand model settings to the rollout engines and check the token budget."""

from ._context import Context


def model_budget(ctx: Context) -> None:
    """max_prompt_tokens = max_model_len - max_response_tokens; the response must fit the context."""
    length, response = ctx.get("model.max_model_len"), ctx.get("model.max_response_tokens")
    if length is None or response is None:
        return
    if response >= length:
        ctx.report(
            "error",
            "model.max_response_tokens",
            f"{response} leaves no room for a prompt in model.max_model_len={length}",
            allowed=f"< {length}",
            hint="raise model.max_model_len or lower model.max_response_tokens",
        )
    elif ctx.get("model.max_prompt_tokens") is None:
        ctx.set("model.max_prompt_tokens", length - response, "model_budget", (ctx.input("model.max_model_len"), ctx.input("model.max_response_tokens")))


def rollout_model(ctx: Context) -> None:
    """The rollout engines serve model.model_path with model.max_model_len unless told otherwise."""
    for key, source in (("model_path", "model.model_path"), ("max_model_len", "model.max_model_len")):
        target = f"explorer.rollout_model.{key}"
        if ctx.get(target) is None and ctx.get(source) is not None:
            ctx.set(target, ctx.get(source), "rollout_model", (ctx.input(source),))


def token_budget(ctx: Context) -> None:
    """trainer.max_token_len_per_gpu defaults to 2 x max_model_len (two full sequences per micro-batch)."""
    length = ctx.get("model.max_model_len")
    if ctx.get("trainer.max_token_len_per_gpu") is None and length is not None:
        ctx.set("trainer.max_token_len_per_gpu", 2 * length, "token_budget", (ctx.input("model.max_model_len"),))
