"""Rules for the trainer section: checkpoints kept, and the shape of the verl passthrough."""

import copy
import json

from .. import modes
from ..algorithms.losses import POLICY_LOSSES
from ..algorithms.queries import uses_critic
from ..merge import get_path
from . import rollout_correction as correction
from ._context import Context
from ._rule import rule

PASSTHROUGH = "trainer.trainer_config"
# Where Trinity-RFT reads trainer_config's keys: verl's actor_rollout_ref sections, wrapped or flat.
VERL_SECTIONS = ("model", "actor", "ref", "rollout")
CRITIC = "critic"  # verl's critic section, for an algorithm that trains one
# verl's trainer-section keys Trinity-RFT's examples write that its verl config always overwrites (verl_config.py:
# both from trainer.max_checkpoints_to_keep, 0 by default): accepted with a note, changing nothing, as there
OVERWRITTEN = {
    "trainer": {
        key: "Trinity-RFT writes it from trainer.max_checkpoints_to_keep (its verl_config.py), as trinity does"
        for key in ("max_actor_ckpt_to_keep", "max_critic_ckpt_to_keep")
    }
}
# verl's actor_rollout_ref keys that are not sections -> (the one value Trinity-RFT runs, why another is refused):
# accepted with that value, which changes nothing (Trinity-RFT's verl_legacy trainer raises NotImplementedError
# unless hybrid_engine is true; its newer backend drops the key)
ARR_VALUES = {
    "hybrid_engine": (
        True,
        "verl's actor and its rollout in one worker is how Trinity-RFT runs verl (its trainer refuses false); trinity "
        "runs its own rollout engines beside verl's actor either way",
    )
}

# verl's actor_rollout_ref keys that are one of trinity's settings, value for value. Trinity-RFT's examples write them
# in trainer_config, which upstream hands verl; here each sets its trinity key, with a note, so that everything that
# setting reaches follows (verl's actor, the critic, the memory plan), and leaves the passthrough
VERL_TWINS = {
    "actor.fsdp_config.param_offload": "trainer.param_offload",
    "actor.fsdp_config.optimizer_offload": "trainer.optimizer_offload",
    "actor.fsdp_config.offload_policy": "trainer.offload_policy",
    "actor.ulysses_sequence_parallel_size": "trainer.ulysses_sequence_parallel_size",
    "actor.grad_clip": "trainer.grad_clip",
    "model.use_remove_padding": "trainer.use_remove_padding",
    "model.enable_gradient_checkpointing": "trainer.enable_gradient_checkpointing",
    "model.use_fused_kernels": "trainer.use_fused_kernels",
}
ARR = "actor_rollout_ref"


# verl's algorithm section: its rollout_correction is trinity's algorithm.rollout_correction (rollout_correction.py)
TWIN_SECTIONS = (correction.SECTION, correction.BYPASS)


@rule(
    reads=(PASSTHROUGH,),
    writes=(PASSTHROUGH, *VERL_TWINS.values(), *TWIN_SECTIONS),
    before=(*VERL_TWINS.values(), *TWIN_SECTIONS),
)
def verl_twins(ctx: Context) -> None:
    """A verl key of VERL_TWINS in trainer.trainer_config (bare or under actor_rollout_ref) sets its trinity key as if
    written there; that key written too, with another value, is an error. verl's algorithm.rollout_correction there is
    trinity's algorithm.rollout_correction, whose bypass_mode is algorithm.bypass_old_logprobs
    (rollout_correction.py)."""
    passthrough = copy.deepcopy(ctx.get(PASSTHROUGH))
    correction.from_verl(ctx, passthrough, PASSTHROUGH)
    correction.bypass_twin(ctx)
    for written, verl_key, value in _twins_written(passthrough):
        ours, key = VERL_TWINS[verl_key], f"{PASSTHROUGH}.{written}"
        if ctx.contradicts(ours, key, value, f"{ARR}.{verl_key} is that setting"):
            continue
        ctx.report(
            "note",
            key,
            f"verl's {ARR}.{verl_key} is trinity's {ours}: {ours}={json.dumps(value)}",
            hint=f"write {ours}: {json.dumps(value)}",
        )
        ctx.set_as_written(ours, value, key)
        _drop(passthrough, written.split("."))
    if passthrough != ctx.get(PASSTHROUGH):
        ctx.set(PASSTHROUGH, passthrough, "verl_twins", (ctx.input(PASSTHROUGH),))


def _twins_written(passthrough: dict) -> list[tuple[str, str, object]]:
    """(the key as written under trainer_config, its VERL_TWINS key, the value) for each twin written, flat or under
    actor_rollout_ref."""
    found = []
    for prefix in ("", f"{ARR}."):
        for verl_key in VERL_TWINS:
            value = get_path(passthrough, tuple(f"{prefix}{verl_key}".split(".")), _ABSENT)
            if value is not _ABSENT:
                found.append((prefix + verl_key, verl_key, value))
    return found


_ABSENT = object()  # a key not written, which None (a null written) is not


def _drop(tree: dict, parts: list[str]) -> None:
    """Remove the leaf at `parts` and every mapping it leaves empty."""
    if len(parts) > 1:
        _drop(tree[parts[0]], parts[1:])
    if len(parts) == 1 or tree[parts[0]] == {}:
        del tree[parts[0]]


@rule(
    reads=("trainer.max_actor_ckpt_to_keep", "trainer.max_checkpoints_to_keep"),
    writes=("trainer.max_actor_ckpt_to_keep",),
)
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


@rule(reads=("algorithm.advantage_fn", "trainer.trainer_config"))
def trainer_config(ctx: Context) -> None:
    """trainer.trainer_config holds verl sections (model, actor, ref, rollout), bare or under actor_rollout_ref,
    and verl's critic section where the algorithm trains a critic."""
    critic = uses_critic(ctx.get("algorithm.advantage_fn"))
    for name, value in ctx.get(PASSTHROUGH).items():
        key = f"{PASSTHROUGH}.{name}"
        if name == "actor_rollout_ref" and isinstance(value, dict):
            for inner in value:
                if inner in ARR_VALUES:
                    _only_value(ctx, f"{key}.{inner}", value[inner], *ARR_VALUES[inner])
                elif inner not in VERL_SECTIONS:
                    _refuse(ctx, f"{key}.{inner}", inner, critic)
        elif name in OVERWRITTEN and isinstance(value, dict) and set(value) <= set(OVERWRITTEN[name]):
            for inner in value:
                why = OVERWRITTEN[name][inner]
                ctx.report(
                    "note", f"{key}.{inner}", f"changes nothing: {why}", hint="set trainer.max_checkpoints_to_keep"
                )
        elif name not in VERL_SECTIONS and not (name == CRITIC and critic):
            _refuse(ctx, key, name, critic)
        elif not isinstance(value, dict):
            ctx.report(
                "error",
                key,
                f"must be a mapping of verl's {name} keys (got {value!r})",
                hint=f"write {key}: {{KEY: VALUE}}",
            )


def _only_value(ctx: Context, key: str, value: object, accepted: object, why: str) -> None:
    if type(value) is not type(accepted) or value != accepted:
        ctx.report(
            "error",
            key,
            f"{json.dumps(value)} is not run: {why}",
            allowed=json.dumps(accepted),
            hint=f"set {key}: {json.dumps(accepted)}, or remove it",
        )


def _refuse(ctx: Context, key: str, name: str, critic: bool) -> None:
    if name == "algorithm":
        reason = (
            "trinity passes on verl's algorithm.rollout_correction alone (as algorithm.rollout_correction); the rest "
            "of verl's algorithm section is trinity's algorithm section (advantage_fn_args, kl_penalty_fn, ...)"
        )
    elif name == CRITIC:
        reason = (
            "verl's critic section goes directly under trainer.trainer_config"
            if critic
            else "this algorithm trains no critic (its advantage function reads no values)"
        )
    else:
        reason = (
            "trinity passes verl's actor_rollout_ref sections and, for a critic, critic (Trinity-RFT drops the "
            "rest silently)"
        )
    allowed = ["actor_rollout_ref", *VERL_SECTIONS, "algorithm.rollout_correction"] + ([CRITIC] if critic else [])
    ctx.report(
        "error",
        key,
        f"not a verl section trinity passes on: {reason}",
        allowed=", ".join(allowed),
        hint=f"remove {key}" if name != CRITIC or not critic else f"write it as {PASSTHROUGH}.{CRITIC}",
    )


@rule(
    reads=(
        "algorithm.advantage_fn",
        "algorithm.algorithm_type",
        "buffer.total_steps",
        "trainer.critic_warmup",
        "trainer.total_steps",
    )
)
def critic_warmup(ctx: Context) -> None:
    """trainer.critic_warmup counts train steps of a critic: without one it would be ignored, so it is refused."""
    warmup = ctx.get("trainer.critic_warmup")
    if warmup and not uses_critic(ctx.get("algorithm.advantage_fn")):
        ctx.report(
            "error",
            "trainer.critic_warmup",
            f"{warmup} steps of critic warm-up, but algorithm {ctx.get('algorithm.algorithm_type')!r} trains no critic",
            allowed="0",
            hint="remove trainer.critic_warmup, or use algorithm_type: ppo",
        )
        return
    steps = ctx.get("trainer.total_steps") or ctx.get("buffer.total_steps")  # None: from the data's epochs
    if warmup and steps and warmup > steps:
        ctx.report(
            "warning",
            "trainer.critic_warmup",
            f"{warmup} steps of critic warm-up in a run of {steps} train steps: the actor is never updated",
            hint="lower trainer.critic_warmup",
        )


BALANCE = "trainer.balance_batch"
LATEST = "explorer.bench_on_latest_checkpoint"


@rule(reads=(BALANCE, "algorithm.policy_loss_fn"))
def balance_batch(ctx: Context) -> None:
    """trainer.balance_batch: true, written for a DPO stage, changes nothing: a pair's chosen and rejected rows must
    stay together (Trinity-RFT's DPO has can_balance_batch false and skips it silently)."""
    loss = POLICY_LOSSES.get(ctx.get("algorithm.policy_loss_fn"))
    if ctx.user_set(BALANCE) and ctx.get(BALANCE) and loss is not None and loss.batch == "pairs":
        why = "a DPO batch's chosen and rejected rows stay together, in order, as Trinity-RFT's DPO keeps them"
        ctx.report("note", BALANCE, f"changes nothing here: {why}", hint=f"remove {BALANCE}")


@rule(reads=(LATEST, "mode"))
def bench_on_latest(ctx: Context) -> None:
    """explorer.bench_on_latest_checkpoint: true is read in mode bench only; elsewhere a note says it changes
    nothing."""
    if ctx.user_set(LATEST) and ctx.get(LATEST) and not modes.mode(ctx.get("mode")).evaluates_checkpoints:
        ctx.report(
            "note",
            LATEST,
            f"changes nothing in mode {ctx.get('mode')!r}: only mode bench evaluates saved checkpoints",
            hint=f"remove {LATEST}, or run with mode=bench",
        )
