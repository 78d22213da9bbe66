"""Rules for algorithm.rollout_correction (verl's rollout correction: trinity/config/algorithms/rollout_correction.py).

Trinity-RFT's users write it where verl reads it, `trainer.trainer_config.algorithm.rollout_correction` (its
examples/entropy/clipb.yaml), or as Trinity-RFT's own `algorithm.rollout_correction`: both are trinity's one section,
and its `bypass_mode` is verl's name of `algorithm.bypass_old_logprobs` (trainer.verl_twins calls `from_verl` and
`bypass_twin`, as written, before any rule reads them). `rollout_correction` then checks what the run can do with it:
the correction compares the trainer's recomputed old log-probs with the rollout engine's, so it needs both.
"""

import json

from .. import modes
from ..algorithms.losses import POLICY_LOSSES
from ..algorithms.queries import needs_rollout
from ..algorithms.rollout_correction import REJECTIONS, is_bounds, rejection_bounds, rejection_options
from ..merge import get_path
from ..schema.algorithm import RolloutCorrectionConfig
from ._context import Context
from ._rule import rule
from .buffer import shaped_sampling, tasksets

SECTION = "algorithm.rollout_correction"
BYPASS = "algorithm.bypass_old_logprobs"
BYPASS_MODE = f"{SECTION}.bypass_mode"
VERL_PATH = ("algorithm", "rollout_correction")  # where verl (and Trinity-RFT's legacy trainer) reads it
FIELDS = RolloutCorrectionConfig.model_fields
DECOUPLE = f"set {BYPASS_MODE}: false (trinity's {BYPASS}: false)"
_ABSENT = object()


def from_verl(ctx: Context, passthrough: dict, at: str) -> None:
    """verl's algorithm.rollout_correction under trainer.trainer_config (`passthrough`, at key `at`) is trinity's
    section, key for key, each located where it was written; removed from `passthrough`. A key written in both places
    with two values is an error."""
    written = get_path(passthrough, VERL_PATH, _ABSENT)
    if written is _ABSENT:
        return
    verl_key = f"{at}.{'.'.join(VERL_PATH)}"
    if written is not None and not isinstance(written, dict):
        ctx.report(
            "error",
            verl_key,
            f"must be a mapping of verl's rollout_correction keys (got {written!r})",
            hint=f"write {verl_key}: {{KEY: VALUE}}, or {SECTION}",
        )
        return
    algorithm = passthrough["algorithm"]
    del algorithm["rollout_correction"]
    if not algorithm:
        del passthrough["algorithm"]
    if written is None:  # verl's null: no correction, trinity's default too
        ctx.report("note", verl_key, "null is no rollout correction, as without it", hint=f"remove {verl_key}")
        return
    if ctx.get(SECTION) is None:
        ctx.section_as_written(SECTION, verl_key)
    for name, value in written.items():
        ours, theirs = f"{SECTION}.{name}", f"{verl_key}.{name}"
        if ctx.contradicts(ours, theirs, value, "algorithm.rollout_correction is that section"):
            continue
        ctx.set_as_written(ours, value, theirs)
    ctx.report(
        "note",
        verl_key,
        f"verl's algorithm.rollout_correction is trinity's {SECTION}: its keys set there",
        hint=f"write them under {SECTION}",
    )


def bypass_twin(ctx: Context) -> None:
    """algorithm.rollout_correction.bypass_mode, written (there or in verl's section), sets
    algorithm.bypass_old_logprobs as if written where it was; that key written too, with another value, is an
    error."""
    value = get_path(ctx.get(SECTION), ("bypass_mode",))
    if value is None:
        return
    if ctx.contradicts(BYPASS, BYPASS_MODE, value, "bypass_mode is that setting"):
        return
    if not isinstance(value, bool):
        return  # validation names the value
    ctx.set_as_written(BYPASS, value, BYPASS_MODE)
    ctx.report(
        "note",
        BYPASS_MODE,
        f"verl's bypass_mode is trinity's {BYPASS}: {BYPASS}={json.dumps(value)} ("
        + ("the rollout's log-probs are the old policy's" if value else "the trainer recomputes the old log-probs")
        + ")",
        hint=f"write {BYPASS}: {json.dumps(value)}",
    )


@rule(
    reads=(
        SECTION,
        BYPASS,
        "algorithm.algorithm_type",
        "algorithm.policy_loss_fn",
        "explorer.rollout_model.engine_type",
        "mode",
        # buffer.tasksets and shaped_sampling, as buffer.engine_logprobs reads them
        "buffer.explorer_input.eval_tasksets",
        "buffer.explorer_input.taskset.rollout_args",
        "buffer.explorer_input.tasksets.*.rollout_args",
    ),
    # the engine's own penalty as written; model.rollout_model reaches it only later (buffer.engine_logprobs reads it)
    before=("explorer.rollout_model.repetition_penalty",),
)
def rollout_correction(ctx: Context) -> None:
    """What the run can do with algorithm.rollout_correction: its values (verl's), a run that trains on rollouts with
    an RL loss, the trainer's recomputed old log-probs where it asks for IS weights or rejection (decoupled mode), a
    loss that applies IS weights, and engine log-probs of the distribution the tokens were sampled from."""
    section = ctx.get(SECTION)
    if section is None:
        return
    cfg = {name: field.default for name, field in FIELDS.items()} | section
    mode = ctx.get("mode")
    if not modes.mode(mode).trains:
        ctx.report("note", SECTION, f"changes nothing in mode {mode!r}: no trainer runs", hint=f"remove {SECTION}")
        return
    algorithm, loss = ctx.get("algorithm.algorithm_type"), ctx.get("algorithm.policy_loss_fn")
    entry = POLICY_LOSSES.get(loss)
    if not needs_rollout(algorithm) or entry is None or entry.batch != "rl":
        why = (
            f"algorithm {algorithm!r} trains on a data set"
            if not needs_rollout(algorithm)
            else f"policy_loss_fn {loss!r} trains on "
            + ("SFT samples among the rollouts, which no engine sampled" if entry and entry.batch == "mix" else "no")
            + " rollouts"
        )
        ctx.report(
            "error",
            SECTION,
            f"{why}: rollout correction compares the rollout engine's log-probs of each token with the trainer's, and "
            "there are none to compare",
            hint=f"remove {SECTION}",
        )
        return
    _values(ctx, cfg)
    bypass = ctx.get(BYPASS)
    asked = [f"{SECTION}.{name}" for name in ("rollout_is", "rollout_rs") if cfg[name] is not None]
    if cfg["loss_type"] == "reinforce":
        _reinforce(ctx, bypass)
    if bypass and asked:
        ctx.report(
            "error",
            asked[0],
            f"{cfg[asked[0].rpartition('.')[2]]!r} needs the trainer's recomputed old log-probs (verl's decoupled "
            f"mode), and {BYPASS}=true ({ctx.where(BYPASS) or 'its default'}) takes the rollout's as the old: "
            "trinity computes IS weights and rejection once per batch, before the update, as verl's decoupled mode; "
            "verl's bypass mode computes them inside its loss, which trinity does not run",
            allowed=f"{BYPASS_MODE}: false",
            hint=DECOUPLE,
        )
    elif bypass:
        ctx.report(
            "note",
            SECTION,
            f"computes nothing with {BYPASS}=true: the policy loss's ratio is against the rollout's log-probs (verl's "
            "bypass mode with ppo_clip), and the rollout_corr/* metrics compare the trainer's recomputed ones with "
            "them",
            hint=f"{DECOUPLE} for the metrics, and rollout_is / rollout_rs for a correction",
        )
    if cfg["rollout_is"] is not None and not entry.is_weights:
        losses = [name for name, e in POLICY_LOSSES.items() if e.is_weights]
        ctx.report(
            "error",
            f"{SECTION}.rollout_is",
            f"{cfg['rollout_is']!r}: policy_loss_fn {loss!r} does not apply importance-sampling weights (verl's "
            "rollout_is_weights) to its per-token losses",
            allowed=f"policy_loss_fn {', '.join(losses)}",
            hint=f"set {SECTION}.rollout_is: null (rollout_rs still rejects), or use one of those losses",
        )
    _raw_logprobs(ctx)


def _values(ctx: Context, cfg: dict) -> None:
    """Thresholds and options as verl parses them (its rollout_corr_helper), refused at their own key."""
    checks = []
    if cfg["rollout_is"] is not None:
        checks.append(("rollout_is_threshold", lambda: is_bounds(cfg["rollout_is_threshold"]), "2.0 or '0.5_5.0'"))
    if cfg["rollout_rs"] is not None:
        options = _options(ctx, cfg["rollout_rs"])
        if options is None:
            return
        example = "'0.5_2.0' (k1) or 0.01 (k2, k3)"
        checks.append(("rollout_rs_threshold", lambda: rejection_bounds(options, cfg["rollout_rs_threshold"]), example))
    for name, parse, example in checks:
        try:
            parse()
        except ValueError as exc:
            key = f"{SECTION}.{name}"
            ctx.report(
                "error",
                key,
                str(exc),
                allowed=f"e.g. {example}",
                hint=f"set {key} as verl reads it (docs/config.md, Rollout correction)",
            )


def _options(ctx: Context, spec: object) -> list[str] | None:
    key = f"{SECTION}.rollout_rs"
    if not isinstance(spec, str):
        return None  # validation names the value
    try:
        return rejection_options(spec)
    except ValueError as exc:
        ctx.report("error", key, str(exc), allowed=", ".join(REJECTIONS), hint=f"name options of verl's in {key}")
        return None


def _reinforce(ctx: Context, bypass: bool) -> None:
    key = f"{SECTION}.loss_type"
    if bypass:
        ctx.report(
            "error",
            key,
            "'reinforce' is not run by this version of trinity: verl's REINFORCE loss with explicit IS weights (its "
            "bypass mode's compute_policy_loss_reinforce) is not among trinity's policy losses, and the run would "
            "train with algorithm.policy_loss_fn instead",
            allowed="'ppo_clip'",
            hint=f"remove {key}, and pick the loss with algorithm.policy_loss_fn",
        )
    else:
        ctx.report("note", key, "changes nothing: verl reads loss_type in bypass mode only", hint=f"remove {key}")


def _raw_logprobs(ctx: Context) -> None:
    """The engines' log-probs must be of the distribution the training tokens were drawn from: an engine that returns
    the logits' own on this hardware (facts.raw_logprobs_engines) gives others wherever sampling shapes it."""
    engine = ctx.get("explorer.rollout_model.engine_type")
    if engine not in ctx.facts.raw_logprobs_engines:
        return
    shaped = [key for key, t, is_eval in tasksets(ctx) if not is_eval and shaped_sampling(ctx, t["rollout_args"])]
    if shaped:
        ctx.report(
            "error",
            SECTION,
            f"{engine!r} returns the logits' own log-probs on {ctx.loaded.name} "
            f"({ctx.loaded.where(('facts', 'raw_logprobs_engines'))}), and {shaped[0]}.rollout_args sample from "
            "another distribution: the correction would weigh each token by the wrong ratio",
            hint="sample training tasksets at temperature 1 with no top-k, top-p or repetition penalty, or remove "
            f"{SECTION}",
        )
