"""Rules for the data path: each taskset's name, workflow, sampling and repeat count, and the trainer's batch size."""

from dataclasses import replace

from ...errors import ConfigError, did_you_mean, dotted, undotted
from .. import modes
from ..algorithms.losses import POLICY_LOSSES
from ..algorithms.queries import is_rl_loss, needs_rollout
from ..rewards import REWARDS, UNSUPPORTED_REWARDS, reward_path
from ..validate import validate
from ..workflows import DEFAULT_REWARDS, NAMED_REWARD, UNSUPPORTED_WORKFLOWS, WORKFLOWS, workflow_path
from ._context import Context
from ._rule import each_taskset, rule

TOKEN_MEAN = "token-mean"
INPUT = "buffer.explorer_input"
EXPERIENCES = "buffer.trainer_input.experience_buffer"
AUXILIARY = "buffer.trainer_input.auxiliary_buffers"  # data sets a sample strategy mixes into batches
REWARD_HINT = "name a built-in reward function, your own as module:function, or null for the workflow's own"


def tasksets(ctx: Context) -> list[tuple[str, dict, bool]]:
    """(key, taskset, is_eval) of every taskset the explorer reads."""
    found = [(f"{INPUT}.taskset", ctx.get(f"{INPUT}.taskset"), False)] if ctx.get(f"{INPUT}.taskset") else []
    found += [(f"{INPUT}.tasksets.{i}", t, False) for i, t in enumerate(ctx.get(f"{INPUT}.tasksets"))]
    return found + [(f"{INPUT}.eval_tasksets.{i}", t, True) for i, t in enumerate(ctx.get(f"{INPUT}.eval_tasksets"))]


@rule(
    reads=("buffer.trainer_input.experience_buffer.name", *each_taskset("name")),
    writes=("buffer.trainer_input.experience_buffer.name", *each_taskset("name")),
)
def buffer_names(ctx: Context) -> None:
    """Unnamed tasksets are taskset_<i> / eval_taskset_<i>, an unnamed experience buffer experience_buffer (upstream's
    names)."""
    counters = {False: 0, True: 0}
    for key, taskset, is_eval in tasksets(ctx):
        index, counters[is_eval] = counters[is_eval], counters[is_eval] + 1
        if not taskset.get("name"):
            ctx.set(
                f"{key}.name", f"{'eval_' if is_eval else ''}taskset_{index}", "buffer_names", (f"{key} is unnamed",)
            )
    if ctx.get(EXPERIENCES) and not ctx.get(f"{EXPERIENCES}.name"):
        ctx.set(f"{EXPERIENCES}.name", "experience_buffer", "buffer_names", (f"{EXPERIENCES} is unnamed",))


@rule(
    reads=(
        "buffer.explorer_input.default_eval_workflow_type",
        "buffer.explorer_input.default_reward_fn_type",
        "buffer.explorer_input.default_workflow_type",
        "mode",
        *each_taskset("default_reward_fn_type", "default_workflow_type", "format.workflow_key", "format.reward_fn_key"),
        *each_taskset("reward_fn_args"),
    ),
    writes=each_taskset("default_reward_fn_type", "default_workflow_type"),
)
def taskset_workflows(ctx: Context) -> None:
    """Each taskset's workflow: its own, else (evaluation) default_eval_workflow_type, else default_workflow_type; known
    when the run explores."""
    sources = _fill_defaults(ctx)
    if not modes.mode(ctx.get("mode")).explores:
        return
    reported = set()
    for key, taskset, _ in tasksets(ctx):
        name = taskset.get("default_workflow_type")
        if name is None and (taskset.get("format") or {}).get("workflow_key"):
            continue  # every row may name its own: a row that does not fails when the taskset is loaded
        if name is None:
            ctx.report(
                "error",
                f"{key}.default_workflow_type",
                "no workflow for this taskset",
                allowed=", ".join(WORKFLOWS) + ", or module:Class",
                hint=f"set {INPUT}.default_workflow_type",
            )
        elif not workflow_path(name):
            where = sources.get(key, f"{key}.default_workflow_type")
            if where in reported:
                continue  # several tasksets falling back to one bad default: one error
            reported.add(where)
            known = UNSUPPORTED_WORKFLOWS.get(name)
            hint = did_you_mean(name, WORKFLOWS) or "name a built-in workflow, or your own class as module:Class"
            ctx.report(
                "error",
                where,
                f"workflow {name!r} is known to Trinity-RFT but not supported by trinity: {known}"
                if known
                else f"unknown workflow {name!r}",
                allowed=", ".join(WORKFLOWS) + ", or module:Class",
                hint="name another workflow, or your own class as module:Class" if known else hint,
            )
    _check_rewards(ctx)


def _check_rewards(ctx: Context) -> None:
    """A taskset's reward function is a built-in name or `module:function`, and a built-in's reward_fn_args are the
    ones it takes (the workflow's default reward's when the taskset names none)."""
    reported = set()
    for key, taskset, _ in tasksets(ctx):
        name, fmt = taskset.get("default_reward_fn_type"), taskset.get("format") or {}
        if name is None and (fmt.get("workflow_key") or fmt.get("reward_fn_key")):
            continue  # rows may name other workflows or rewards, each checked with these args when its taskset loads
        workflow = taskset.get("default_workflow_type")
        if name is None and workflow in NAMED_REWARD:
            ctx.report(
                "error",
                f"{key}.default_reward_fn_type",
                f"workflow {workflow!r} scores with the reward its taskset names, and this taskset names none",
                allowed=", ".join(REWARDS) + ", or module:function",
                hint=f"set {key}.default_reward_fn_type (or {INPUT}.default_reward_fn_type)",
            )
            continue
        if name is None:
            name = DEFAULT_REWARDS.get(workflow)
        elif not _known_reward(ctx, key, name, reported):
            continue
        if name in REWARDS:
            _check_reward_args(ctx, key, name, taskset.get("reward_fn_args") or {})


def _known_reward(ctx: Context, key: str, name: str, reported: set) -> bool:
    """Whether a taskset's reward name can run; reports it (once where several tasksets share it) when not."""
    if reward_path(name) and name not in UNSUPPORTED_REWARDS:
        return True
    where = f"{key}.default_reward_fn_type"
    where = where if ctx.user_set(where) else f"{INPUT}.default_reward_fn_type"
    if where in reported:
        return False  # several tasksets falling back to one default: one error
    reported.add(where)
    allowed = ", ".join(REWARDS) + ", or module:function"
    if name in UNSUPPORTED_REWARDS:
        message = f"reward function {name!r} is known to Trinity-RFT but not supported by trinity: "
        ctx.report("error", where, message + UNSUPPORTED_REWARDS[name], allowed=allowed, hint=REWARD_HINT)
    else:
        hint = did_you_mean(name, REWARDS) or REWARD_HINT
        ctx.report("error", where, f"unknown reward function {name!r}", allowed=allowed, hint=hint)
    return False


def _check_reward_args(ctx: Context, key: str, name: str, args: dict) -> None:
    """A built-in reward's reward_fn_args against its argument model, each error where the argument is written."""
    model, args_key = REWARDS[name].args, f"{key}.reward_fn_args"
    if not model.model_fields and args:
        ctx.report(
            "error",
            args_key,
            f"reward function {name!r} takes no arguments",
            allowed="{}",
            hint=f"remove {args_key}",
        )
        return
    try:
        validate(model, args, lambda path: ctx.where(dotted(path)), prefix=undotted(args_key))
    except ConfigError as exc:
        ctx.issues.extend(replace(i, message=f"{i.message} (reward function {name!r})") for i in exc.issues)
    for arg, why in REWARDS[name].unread:
        if arg in args:
            ctx.report("note", f"{args_key}.{arg}", f"changes nothing: {why}", hint=f"remove {args_key}.{arg}")


def _fill_defaults(ctx: Context) -> dict[str, str]:
    """Fill each taskset's workflow and reward function from the input's defaults; taskset key -> where its workflow
    came from."""
    sources = {}
    for key, taskset, is_eval in tasksets(ctx):
        workflow = ("default_eval_workflow_type",) * is_eval + ("default_workflow_type",)
        for field, fallbacks in (
            ("default_workflow_type", workflow),
            ("default_reward_fn_type", ("default_reward_fn_type",)),
        ):
            source = next((f"{INPUT}.{name}" for name in fallbacks if ctx.get(f"{INPUT}.{name}") is not None), None)
            if taskset.get(field) is None and source is not None:
                ctx.set(f"{key}.{field}", ctx.get(source), "taskset_defaults", (ctx.input(source),))
                if field == "default_workflow_type":
                    sources[key] = source
    return sources


@rule(reads=("algorithm.repeat_times", *each_taskset("repeat_times")), writes=each_taskset("repeat_times"))
def taskset_repeat_times(ctx: Context) -> None:
    """Training tasksets roll out algorithm.repeat_times per task unless told; evaluation once (upstream's rule)."""
    for key, taskset, is_eval in tasksets(ctx):
        if taskset.get("repeat_times") is None:
            value, inputs = (
                (1, ("evaluation taskset",))
                if is_eval
                else (ctx.get("algorithm.repeat_times"), (ctx.input("algorithm.repeat_times"),))
            )
            ctx.set(f"{key}.repeat_times", value, "taskset_repeat_times", inputs)


@rule(
    reads=(
        "model.logprobs",
        "model.max_response_tokens",
        "model.temperature",
        "model.top_p",
        *each_taskset("rollout_args"),
    ),
    writes=each_taskset("rollout_args"),
)
def rollout_args(ctx: Context) -> None:
    """A taskset's temperature, top_p and logprobs default to model.*, its max_tokens to model.max_response_tokens
    (upstream's rule)."""
    pairs = (
        ("temperature", "model.temperature"),
        ("top_p", "model.top_p"),
        ("logprobs", "model.logprobs"),
        ("max_tokens", "model.max_response_tokens"),
    )
    for key, taskset, _ in tasksets(ctx):
        for field, source in pairs:
            if taskset["rollout_args"].get(field) is None and ctx.get(source) is not None:
                ctx.set(f"{key}.rollout_args.{field}", ctx.get(source), "rollout_args", (ctx.input(source),))


@rule(
    reads=(
        "algorithm.algorithm_type",
        "algorithm.bypass_old_logprobs",
        "buffer.explorer_input.eval_tasksets",
        "buffer.explorer_input.taskset.rollout_args",
        "buffer.explorer_input.tasksets.*.rollout_args",
        "explorer.rollout_model.engine_type",
    ),
    writes=("algorithm.bypass_old_logprobs",),
    # the engine's own penalty as written; model.repetition_penalty reaches it only later (model.rollout_model)
    before=("explorer.rollout_model.repetition_penalty",),
)
def engine_logprobs(ctx: Context) -> None:
    """algorithm.bypass_old_logprobs (the engines' log-probs taken as the old policy's) only where they are the
    distribution a token was sampled from: an engine whose log-probs are the logits' own on this hardware
    (facts.raw_logprobs_engines) differs from it wherever training rollouts shape it (a temperature other than 1,
    top-k, top-p, a repetition penalty); the trainer recomputes them then, a user's true is warned about."""
    engine, key = ctx.get("explorer.rollout_model.engine_type"), "algorithm.bypass_old_logprobs"
    if (
        engine not in ctx.facts.raw_logprobs_engines
        or not ctx.get(key)
        or not needs_rollout(ctx.get("algorithm.algorithm_type"))
    ):
        return
    found = [
        (k, t["rollout_args"])
        for k, t, is_eval in tasksets(ctx)
        if not is_eval and shaped_sampling(ctx, t["rollout_args"])
    ]
    if not found:
        return
    shaped, args = found[0]
    why = (
        f"{engine!r} returns the logits' own log-probs on {ctx.loaded.name} "
        f"({ctx.loaded.where(('facts', 'raw_logprobs_engines'))}), and {shaped}.rollout_args sample from another "
        "distribution"
    )
    if ctx.user_set(key):
        hint = f"set {key}=false: the trainer recomputes the old log-probs"
        ctx.report("warning", key, f"{why}: the update would take wrong old log-probs", allowed="false", hint=hint)
        return
    ctx.report("note", key, f"{why}: the trainer recomputes the old log-probs")
    sampling = ", ".join(f"{name}={args[name]!r}" for name in ("temperature", "top_k", "top_p"))
    inputs = (
        ctx.fact("raw_logprobs_engines"),
        ctx.input("explorer.rollout_model.engine_type"),
        f"{shaped}: {sampling}",
    )
    ctx.set(key, False, "engine_logprobs", inputs)


@rule(reads=("algorithm.bypass_old_logprobs", "algorithm.loss_agg_mode", "algorithm.policy_loss_fn"))
def batch_masked_loss(ctx: Context) -> None:
    """A loss that masks tokens over the whole batch from the current policy's log-ratio to the rollout's (M2PO's
    second-moment mask: POLICY_LOSSES' batch_mask) needs the rollout's own log-probs as the old ones, and aggregates
    by token-mean over every valid token (Trinity-RFT's m2po_policy_loss.py): anything else is refused here, before
    the trainer would."""
    name = ctx.get("algorithm.policy_loss_fn")
    if name not in POLICY_LOSSES or POLICY_LOSSES[name].batch_mask is None:
        return
    if not ctx.get("algorithm.bypass_old_logprobs"):
        ctx.report(
            "error",
            "algorithm.bypass_old_logprobs",
            f"policy_loss_fn {name!r} compares the current policy with the rollout's own log-probs, and false has "
            "the trainer recompute them as the current policy's",
            allowed="true",
            hint="set algorithm.bypass_old_logprobs: true (on a profile whose engine's log-probs are the logits' own, "
            "sample training rollouts at temperature 1 with no top-k/top-p)",
        )
    if ctx.get("algorithm.loss_agg_mode") != TOKEN_MEAN:
        ctx.report(
            "error",
            "algorithm.loss_agg_mode",
            f"policy_loss_fn {name!r} normalises over every valid token of the batch",
            allowed=repr(TOKEN_MEAN),
            hint=f"set algorithm.loss_agg_mode: {TOKEN_MEAN}, or remove it",
        )


def shaped_sampling(ctx: Context, args: dict) -> bool:
    """Whether sampling with `args` (and the engine's repetition penalty) draws from other than the logits' own
    distribution."""
    penalty = ctx.get("explorer.rollout_model.repetition_penalty")
    return args["temperature"] != 1 or args["top_k"] > 0 or (args["top_p"] or 1) < 1 or (penalty or 1) != 1


@rule(
    reads=(
        "algorithm.policy_loss_fn",
        "buffer.explorer_input.eval_tasksets",
        "buffer.explorer_input.taskset.rollout_args",
        "buffer.explorer_input.tasksets.*.rollout_args",
        "mode",
    )
)
def training_temperature(ctx: Context) -> None:
    """An RL update divides logits by the sampling temperature: one temperature, above 0, for every training taskset."""
    if not modes.mode(ctx.get("mode")).trains or not is_rl_loss(ctx.get("algorithm.policy_loss_fn")):
        return
    found = {}
    for key, taskset, is_eval in tasksets(ctx):
        if not is_eval:
            own = f"{key}.rollout_args.temperature"
            found[own if ctx.user_set(own) else "model.temperature"] = taskset["rollout_args"]["temperature"]
    for key, value in found.items():
        if value == 0:
            ctx.report(
                "error",
                key,
                "training rollouts are greedy (temperature 0), but the update divides logits by the temperature",
                allowed="> 0",
                hint="sample training tasksets at a temperature > 0 (evaluation tasksets may be greedy)",
            )
    if len(set(found.values())) > 1:
        values = ", ".join(f"{k}={v}" for k, v in found.items())
        ctx.report(
            "error",
            next(iter(found)),
            f"training tasksets sample at different temperatures ({values}), but the update scales logits by one",
            hint="give every training taskset the same rollout_args.temperature",
        )


@rule(
    reads=("algorithm.repeat_times", "buffer.batch_size", "buffer.train_batch_size"),
    writes=("buffer.train_batch_size",),
)
def train_batch_size(ctx: Context) -> None:
    """buffer.train_batch_size (experiences per train step) = batch_size x repeat_times when left at 0.

    Trinity-RFT refuses 0 in mode train and for SFT; here the same product is used there too.
    """
    if ctx.get("buffer.train_batch_size") == 0:
        value = ctx.get("buffer.batch_size") * ctx.get("algorithm.repeat_times")
        ctx.set(
            "buffer.train_batch_size",
            value,
            "train_batch_size",
            (ctx.input("buffer.batch_size"), ctx.input("algorithm.repeat_times")),
        )
