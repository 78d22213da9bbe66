"""Rules for an external (API) model as the rollout model: Trinity-RFT's `model.external_model`.

Upstream (0.6.0, common/config_validator.py `_check_external_model`) takes an OpenAI-compatible API as the rollout
model in mode bench only, copies `model.external_model` over `explorer.rollout_model.external_model_config`, and
requires the two environment variables' names and the model's name. trinity keeps those rules, refuses silently
dropped settings by name (a different rollout copy, an adapter, a workflow that needs token ids) and starts no
engines for it (cluster.py counts none of their devices).
"""

from .. import modes
from ..workflows import TEXT_REPLIES
from ._context import Context
from ._rule import each_taskset, rule
from .buffer import tasksets

MODEL = "model.external_model"
ROLLOUT = "explorer.rollout_model.external_model_config"
FIELDS = ("enable", "base_url_env", "api_key_env", "model_name")


def enabled(ctx: Context) -> bool:
    """Whether the run's rollout model is an external API."""
    return bool(ctx.get(f"{MODEL}.enable"))


@rule(
    reads=(
        *(f"{MODEL}.{name}" for name in FIELDS),
        *(f"{ROLLOUT}.{name}" for name in FIELDS),
        "mode",
        "model.lora_configs",
        "model.max_response_tokens",
        *each_taskset("default_workflow_type", "rollout_args.max_tokens"),
    ),
    writes=tuple(f"{ROLLOUT}.{name}" for name in FIELDS),
)
def external_model(ctx: Context) -> None:
    """model.external_model.enable makes an OpenAI-compatible API the rollout model: mode bench only (it cannot take
    the trainer's weights, and its replies carry no token ids to train on), with its model's name; the rollout
    model's copy is model.external_model's, as upstream copies it."""
    if not enabled(ctx):
        if ctx.get(f"{ROLLOUT}.enable"):
            ctx.report(
                "error",
                f"{ROLLOUT}.enable",
                "the rollout model's copy of the external model is enabled and model.external_model is not: "
                "Trinity-RFT copies model.external_model over this section, so the run would start its engines",
                allowed="false",
                hint=f"set {MODEL}.enable: true (with its model_name, base_url_env and api_key_env), and remove "
                f"{ROLLOUT}",
            )
        return
    mode = ctx.get("mode")
    if not modes.mode(mode).evaluates_checkpoints:  # bench: the eval tasksets of the model it is given
        ctx.report(
            "error",
            f"{MODEL}.enable",
            f"an external (API) model runs only in mode bench (Trinity-RFT's rule), not in mode {mode!r}: it cannot "
            "receive the trainer's weights, and its replies are text without the token ids and log-probs an "
            "experience is trained on",
            allowed="true in mode bench",
            hint="set mode: bench to evaluate the API's model on the eval tasksets, or remove model.external_model "
            "to run trinity's own engines (explorer.rollout_model.engine_type vllm or transformers)",
        )
    if not ctx.get(f"{MODEL}.model_name"):
        ctx.report(
            "error",
            f"{MODEL}.model_name",
            "the external model's name is required: each request to the API names the model it asks",
            allowed="the API's model name (its /v1/models id)",
            hint=f"set {MODEL}.model_name, e.g. qwen3-max or gpt-4o-mini",
        )
    if ctx.get("model.lora_configs"):
        ctx.report(
            "error",
            "model.lora_configs",
            "an external (API) model takes no adapter: nothing here applies one to the API's model",
            allowed="null",
            hint=f"remove model.lora_configs, or remove {MODEL} to bench an adapter on trinity's own engines",
        )
    _workflows(ctx)
    _reply_budget(ctx)
    _rollout_copy(ctx)


def _reply_budget(ctx: Context) -> None:
    """Each request's max_tokens is its taskset's rollout_args.max_tokens, else model.max_response_tokens: with
    neither, an API's replies would be cut at the engines' fallback of 16 tokens (Trinity-RFT refuses a run whose
    max_model_len it cannot determine)."""
    if ctx.get("model.max_response_tokens") is not None:
        return
    unbounded = [
        key for key, taskset, _ in tasksets(ctx) if (taskset.get("rollout_args") or {}).get("max_tokens") is None
    ]
    if unbounded:
        ctx.report(
            "error",
            f"{MODEL}.enable",
            f"the external model's replies have no token budget (no model.max_response_tokens, and {unbounded[0]} "
            "sets no rollout_args.max_tokens): each request would ask for 16 tokens",
            allowed="with model.max_response_tokens or each taskset's rollout_args.max_tokens",
            hint="set model.max_response_tokens (or model.max_model_len, which upstream requires and halves)",
        )


def _workflows(ctx: Context) -> None:
    """A taskset whose built-in workflow needs the engines' token ids (a conversation in the chat template's tokens,
    an agent's recorded calls) cannot run on an API that answers text."""
    if not modes.mode(ctx.get("mode")).explores:
        return
    for key, taskset, _ in tasksets(ctx):
        name = taskset.get("default_workflow_type")
        if name is None or ":" in name or name in TEXT_REPLIES:
            continue  # a row's own workflow, or your own class: checked as it runs (a clear error there)
        ctx.report(
            "error",
            f"{key}.default_workflow_type",
            f"workflow {name!r} needs the engines' token ids (a multi-turn conversation in the chat template, or an "
            "agent's recorded calls), and an external (API) model answers text only",
            allowed=", ".join(TEXT_REPLIES) + ", or module:Class",
            hint=f"run a single-turn workflow on the external model, or remove {MODEL} to run this one on trinity's "
            "engines",
        )


def _rollout_copy(ctx: Context) -> None:
    """explorer.rollout_model.external_model_config is model.external_model's: a written value that differs is an
    error (upstream overwrites it silently), an unwritten one is copied."""
    for name in FIELDS:
        ours, theirs = ctx.get(f"{MODEL}.{name}"), ctx.get(f"{ROLLOUT}.{name}")
        if ctx.user_set(f"{ROLLOUT}.{name}") and theirs != ours:
            ctx.report(
                "error",
                f"{ROLLOUT}.{name}",
                f"{theirs!r} differs from {MODEL}.{name}={ours!r}, which Trinity-RFT copies over it",
                allowed=repr(ours),
                hint=f"set {MODEL}.{name} only: the rollout model's copy follows it",
            )
        elif theirs != ours:
            ctx.set(f"{ROLLOUT}.{name}", ours, "external_model", (ctx.input(f"{MODEL}.{name}"),))
