"""Rules that fill the model's token budget as Trinity-RFT does and hand model settings to the rollout engines."""

from ._context import Context
from ._rule import rule

LEN, PROMPT, RESPONSE, MIN = (
    "model.max_model_len",
    "model.max_prompt_tokens",
    "model.max_response_tokens",
    "model.min_response_tokens",
)
ROLLOUT_SOURCES = {"chat_template": "custom_chat_template"}  # rollout_model keys named otherwise under model.


@rule(
    reads=("model.max_model_len", "model.max_prompt_tokens", "model.max_response_tokens"),
    writes=("model.max_model_len", "model.max_prompt_tokens", "model.max_response_tokens"),
)
def model_budget(ctx: Context) -> None:
    """Of max_model_len, max_prompt_tokens and max_response_tokens, the ones left unset follow from the others."""
    length, prompt, response = ctx.get(LEN), ctx.get(PROMPT), ctx.get(RESPONSE)
    if length is None:
        if prompt is not None and response is not None:
            ctx.set(LEN, prompt + response, "model_budget", (ctx.input(PROMPT), ctx.input(RESPONSE)))
        return  # nothing to divide; the trainer's token budget falls back to verl's
    if prompt is not None and response is not None:
        if prompt + response > length:
            ctx.report(
                "error",
                PROMPT,
                f"{prompt} + max_response_tokens {response} exceed model.max_model_len={length}",
                allowed=f"max_prompt_tokens + max_response_tokens <= {length}",
                hint="lower one of them or raise model.max_model_len",
            )
        return
    if prompt is None and response is None:  # upstream splits the context in half
        ctx.set(PROMPT, length // 2, "model_budget", (ctx.input(LEN),))
        ctx.set(RESPONSE, length - length // 2, "model_budget", (ctx.input(LEN),))
        return
    given, other = (RESPONSE, PROMPT) if prompt is None else (PROMPT, RESPONSE)
    if ctx.get(given) >= length:
        room = "a prompt" if given == RESPONSE else "a response"
        ctx.report(
            "error",
            given,
            f"{ctx.get(given)} leaves no room for {room} in model.max_model_len={length}",
            allowed=f"< {length}",
            hint=f"raise model.max_model_len or lower {given}",
        )
        return
    ctx.set(other, length - ctx.get(given), "model_budget", (ctx.input(LEN), ctx.input(given)))


@rule(reads=("model.max_response_tokens", "model.min_response_tokens"), writes=("model.min_response_tokens",))
def min_response(ctx: Context) -> None:
    """min_response_tokens must stay below max_response_tokens; upstream lowers it, and so does this rule, with a
    warning."""
    response, least = ctx.get(RESPONSE), ctx.get(MIN)
    if response is None or least < response:
        return
    value = max(response - 1, 0)
    ctx.report(
        "warning",
        MIN,
        f"{least} is not below model.max_response_tokens={response}; using {value}",
        allowed=f"< {response}",
        hint=f"set {MIN} below {response}",
    )
    ctx.set(MIN, value, "min_response", (ctx.input(MIN), ctx.input(RESPONSE)))


@rule(reads=("model.critic_model_path", "model.model_path"), writes=("model.critic_model_path",))
def critic_model(ctx: Context) -> None:
    """model.critic_model_path defaults to model.model_path (upstream's rule)."""
    if ctx.get("model.critic_model_path") is None:
        ctx.set(
            "model.critic_model_path", ctx.get("model.model_path"), "critic_model", (ctx.input("model.model_path"),)
        )


@rule(
    reads=(
        "explorer.rollout_model.chat_template",
        "explorer.rollout_model.enable_prompt_truncation",
        "explorer.rollout_model.enable_thinking",
        "explorer.rollout_model.max_model_len",
        "explorer.rollout_model.model_path",
        "explorer.rollout_model.repetition_penalty",
        "model.custom_chat_template",
        "model.enable_prompt_truncation",
        "model.enable_thinking",
        "model.max_model_len",
        "model.model_path",
        "model.repetition_penalty",
    ),
    writes=(
        "explorer.rollout_model.chat_template",
        "explorer.rollout_model.enable_prompt_truncation",
        "explorer.rollout_model.enable_thinking",
        "explorer.rollout_model.max_model_len",
        "explorer.rollout_model.model_path",
        "explorer.rollout_model.repetition_penalty",
    ),
)
def rollout_model(ctx: Context) -> None:
    """The rollout engines take the model's path, context length and prompt settings unless told otherwise."""
    for key in (
        "model_path",
        "max_model_len",
        "enable_thinking",
        "repetition_penalty",
        "enable_prompt_truncation",
        "chat_template",
    ):
        source, target = f"model.{ROLLOUT_SOURCES.get(key, key)}", f"explorer.rollout_model.{key}"
        if ctx.get(target) is None and ctx.get(source) is not None:
            ctx.set(target, ctx.get(source), "rollout_model", (ctx.input(source),))


@rule(
    reads=("model.max_model_len", "trainer.max_token_len_per_gpu", "trainer.ulysses_sequence_parallel_size"),
    writes=("trainer.max_token_len_per_gpu",),
)
def token_budget(ctx: Context) -> None:
    """trainer.max_token_len_per_gpu defaults to 2 x max_model_len / sequence-parallel degree (upstream's rule)."""
    length, parallel = ctx.get(LEN), ctx.get("trainer.ulysses_sequence_parallel_size")
    if ctx.get("trainer.max_token_len_per_gpu") is None and length is not None:
        ctx.set(
            "trainer.max_token_len_per_gpu",
            -(-2 * length // parallel),
            "token_budget",
            (ctx.input(LEN), ctx.input("trainer.ulysses_sequence_parallel_size")),
        )
