"""The sample strategies: how the trainer takes each batch from the buffer."""

from dataclasses import dataclass
from math import ceil

from ..schema import RunConfig
from ..schema._base import Section
from .args import MixSampleArgs, NoArgs, StalenessArgs


@dataclass(frozen=True)
class SampleStrategy:
    """How the trainer takes each batch from the buffer."""

    args: type[Section]
    drops_stale: bool = False  # drops experiences older than max_staleness train steps (StalenessArgs)
    mixes: bool = False  # fills part of each batch from an SFT data set (MixSampleArgs)
    same_as: str | None = None  # a deprecated name of another strategy, which it is


SAMPLE_STRATEGIES: dict[str, SampleStrategy] = {
    "default": SampleStrategy(NoArgs),  # experiences in the order they arrive
    "warmup": SampleStrategy(NoArgs, same_as="default"),  # deprecated upstream, kept for its old configs
    "staleness_control": SampleStrategy(StalenessArgs, drops_stale=True),
    "mix": SampleStrategy(MixSampleArgs, mixes=True),
}


def batch_split(config: RunConfig) -> tuple[int, int]:
    """Rollouts and SFT samples per train batch (Trinity-RFT's split of mix: the samples rounded up)."""
    algorithm, total = config.algorithm, config.buffer.train_batch_size
    ratio = (algorithm.sample_strategy_args or {}).get("expert_data_ratio", 0.0)
    samples = ceil(ratio * total) if SAMPLE_STRATEGIES[algorithm.sample_strategy].mixes else 0
    return total - samples, samples
