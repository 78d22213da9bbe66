"""The algorithm entries' functions, found in verl's own registries by the names the entries carry.

`trinity.config.algorithms` says, per advantage function and policy loss, which verl estimator or
loss mode computes it. Here the trainer looks them up (`get_adv_estimator_fn`, `get_policy_loss_fn`),
after importing the trinity module an entry names, which registers a function verl lacks beside
verl's own (`register_advantage`, `register_loss`: verl's decorators, made safe to run twice and
refusing to replace a function someone else registered under the name). A module registers each function by
its entry's key and the name in verl's registry is read from the entry, so it is written in the entry alone.
"""

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch

from ...config.algorithms.advantages import ADVANTAGES, CONFIG, Advantage
from ...config.algorithms.losses import POLICY_LOSSES, PolicyLoss
from ...config.algorithms.queries import kl_penalty_coef
from ...config.schema.algorithm import AlgorithmConfig
from ...utils.imports import import_path
from ..experience import Experience
from . import batch as batches
from .algos import _episodes


def _taken(registry: dict, name: str, fn: Callable, what: str) -> bool:
    """Whether `fn` (or its earlier self: its module imported again) already holds `name`; another holder is an
    error, as replacing verl's or another module's function under our name would change what it runs."""
    current = registry.get(name)
    if current is None or current is fn:
        return current is fn
    if (current.__module__, current.__qualname__) != (fn.__module__, fn.__qualname__):
        raise ValueError(
            f"{what} {name!r} is already registered with verl by {current.__module__}.{current.__qualname__}; "
            f"give {fn.__module__}.{fn.__qualname__} another name"
        )
    return True


def _registry_name(table: dict[str, Advantage | PolicyLoss], key: str, field: str) -> str:
    """The name in verl's registry of the function of entry `key` (its `field`): where a module registers it."""
    if key not in table:
        raise KeyError(f"{key!r} has no entry among {', '.join(table)} (trinity/config/algorithms)")
    name = getattr(table[key], field)
    if name is None:
        raise ValueError(f"entry {key!r} names no function in verl's registry: nothing to register")
    return name


def register_advantage(key: str) -> Callable[[Callable], Callable]:
    """Register the estimator of ADVANTAGES[key] with verl's `register_adv_est`, beside verl's own, under the name
    the entry carries.

    Idempotent: the same function registered again (a re-import) replaces its earlier self; a name that
    verl, or another module, already registered is refused.
    """
    from verl.trainer.ppo import core_algos

    name = _registry_name(ADVANTAGES, key, "estimator")

    def decorator(fn: Callable) -> Callable:
        if _taken(core_algos.ADV_ESTIMATOR_REGISTRY, name, fn, "advantage estimator"):
            del core_algos.ADV_ESTIMATOR_REGISTRY[name]  # verl's decorator refuses any name registered before
        return core_algos.register_adv_est(name)(fn)

    return decorator


def register_loss(key: str) -> Callable[[Callable], Callable]:
    """Register the policy loss of POLICY_LOSSES[key] with verl's `register_policy_loss` under its loss_mode, so verl's
    actor calls it by that mode. verl's decorator silently replaces; this one refuses a name already taken by another
    function."""
    from verl.trainer.ppo import core_algos

    name = _registry_name(POLICY_LOSSES, key, "loss_mode")

    def decorator(fn: Callable) -> Callable:
        _taken(core_algos.POLICY_LOSS_REGISTRY, name, fn, "policy loss")
        return core_algos.register_policy_loss(name)(fn)

    return decorator


# loss mode -> trinity's loss, before it is bound to a run's arguments (own_loss, bind_loss)
OWN_LOSSES: dict[str, Callable] = {}


def own_loss(key: str) -> Callable[[Callable], Callable]:
    """Declare the policy loss of POLICY_LOSSES[key], one of trinity's that takes arguments: `fn(log_prob,
    old_log_prob, advantages, response_mask, agg, **args)`, where `agg(values, mode=None)` aggregates a per-token
    matrix as verl does over the whole batch (by the run's loss_agg_mode, or `mode`). `bind_loss` registers it with
    verl per run, under the entry's loss_mode."""
    name = _registry_name(POLICY_LOSSES, key, "loss_mode")

    def decorator(fn: Callable) -> Callable:
        OWN_LOSSES[name] = fn
        return fn

    return decorator


class BoundLoss:
    """An own loss bound to a run's arguments, in verl's policy-loss signature (what verl's ppo_loss calls)."""

    def __init__(self, name: str, fn: Callable, args: dict[str, Any]) -> None:
        self.name, self.fn, self.args = name, fn, args
        self.__name__ = fn.__name__

    def __call__(
        self,
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode="token-mean",
        config=None,
        rollout_is_weights=None,
    ):
        from verl.trainer.ppo.core_algos import agg_loss

        if rollout_is_weights is not None:
            raise ValueError(f"trinity's {self.name} takes no rollout importance weights (verl's rollout correction)")
        info = dict(config.global_batch_info) if config is not None else {}

        def agg(values, mode=None):
            return agg_loss(loss_mat=values, loss_mask=response_mask, loss_agg_mode=mode or loss_agg_mode, **info)

        return self.fn(log_prob, old_log_prob, advantages, response_mask, agg, **self.args)


def bind_loss(name: str, args: dict[str, Any]) -> BoundLoss:
    """Register trinity's loss `name` in verl's policy-loss registry bound to `args` (replacing an earlier binding of
    ours, never a function of verl's or anyone else's)."""
    from verl.trainer.ppo import core_algos

    current = core_algos.POLICY_LOSS_REGISTRY.get(name)
    if current is not None and not (isinstance(current, BoundLoss) and current.name == name):
        raise ValueError(f"policy loss {name!r} is already registered with verl by {current!r}")
    bound = BoundLoss(name, OWN_LOSSES[name], {k: v for k, v in args.items() if k != "loss_agg_mode"})
    core_algos.POLICY_LOSS_REGISTRY[name] = bound
    return bound


def estimator(advantage_fn: str) -> Callable | None:
    """verl's registered estimator for our advantage function (None where it computes no advantages)."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    entry = ADVANTAGES[advantage_fn]
    if entry.estimator is None:
        return None
    _load(entry)
    return get_adv_estimator_fn(entry.estimator)


def loss_mode(policy_loss_fn: str, args: dict[str, Any] | None = None) -> str | None:
    """verl's loss mode for our policy loss, checked to be in verl's registry (None for an SFT loss); a loss of
    trinity's own is registered there bound to `args` (the run's policy_loss_fn_args) first."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    entry = POLICY_LOSSES[policy_loss_fn]
    if entry.loss_mode is None:
        return None
    _load(entry)
    if entry.loss_mode in OWN_LOSSES:
        bind_loss(entry.loss_mode, args or {})
    get_policy_loss_fn(entry.loss_mode)  # raises, naming verl's modes, when it is not there
    return entry.loss_mode


def actor_loss(algorithm: AlgorithmConfig, config: Any, step: int, info: dict) -> Callable | None:
    """The trinity function that replaces verl's whole actor loss for this step (None where verl's own runs), bound
    to verl's actor `config`, the run's policy_loss_fn_args, the step and the batch's global counts `info`."""
    entry = POLICY_LOSSES[algorithm.policy_loss_fn]
    if entry.actor_loss is None:
        return None
    fn = import_path(f"{entry.module}:{entry.actor_loss}", f"policy loss {algorithm.policy_loss_fn!r}'s actor loss")
    return partial(fn, config=config, args=algorithm.policy_loss_fn_args or {}, step=step, info=info)


def prepare(algorithm: AlgorithmConfig) -> None:
    """Register (by importing their modules, binding the run's arguments) and look up the algorithm's functions: run
    in every trainer process before verl's actor calls a loss by its mode. A name verl lacks fails here, before
    training. (A loss and an advantage function that do not go together, and a batch-masked loss without the
    rollout's own log-probs, are refused at validate: derive/algorithm.py, derive/buffer.py batch_masked_loss.)"""
    loss_mode(algorithm.policy_loss_fn, algorithm.policy_loss_fn_args)
    estimator(algorithm.advantage_fn)
    token_mask(algorithm.advantage_fn)


def token_mask(advantage_fn: str) -> Callable | None:
    """The function of the advantage's module that takes tokens out of the loss after the advantages (ADVANTAGES'
    token_mask: Clip_B's); None where the advantage function takes none."""
    entry = ADVANTAGES[advantage_fn]
    if entry.token_mask is None:
        return None
    return import_path(f"{entry.module}:{entry.token_mask}", f"advantage function {advantage_fn!r}'s token mask")


def _load(entry: Advantage | PolicyLoss) -> None:
    if entry.module:  # importing it registers its functions with verl
        import_path(entry.module, "the module of trinity's own algorithm functions")


# Per-token columns an estimator may read besides the rewards, as the trainer's batch hands them over whole (each a
# row per experience; None where the run has none: a critic's values, the old policy's and a teacher's log-probs).
COLUMNS = ("values", "old_log_probs", "teacher_log_probs")


def _column(name: str) -> Callable[[list[Experience], torch.Tensor, dict], Any]:
    def make(exps: list[Experience], mask: torch.Tensor, extra: dict) -> Any:
        return None if extra.get(name) is None else batches.per_token(extra[name], mask.shape[1])

    return make


# What the trainer's batch gives an estimator, by the name of the estimator's parameter: from the experiences, the
# response mask and the batch's `extra` columns (per-token KL penalties and COLUMNS; an estimator that needs one the
# run lacks is told so).
INPUTS: dict[str, Callable[[list[Experience], torch.Tensor, dict], Any]] = {
    "token_level_rewards": lambda exps, mask, extra: batches.token_rewards(exps, mask, extra.get("penalties")),
    "response_mask": lambda exps, mask, extra: mask.float(),
    "index": lambda exps, mask, extra: np.array([e.group for e in exps], dtype=object),
    # the step-wise estimators': the batch's episodes and their turns (algos/_episodes.py)
    "episodes": lambda exps, mask, extra: _episodes.of(exps),
    # ReMax: each rollout's greedy baseline (the explorer makes them only for an advantage that reads them)
    "reward_baselines": lambda exps, mask, extra: (
        None if any(e.baseline is None for e in exps) else torch.tensor([e.baseline for e in exps])
    ),
    **{name: _column(name) for name in COLUMNS},
}


def estimator_kwargs(
    fn: Callable, entry: Advantage, args: dict, exps: list[Experience], **extra: Any
) -> dict[str, Any]:
    """The keywords `fn` is called with: the batch inputs its signature names, our arguments under its names,
    and verl's AlgoConfig (with the fields `entry` maps) where it takes a config."""
    params = inspect.signature(fn).parameters
    mask = batches.response_mask(exps)
    made = {name: make(exps, mask, extra) for name, make in INPUTS.items() if name in params}
    out = {name: value for name, value in made.items() if value is not None}
    config_fields = {}
    for ours, theirs in entry.kwargs.items():
        if ours not in args:
            continue
        if theirs.startswith(CONFIG):
            config_fields[theirs.removeprefix(CONFIG)] = args[ours]
        elif theirs in params:
            out[theirs] = args[ours]
        else:
            raise TypeError(f"verl's {fn.__name__} takes no argument {theirs!r} (mapped from {ours!r})")
    if "config" in params:
        from verl.trainer.config import AlgoConfig

        out["config"] = AlgoConfig(**config_fields)
    elif config_fields:
        raise TypeError(f"verl's {fn.__name__} takes no config for {sorted(config_fields)}")
    missing = [
        name
        for name, p in params.items()
        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name not in out
    ]
    if missing:
        raise TypeError(f"verl's {fn.__name__} needs {missing}, which trinity's batch does not provide")
    return out


def advantages_and_returns(
    exps: list[Experience], algorithm: AlgorithmConfig, penalties: list | None = None, **columns: list | None
) -> tuple[list[list[float]] | None, list[list[float]] | None]:
    """Each experience's per-token advantages and returns (one per response token) from the estimator the
    algorithm's advantage_fn names, over the whole batch (group estimators compare the rollouts of each task), from
    its reward less its per-token KL `penalties` and the per-token `columns` it reads (COLUMNS: a critic's values
    for GAE, the old policy's and a teacher's log-probs for distillation); (None, None) when it computes none."""
    fn = estimator(algorithm.advantage_fn)
    if fn is None:
        return None, None
    args = algorithm.advantage_fn_args or {}
    kwargs = estimator_kwargs(fn, ADVANTAGES[algorithm.advantage_fn], args, exps, penalties=penalties, **columns)
    scores, returns = fn(**kwargs)
    return rows(scores, exps), rows(returns, exps)


def batch_advantages(
    exps: list[Experience], algorithm: AlgorithmConfig, columns: dict[str, list | None]
) -> tuple[list | None, list | None, dict]:
    """Rank 0's advantages and returns of the whole batch, one row per experience, and their metrics: over its
    rollouts only (mixed-in SFT samples get zeros), from the rewards less kl_coef x the `kl` column (a KL penalty),
    with the other per-token `columns` the estimator reads (COLUMNS). Metrics: the mean penalised KL, and with a
    teacher the student's mean per-token log-prob gap to it (the sampled reverse KL distillation drives down)."""
    rollouts = [i for i, e in enumerate(exps) if not e.expert]
    columns = {name: None if rows is None else [rows[i] for i in rollouts] for name, rows in columns.items()}
    kl, penalties, metrics = columns.pop("kl", None), None, {}
    if kl is not None:
        coef = kl_penalty_coef(algorithm)
        masks = [exps[i].mask() for i in rollouts]  # the environment's turns in an episode are not the policy's
        kl = [[v * m for v, m in zip(row, mask)] for row, mask in zip(kl, masks)]
        penalties = [[coef * v for v in row] for row in kl]
        metrics["kl_penalty"] = _token_mean(kl, masks)
    if columns.get("teacher_log_probs") is not None:
        gaps = [[s - t for s, t in zip(*pair)] for pair in zip(columns["old_log_probs"], columns["teacher_log_probs"])]
        metrics["teacher_kl"] = _token_mean(gaps, [exps[i].mask() for i in rollouts])
    advantages = returns = []  # a batch of mixed-in samples alone (sampling dropped every rollout)
    if rollouts:
        advantages, returns = advantages_and_returns([exps[i] for i in rollouts], algorithm, penalties, **columns)
    return batches.scatter_rows(advantages, rollouts, exps), batches.scatter_rows(returns, rollouts, exps), metrics


def _token_mean(rows: list[list[float]], masks: list[list[int]]) -> float:
    """The mean over the model's own tokens (mask 1)."""
    total = sum(v * m for row, mask in zip(rows, masks) for v, m in zip(row, mask))
    return total / max(1, sum(map(sum, masks)))


def rows(matrix: torch.Tensor, exps: list[Experience]) -> list[list[float]]:
    """Each experience's row of a padded per-token matrix, its response tokens only."""
    return [row[: len(e.response_ids)] for row, e in zip(matrix.tolist(), exps)]  # one conversion, then slices
