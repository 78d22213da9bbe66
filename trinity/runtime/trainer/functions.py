"""The algorithm entries' functions, found in verl's own registries by the names the entries carry.

`trinity.config.algorithms` says, per advantage function and policy loss, which verl estimator or
loss mode computes it. Here the trainer looks them up (`get_adv_estimator_fn`, `get_policy_loss_fn`),
after importing the trinity module an entry names, which registers a function verl lacks beside
verl's own (`register_advantage`, `register_loss`: verl's decorators, made safe to run twice and
refusing to replace a function someone else registered under the name).
"""

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...config.algorithms import ADVANTAGES, CONFIG, POLICY_LOSSES, Advantage, PolicyLoss
from ...config.schema.algorithm import AlgorithmConfig
from ..experience import Experience
from . import batch as batches


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


def register_advantage(name: str) -> Callable[[Callable], Callable]:
    """Register an advantage estimator of trinity's with verl's `register_adv_est`, beside verl's own.

    Idempotent: the same function registered again (a re-import) replaces its earlier self; a name that
    verl, or another module, already registered is refused.
    """
    from verl.trainer.ppo import core_algos

    def decorator(fn: Callable) -> Callable:
        if _taken(core_algos.ADV_ESTIMATOR_REGISTRY, name, fn, "advantage estimator"):
            del core_algos.ADV_ESTIMATOR_REGISTRY[name]  # verl's decorator refuses any name registered before
        return core_algos.register_adv_est(name)(fn)

    return decorator


def register_loss(name: str) -> Callable[[Callable], Callable]:
    """Register a policy loss of trinity's with verl's `register_policy_loss`, so verl's actor calls it by
    loss_mode. verl's decorator silently replaces; this one refuses a name already taken by another function."""
    from verl.trainer.ppo import core_algos

    def decorator(fn: Callable) -> Callable:
        _taken(core_algos.POLICY_LOSS_REGISTRY, name, fn, "policy loss")
        return core_algos.register_policy_loss(name)(fn)

    return decorator


def estimator(advantage_fn: str) -> Callable | None:
    """verl's registered estimator for our advantage function (None where it computes no advantages)."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    entry = ADVANTAGES[advantage_fn]
    if entry.estimator is None:
        return None
    _load(entry)
    return get_adv_estimator_fn(entry.estimator)


def loss_mode(policy_loss_fn: str) -> str | None:
    """verl's loss mode for our policy loss, checked to be in verl's registry (None for an SFT loss)."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    entry = POLICY_LOSSES[policy_loss_fn]
    if entry.loss_mode is None:
        return None
    _load(entry)
    get_policy_loss_fn(entry.loss_mode)  # raises, naming verl's modes, when it is not there
    return entry.loss_mode


def prepare(algorithm: AlgorithmConfig) -> None:
    """Register (by importing their modules) and look up the algorithm's functions: run in every trainer
    process before verl's actor calls a loss by its mode. A name verl lacks fails here, before training.
    (A loss and an advantage function that do not go together are refused at validate.)"""
    loss_mode(algorithm.policy_loss_fn)
    estimator(algorithm.advantage_fn)


def _load(entry: Advantage | PolicyLoss) -> None:
    if entry.module:
        importlib.import_module(entry.module)


# What the trainer's batch gives an estimator, by the name of the estimator's parameter.
INPUTS: dict[str, Callable[[list[Experience], torch.Tensor], Any]] = {
    "token_level_rewards": lambda exps, mask: batches.token_rewards(exps, mask),
    "response_mask": lambda exps, mask: mask.float(),
    "index": lambda exps, mask: np.array([e.group for e in exps], dtype=object),
}


def estimator_kwargs(fn: Callable, entry: Advantage, args: dict, exps: list[Experience]) -> dict[str, Any]:
    """The keywords `fn` is called with: the batch inputs its signature names, our arguments under its names,
    and verl's AlgoConfig (with the fields `entry` maps) where it takes a config."""
    params = inspect.signature(fn).parameters
    mask = batches.padded(exps, 0)["response_mask"]
    out = {name: make(exps, mask) for name, make in INPUTS.items() if name in params}
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


def advantages(exps: list[Experience], algorithm: AlgorithmConfig) -> list[list[float]] | None:
    """Each experience's per-token advantages (one per response token) from the estimator the algorithm's
    advantage_fn names, over the whole batch (group estimators compare the rollouts of each task); None
    when the advantage function computes none."""
    fn = estimator(algorithm.advantage_fn)
    if fn is None:
        return None
    kwargs = estimator_kwargs(fn, ADVANTAGES[algorithm.advantage_fn], algorithm.advantage_fn_args or {}, exps)
    scores, _ = fn(**kwargs)
    return [row[: len(e.response_ids)].tolist() for row, e in zip(scores, exps)]
