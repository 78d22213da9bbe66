"""trinity's engines in verl's registry, from which verl builds a rank's actor, reference, teacher and critic: its
FSDP engines (every device, both backends) with what trinity adds to them, set for the run; verl's batch selection,
where it would select the whole batch, skipped (whole_batch.py); its log-probs without its row-by-row fallback
(log_probs.py); and its losses reading the responses' values without a loop over rows (repadding.py)."""

import logging

from verl.workers.engine import EngineRegistry
from verl.workers.engine.fsdp import transformer_impl

from ...config.schema import RunConfig
from ...config.unsharded import trains_unsharded
from . import log_probs, repadding, whole_batch
from .one_rank import Unsharded
from .response_logits import ResponseLogitsEngine


class PolicyEngine(Unsharded, ResponseLogitsEngine):
    """The language model's: the responses' logits alone where a batch asks (response_logits.py), unsharded where
    the run's trainer trains so (one_rank.py)."""


class ValueEngine(Unsharded, transformer_impl.FSDPEngineWithValueHead):
    """A critic's: unsharded where the run's trainer trains so."""


OURS = {transformer_impl.FSDPEngineWithLMHead: PolicyEngine, transformer_impl.FSDPEngineWithValueHead: ValueEngine}


def install(config: RunConfig, log: logging.Logger) -> None:
    """Put trinity's engines where verl's registry holds its own, set for `config`'s run, with verl's batching
    skipped where it would select the whole batch (whole_batch.py), its log-probs a block of rows per call
    (log_probs.py) and its losses' responses read in one gather (repadding.py)."""
    whole_batch.install()
    log_probs.install()
    repadding.install()
    Unsharded.enabled = trains_unsharded(config)
    if Unsharded.enabled:
        log.info("the trained models are unsharded: one trainer rank computing in their weights' dtype, without FSDP2")
    for backends in EngineRegistry._engines.values():  # model type -> backend -> device -> engine class
        for devices in backends.values():
            for device, engine in devices.items():
                devices[device] = OURS.get(engine, engine)
