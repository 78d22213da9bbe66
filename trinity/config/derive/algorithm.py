"""The algorithm_preset rule: the functions an algorithm_type fills in, each one's arguments validated and completed,
and the checks that they fit each other, the mode and the data the trainer reads."""

from dataclasses import replace

from ...errors import ConfigError, Issue, did_you_mean, dotted, undotted
from .. import modes
from ..algorithms.advantages import ADVANTAGES
from ..algorithms.args import ONLY_DEFAULT, NoArgs
from ..algorithms.functions import FUNCTIONS, UNSUPPORTED
from ..algorithms.losses import POLICY_LOSSES
from ..algorithms.presets import ALGORITHMS
from ..algorithms.queries import fits_loss, is_rl_loss, masks_tokens, uses_teacher
from ..algorithms.sampling import SAMPLE_STRATEGIES
from ..validate import validate
from ._context import Context
from ._rule import each_taskset, rule
from .buffer import AUXILIARY, EXPERIENCES

KEY = "algorithm.algorithm_type"
# what the preset fills where unset, and the rule checks where set: every function, its arguments, the aggregation
_FUNCTIONS = tuple(
    f"algorithm.{kind}{part}"
    for kind in ("advantage_fn", "entropy_loss_fn", "kl_loss_fn", "kl_penalty_fn", "policy_loss_fn", "sample_strategy")
    for part in ("", "_args")
) + ("algorithm.loss_agg_mode",)


@rule(
    reads=(
        *_FUNCTIONS,
        "algorithm.algorithm_type",
        "algorithm.repeat_times",
        "buffer.trainer_input.auxiliary_buffers.*.path",
        "buffer.trainer_input.experience_buffer.format.enable_concatenated_multi_turn",
        "buffer.trainer_input.experience_buffer.format.prompt_type",
        "buffer.trainer_input.experience_buffer.path",
        "buffer.trainer_input.experience_buffer.storage_type",
        "mode",
        "model.teacher_model_path",
        *each_taskset("#"),
    ),
    writes=_FUNCTIONS,
    # each training taskset's own repeat count, else algorithm.repeat_times: what taskset_repeat_times (later) fills
    before=("buffer.explorer_input.taskset.repeat_times", "buffer.explorer_input.tasksets.*.repeat_times"),
)
def algorithm_preset(ctx: Context) -> None:
    """Unset functions come from the algorithm_type's preset; every function's args are validated and completed."""
    name = ctx.get(KEY)
    preset = ALGORITHMS.get(name)
    if preset is None:
        hint = did_you_mean(name, ALGORITHMS) or "choose one of the allowed algorithms"
        ctx.report("error", KEY, f"unknown algorithm {name!r}", allowed=", ".join(ALGORITHMS), hint=hint)
        return
    if ctx.get("algorithm.loss_agg_mode") is None:
        ctx.set("algorithm.loss_agg_mode", preset.loss_agg_mode, "algorithm_preset", (ctx.input(KEY),))
    for kind, default in preset.functions.items():
        _function(ctx, kind, default)
    _check_pairing(ctx, preset.data)
    _check_token_mask(ctx)
    _check_penalty(ctx)
    _check_teacher(ctx)
    _check_sampling(ctx, preset.data)
    _check_groups(ctx)
    _check_mode(ctx, name, preset.data == "rollouts")
    _check_data_set(ctx, name, preset.data)


def _check_pairing(ctx: Context, data: str) -> None:
    """An RL loss needs advantages and an SFT loss reads none (or RAFT's choice of rollouts): a pairing that would
    ignore one is refused, on the key a person wrote (advantage_fn when both were)."""
    loss, advantage = ctx.get("algorithm.policy_loss_fn"), ctx.get("algorithm.advantage_fn")
    if loss not in POLICY_LOSSES or advantage not in ADVANTAGES:
        return  # reported as unknown
    if ADVANTAGES[advantage].selects and data != "rollouts":
        ctx.report(
            "error",
            "algorithm.advantage_fn",
            f"{advantage!r} chooses among a task's rollouts by reward; algorithm {ctx.get(KEY)!r} trains on a data "
            "set, which has neither",
            allowed="none",
            hint="remove advantage_fn, or use algorithm_type: raft",
        )
        return
    if fits_loss(advantage, loss):
        return
    rl = is_rl_loss(loss)
    why = (
        f"trains on advantages, and {advantage!r} computes none"
        if rl
        else f"reads no advantages: {advantage!r} is ignored"
    )
    message = f"policy_loss_fn {loss!r} {why}"
    if ctx.user_set("algorithm.advantage_fn") or not ctx.user_set("algorithm.policy_loss_fn"):
        ctx.report(
            "error",
            "algorithm.advantage_fn",
            message,
            allowed=", ".join(
                n for n, a in ADVANTAGES.items() if fits_loss(n, loss) and (data == "rollouts" or not a.selects)
            ),
            hint="remove advantage_fn to take the algorithm's",
        )
        return
    ctx.report(
        "error",
        "algorithm.policy_loss_fn",
        message,
        allowed=", ".join(n for n in POLICY_LOSSES if fits_loss(advantage, n)),
        hint="remove policy_loss_fn to take the algorithm's",
    )


def _check_token_mask(ctx: Context) -> None:
    """An advantage function that takes tokens out of the loss (Clip_B) does so before the update, over the batch's
    rollouts; a mixing loss averages its rollouts' part over their tokens counted before that, with SFT samples
    among them (Trinity-RFT computes such advantages in the explorer, where clipb_advantage.py cannot run)."""
    advantage, loss = ctx.get("algorithm.advantage_fn"), POLICY_LOSSES.get(ctx.get("algorithm.policy_loss_fn"))
    if not masks_tokens(advantage) or loss is None or loss.batch != "mix":
        return
    ctx.report(
        "error",
        "algorithm.advantage_fn",
        f"{advantage!r} takes tokens out of the loss over a batch of rollouts; policy_loss_fn "
        f"{ctx.get('algorithm.policy_loss_fn')!r} mixes SFT samples into the batch and counts the rollouts' tokens "
        "before that",
        allowed=", ".join(
            n for n in ADVANTAGES if fits_loss(n, ctx.get("algorithm.policy_loss_fn")) and not masks_tokens(n)
        ),
        hint=f"remove advantage_fn to take the preset's, or train with {advantage} in a stage of its own "
        "(algorithm_type grpo_verl)",
    )


def _check_penalty(ctx: Context) -> None:
    """A KL penalty comes off the rewards of rollouts: a loss on a data set (SFT, DPO) reads none, so it is refused."""
    loss, penalty = ctx.get("algorithm.policy_loss_fn"), ctx.get("algorithm.kl_penalty_fn")
    if penalty in (None, "none") or loss not in POLICY_LOSSES or is_rl_loss(loss):
        return
    ctx.report(
        "error",
        "algorithm.kl_penalty_fn",
        f"policy_loss_fn {loss!r} trains on no rewards: a KL penalty {penalty!r} would be ignored",
        allowed="none",
        hint="set kl_penalty_fn in the RL stage only (stages.N.algorithm.kl_penalty_fn), or use kl_loss_fn",
    )


TEACHER = "model.teacher_model_path"


def _chosen_at(ctx: Context, key: str) -> str:
    """Where a function was chosen: where `key` was written, else where the algorithm_type that filled it was."""
    return ctx.where(key if ctx.user_set(key) else KEY)


def _check_teacher(ctx: Context) -> None:
    """Distillation reads a teacher's log-probs, so it needs model.teacher_model_path; a teacher that no advantage
    function reads would be loaded for nothing, so it is refused."""
    advantage, teacher = ctx.get("algorithm.advantage_fn"), ctx.get(TEACHER)
    readers = ", ".join(n for n, a in ADVANTAGES.items() if a.teacher)
    if uses_teacher(advantage) and not teacher:  # located where the distillation was chosen
        ctx.issues.append(
            Issue(
                f"advantage_fn {advantage!r} learns from a teacher model's log-probs, and no teacher is named",
                key=TEACHER,
                source=_chosen_at(ctx, "algorithm.advantage_fn"),
                allowed="a local model folder with model.model_path's tokenizer",
                hint=f"set {TEACHER}: PATH (Trinity-RFT's explorer.auxiliary_models[0] is this teacher)",
            )
        )
    elif teacher and advantage in ADVANTAGES and not uses_teacher(advantage):
        ctx.report(
            "error",
            TEACHER,
            f"advantage_fn {advantage!r} reads no teacher: {teacher!r} would be loaded for nothing",
            allowed=f"unset, or an advantage_fn that reads one ({readers})",
            hint=f"remove {TEACHER}, or set it in the distillation stage only (stages.N.{TEACHER})",
        )


SAMPLE = "algorithm.sample_strategy"


def _check_sampling(ctx: Context, data: str) -> None:
    """The sample strategy fits what the trainer reads: mixing SFT samples goes with a loss that trains them (and
    needs their data set), dropping stale experiences with a store that can skip them; a data set is read as is."""
    name, loss = ctx.get(SAMPLE), POLICY_LOSSES.get(ctx.get("algorithm.policy_loss_fn"))
    strategy = SAMPLE_STRATEGIES.get(name)
    if strategy is None or loss is None:
        return  # reported as unknown
    if data != "rollouts" and name != "default":
        ctx.report(
            "error",
            SAMPLE,
            f"algorithm {ctx.get(KEY)!r} reads its data set in order",
            allowed="default",
            hint=f"remove {SAMPLE}",
        )
    elif strategy.mixes != (loss.batch == "mix"):
        _mixing_mismatch(ctx, name, strategy.mixes)
    else:
        _check_auxiliary(ctx, strategy.mixes)
        _check_stale(ctx, name, strategy.drops_stale)


def _mixing_mismatch(ctx: Context, name: str, mixes: bool) -> None:
    """SFT samples in the batch without a loss that trains them as such, or such a loss without them."""
    loss = ctx.get("algorithm.policy_loss_fn")
    hint = "use algorithm_type: mix (or mix_chord)"
    if mixes:
        message = f"sample_strategy {name!r} puts SFT samples in each batch; policy_loss_fn {loss!r} would train "
        mixing = ", ".join(n for n, p in POLICY_LOSSES.items() if p.batch == "mix")
        ctx.report("error", SAMPLE, message + "them as rollouts", allowed=mixing, hint=hint)
        return
    message = f"policy_loss_fn {loss!r} trains SFT samples mixed into each batch; sample_strategy {name!r} puts none"
    hint = f"set {SAMPLE}: mix with its SFT data set in {AUXILIARY}, or {hint}"
    ctx.report("error", "algorithm.policy_loss_fn", message + " there", hint=hint)


def _check_stale(ctx: Context, name: str, drops_stale: bool) -> None:
    """Dropping stale experiences needs a store that can skip them: a file is read by position."""
    storage = (ctx.get(EXPERIENCES) or {}).get("storage_type")
    if drops_stale and storage == "file":
        ctx.report(
            "error",
            SAMPLE,
            f"{name!r} skips experiences made by old weights; a 'file' experience buffer is read by position",
            allowed="default, or an experience buffer with storage_type queue or sql",
            hint="set buffer.trainer_input.experience_buffer.storage_type: queue",
        )


def _check_auxiliary(ctx: Context, mixes: bool) -> None:
    """mix reads its SFT data set from auxiliary_buffers[sft_dataset_name]; a data set nothing reads is refused."""
    buffers = ctx.get(AUXILIARY) or {}
    wanted = (ctx.get("algorithm.sample_strategy_args") or {}).get("sft_dataset_name") if mixes else None
    for unread in (n for n in buffers if n != wanted):
        ctx.report(
            "error",
            f"{AUXILIARY}.{unread}",
            f"no sample strategy reads {unread!r}" + (f" (mix reads {wanted!r})" if wanted else ""),
            allowed=f"{{{wanted}: ...}}" if wanted else "{} (none)",
            hint=f"set algorithm.sample_strategy_args.sft_dataset_name: {unread}" if wanted else f"remove {AUXILIARY}",
        )
    if wanted and not (buffers.get(wanted) or {}).get("path"):  # located where mixing was chosen
        ctx.issues.append(
            Issue(
                f"sample_strategy 'mix' mixes samples of the SFT data set {wanted!r} into each batch, and none is "
                "named",
                key=f"{AUXILIARY}.{wanted}.path",
                source=_chosen_at(ctx, SAMPLE),
                allowed="a local JSONL, JSON or Parquet file or folder",
                hint=f"set {AUXILIARY}: {{{wanted}: {{storage_type: file, path: DATA, format: "
                f"{{{DATA_KEYS['sft']}}}}}}}",
            )
        )


def _function(ctx: Context, kind: str, default: str) -> None:
    key = f"algorithm.{kind}"
    if ctx.get(key) is None:
        ctx.set(key, default, "algorithm_preset", (ctx.input(KEY),))
    name, known = ctx.get(key), FUNCTIONS[kind]
    if name not in known:
        _unknown(ctx, kind, name)
        return
    if kind == "sample_strategy" and SAMPLE_STRATEGIES[name].same_as:
        same = SAMPLE_STRATEGIES[name].same_as
        ctx.report("warning", key, f"{name!r} is Trinity-RFT's deprecated name of {same!r}", hint=f"set {same!r}")
        ctx.set(key, same, "algorithm_preset", (ctx.input(key),))
        name = same
    args_key = f"{key}_args"
    if known[name] is NoArgs and ctx.get(args_key):
        ctx.report("error", args_key, f"{kind} {name!r} takes no arguments", allowed="{}", hint=f"remove {args_key}")
        return
    try:
        args = validate(
            known[name],
            ctx.get(args_key) or {},
            lambda path: ctx.where(dotted(path)),
            prefix=("algorithm", f"{kind}_args"),
        )
    except ConfigError as exc:
        ctx.issues.extend(_only_default(issue, known[name]) for issue in exc.issues)
        return
    values = args.model_dump()
    if "loss_agg_mode" in values:
        _loss_agg_mode(ctx, args_key, values)
    ctx.set(args_key, values, "algorithm_preset", (ctx.input(key),))


def _unknown(ctx: Context, kind: str, name: str) -> None:
    key, known = f"algorithm.{kind}", FUNCTIONS[kind]
    reason = UNSUPPORTED.get(kind, {}).get(name)
    if reason:
        ctx.report(
            "error",
            key,
            f"{kind} {name!r} is known to Trinity-RFT but not supported by trinity yet: {reason}",
            allowed=", ".join(known),
            hint=f"remove {key} to take the preset's",
        )
        return
    ctx.report(
        "error",
        key,
        f"unknown {kind} {name!r}",
        allowed=", ".join(known),
        hint=did_you_mean(name, known) or f"remove {key} to take the preset's",
    )


def _only_default(issue: Issue, model) -> Issue:
    """An argument that accepts only upstream's default says so, instead of pydantic's 'input should be ...'."""
    field = model.model_fields.get(str(undotted(issue.key)[-1])) if issue.key else None
    if field is None or not (field.description or "").endswith(ONLY_DEFAULT):
        return issue
    return replace(
        issue,
        message=f"known Trinity-RFT argument, not supported by trinity yet: {field.description[: -len(ONLY_DEFAULT)]}",
        allowed=repr(field.default),
        hint=f"remove it, or set {field.default!r}",
    )


def _loss_agg_mode(ctx: Context, args_key: str, values: dict) -> None:
    # Upstream overwrites the policy loss's own loss_agg_mode with algorithm.loss_agg_mode; say so when they differ.
    mode, written = ctx.get("algorithm.loss_agg_mode"), values["loss_agg_mode"]
    if written is not None and written != mode:
        ctx.report(
            "warning",
            f"{args_key}.loss_agg_mode",
            f"{written!r} is replaced by algorithm.loss_agg_mode={mode!r}, as Trinity-RFT does",
            hint="set algorithm.loss_agg_mode instead",
        )
    values["loss_agg_mode"] = mode


def _check_groups(ctx: Context) -> None:
    """GRPO learns nothing from groups of one: warn when a training taskset would roll out each task once."""
    explorer_input = ctx.get("buffer.explorer_input")
    training = [t for t in [explorer_input.get("taskset"), *explorer_input.get("tasksets", [])] if t]
    once = [t for t in training if (t.get("repeat_times") or ctx.get("algorithm.repeat_times")) < 2]
    advantage = ADVANTAGES.get(ctx.get("algorithm.advantage_fn"))
    if advantage is not None and advantage.grouped and once:
        ctx.report(
            "warning",
            "algorithm.repeat_times",
            f"{ctx.get('algorithm.advantage_fn')} compares the rollouts (episodes) of one task with each other; with "
            "1 per task there is nothing to compare, and a rollout's advantage is its own reward or 0",
            allowed=">= 2",
            hint="set algorithm.repeat_times to 4 or more",
        )


def _check_mode(ctx: Context, name: str, needs_rollout: bool) -> None:
    entry = modes.mode(ctx.get("mode"))
    if needs_rollout or (entry.trains and not entry.explores):
        return
    allowed = [n for n, m in modes.MODES.items() if m.trains and not m.explores]
    ctx.report(
        "error",
        "mode",
        f"algorithm {name!r} trains on a data set and generates nothing; mode {ctx.get('mode')!r} would start "
        "rollout engines for nothing",
        allowed=", ".join(allowed),
        hint=f"set mode: {allowed[0]} (or a stage with mode: {allowed[0]})",
    )


DATA_KEYS = {"sft": "prompt_key, response_key", "pairs": "prompt_key, chosen_key, rejected_key", "text": "prompt_key"}


def _check_data_set(ctx: Context, name: str, data: str) -> None:
    """An algorithm that trains on a data set reads it from buffer.trainer_input.experience_buffer.path."""
    key = EXPERIENCES
    data_set = ctx.get(key) or {}
    _check_multi_turn(ctx, name, data, data_set.get("format") or {})
    if data == "rollouts" or not modes.mode(ctx.get("mode")).trains:
        return
    if data == "text" and data_set.get("path") and (data_set.get("format") or {}).get("prompt_type") != "plaintext":
        ctx.report(
            "error",
            f"{key}.format.prompt_type",
            f"algorithm {name!r} trains on raw text, read from the column format.prompt_key",
            allowed="plaintext",
            hint=f"set {key}.format.prompt_type: plaintext",
        )
    if data_set.get("path"):
        return
    ctx.report(
        "error",
        f"{key}.path",
        f"algorithm {name!r} trains on a data set, and no experience_buffer names one",
        allowed="a local JSONL, JSON or Parquet file or folder",
        hint=f"set {key}: {{storage_type: file, path: DATA, format: {{{DATA_KEYS[data]}}}}}",
    )


def _check_multi_turn(ctx: Context, name: str, data: str, fmt: dict) -> None:
    """Multi-turn SFT (every assistant turn trained) reads an SFT data set of messages, nothing else."""
    if not fmt.get("enable_concatenated_multi_turn"):
        return
    if data == "sft" and fmt.get("prompt_type", "messages") != "plaintext":
        return
    what = "plaintext rows" if data == "sft" else ("rollouts" if data == "rollouts" else f"a {data} data set")
    ctx.report(
        "error",
        f"{EXPERIENCES}.format.enable_concatenated_multi_turn",
        f"trains every assistant turn of an SFT data set's messages; algorithm {name!r} reads {what}",
        allowed="false",
        hint="set it on an SFT stage whose data set has prompt_type: messages, or remove it",
    )
