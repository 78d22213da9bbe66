"""trainer.enable_preview: each train step's representative rollouts, as Trinity-RFT's `representative_sample`
(algorithm/sample_strategy/utils.py) picks them: the lowest- and the highest-reward rollout of the batch, with their
prompt and response decoded; a batch without rollouts (SFT) shows one of its samples, without a reward. The driver
shows them in the monitor every synchronizer.sync_interval steps (records/metrics.py: MetricsLog.table)."""

import random
from typing import Any

from ..experience import Experience


def representative(exps: list[Experience], tokenizer: Any, step: int, rollouts: bool = True) -> list[dict]:
    """The rows a step previews: prompt, response and reward of its lowest- and highest-reward rollout (an SFT
    sample mixed in is no rollout); a batch of no `rollouts` (SFT, DPO: no reward), one of its samples, drawn by the
    step."""
    rewarded = [e for e in exps if not e.expert] if rollouts else []
    if not rewarded:
        return [_row(random.Random(step).choice(exps), tokenizer)] if exps else []
    lowest, highest = min(rewarded, key=lambda e: e.reward), max(rewarded, key=lambda e: e.reward)
    return [_row(e, tokenizer) | {"reward": e.reward} for e in (lowest, highest)]


def _row(exp: Experience, tokenizer: Any) -> dict:
    return {"prompt": tokenizer.decode(exp.prompt_ids), "response": tokenizer.decode(exp.response_ids)}
