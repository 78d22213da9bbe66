"""Rules that fill the model's token budget as Trinity-RFT does and hand model settings to the rollout engines."""

from .. import rope
from ._context import Context
from ._rule import each_taskset, rule
from .buffer import tasksets

LEN, PROMPT, RESPONSE, MIN = (
    "model.max_model_len",
    "model.max_prompt_tokens",
    "model.max_response_tokens",
    "model.min_response_tokens",
)
ROLLOUT = "explorer.rollout_model"
ROLLOUT_SOURCES = {"chat_template": "custom_chat_template"}  # rollout_model keys named otherwise under model.
# what the rollout engines take from model.* where explorer.rollout_model leaves it unset
ROLLOUT_KEYS = (
    "model_path",
    "max_model_len",
    "max_prompt_tokens",
    "max_response_tokens",
    "min_response_tokens",
    "enable_thinking",
    "repetition_penalty",
    "enable_prompt_truncation",
    "chat_template",
)
# what an auxiliary model's engines take from model.* where it leaves them unset (upstream's ExplorerConfigValidator:
# its length and sampling settings; not model_path, which each names, nor the prompt's template or thinking)
AUXILIARY_KEYS = (
    "max_model_len",
    "max_prompt_tokens",
    "max_response_tokens",
    "min_response_tokens",
    "repetition_penalty",
    "enable_prompt_truncation",
)
AUX = "explorer.auxiliary_models"


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
        "explorer.rollout_model.max_prompt_tokens",
        "explorer.rollout_model.max_response_tokens",
        "explorer.rollout_model.min_response_tokens",
        "explorer.rollout_model.model_path",
        "explorer.rollout_model.repetition_penalty",
        "model.custom_chat_template",
        "model.enable_prompt_truncation",
        "model.enable_thinking",
        "model.max_model_len",
        "model.max_prompt_tokens",
        "model.max_response_tokens",
        "model.min_response_tokens",
        "model.model_path",
        "model.repetition_penalty",
        *(f"{AUX}.*.{key}" for key in AUXILIARY_KEYS),
    ),
    writes=tuple(f"{ROLLOUT}.{key}" for key in ROLLOUT_KEYS) + tuple(f"{AUX}.*.{key}" for key in AUXILIARY_KEYS),
)
def rollout_model(ctx: Context) -> None:
    """The rollout engines take the model's path, context length, token limits and prompt settings unless told
    otherwise (upstream's ExplorerConfigValidator: set_if_none of each); each auxiliary model's engines its context
    length and token limits."""
    targets = [(ROLLOUT, ROLLOUT_KEYS)]
    targets += [(f"{AUX}[{i}]", AUXILIARY_KEYS) for i in range(len(ctx.get(AUX) or []))]
    for model, keys in targets:
        for key in keys:
            source, target = f"model.{ROLLOUT_SOURCES.get(key, key)}", f"{model}.{key}"
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


ROLLOUT_LIMITS = tuple(f"{ROLLOUT}.{key}" for key in ROLLOUT_KEYS[1:5])  # max_model_len and the three token limits


@rule(reads=ROLLOUT_LIMITS)
def rollout_budget(ctx: Context) -> None:
    """The engines' own token limits fit together where a person set one (model.* fit already): a reply's minimum
    below its limit, a prompt and a reply within their context. Upstream hands them to vLLM unchecked, which then
    refuses every request."""
    length, prompt, response, least = (ctx.get(key) for key in ROLLOUT_LIMITS)
    if response is not None and least is not None and least >= response:
        key = _written(ctx, ROLLOUT_LIMITS[3], ROLLOUT_LIMITS[2])
        ctx.report(
            "error",
            key,
            f"{ROLLOUT}.min_response_tokens={least} is not below {ROLLOUT}.max_response_tokens={response}",
            allowed=f"min_response_tokens < {response}",
            hint=f"lower {ROLLOUT}.min_response_tokens or raise {ROLLOUT}.max_response_tokens",
        )
    if None not in (length, prompt, response) and prompt + response > length:
        key = _written(ctx, *ROLLOUT_LIMITS[1:3], ROLLOUT_LIMITS[0])
        ctx.report(
            "error",
            key,
            f"a prompt of {prompt} and a reply of {response} tokens exceed the engines' context, "
            f"{ROLLOUT}.max_model_len={length}",
            allowed=f"max_prompt_tokens + max_response_tokens <= {length}",
            hint=f"lower {ROLLOUT}.max_prompt_tokens or max_response_tokens, or raise its max_model_len",
        )


def _written(ctx: Context, *keys: str) -> str:
    """The first of `keys` a person set (where an error about them belongs), else the first."""
    return next((key for key in keys if ctx.user_set(key)), keys[0])


@rule(reads=("model.top_k", *each_taskset("rollout_args.top_k")))
def engine_top_k(ctx: Context) -> None:
    """model.top_k is the engines' own sampling default (their OpenAI endpoint's requests outside a workflow), as in
    Trinity-RFT, where it never reaches a task set (set_if_none on an int); a task set sampling without top-k beside it
    gets a note naming its own key."""
    if not ctx.user_set("model.top_k") or ctx.get("model.top_k") == -1:
        return
    unset = [key for key, taskset, _ in tasksets(ctx) if taskset["rollout_args"]["top_k"] == -1]
    if unset:
        ctx.report(
            "note",
            "model.top_k",
            f"{ctx.get('model.top_k')} is the engines' default for requests outside a workflow (their OpenAI "
            f"endpoint's), as in Trinity-RFT; {unset[0]} samples without top-k (its rollout_args.top_k is -1)",
            hint=f"set {unset[0]}.rollout_args.top_k to sample its rollouts with top-k",
        )


@rule(reads=("model.rope_scaling",))
def rope_scaling(ctx: Context) -> None:
    """model.rope_scaling names a rope type transformers knows, with the keys that type needs (config/rope.py)."""
    scaling = ctx.get("model.rope_scaling")
    why = rope.problem(scaling) if scaling is not None else None
    if why:
        ctx.report(
            "error",
            "model.rope_scaling",
            why,
            allowed=f"{rope.TYPE}: {', '.join(rope.TYPES)}, with each type's keys",
            hint="write the rope parameters as the model's config.json would, e.g. {rope_type: yarn, factor: 4.0}",
        )
