"""The data selectors a data set's `data_selector.selector_type` names, as data: which rows each one has a step read,
the feature columns it reads, its `kwargs` (upstream's names and defaults: Trinity-RFT's buffer/selector/selector.py
and difficulty_estimator.py) and the runtime class (trinity/runtime/data/selectors.py)."""

from dataclasses import dataclass

from pydantic import Field, NonNegativeFloat, PositiveInt

from .schema._base import Section

RUNTIME = "trinity.runtime.data.selectors:"


class NoKwargs(Section):
    """A selector that takes no kwargs."""


class DifficultyKwargs(Section):
    """difficulty_based's settings: its Beta estimate of each task's pass rate (InterpolationBetaPREstimator) and how a
    batch is drawn from it."""

    m: PositiveInt = Field(16, description="Rollouts one observed pass rate counts as.")
    lamb: float = Field(0.2, ge=0, le=1, description="How much of the past estimate each update forgets.")
    rho: float = Field(0.2, ge=0, le=1, description="Weight of the pass rate the features predict for unseen tasks.")
    adaptive_rho: bool = Field(False, description="Halve rho whenever the features' prediction is off by 0.25 or more.")
    do_sample: bool = Field(False, description="Score a draw from each task's Beta estimate, not its mean.")
    target_reward: float = Field(1.0, description="The pass rate the chosen tasks are nearest to.")
    tau: NonNegativeFloat = Field(1.0, description="Temperature of the draw; 0 takes the best-scored tasks.")


@dataclass(frozen=True)
class SelectorEntry:
    """One selector: what a step reads with it, how many feature columns it reads, its kwargs, its class."""

    name: str
    reads: str
    features: tuple[int, int]  # (fewest, most) feature_keys; (0, 0): none
    kwargs: type[Section]
    cls: str  # the class in trinity/runtime/data/selectors.py, built from (rows, DataSelectorConfig)
    seeded: bool = False  # whether `seed` changes what it reads

    @property
    def runtime(self) -> str:
        return RUNTIME + self.cls


_ENTRIES = (
    SelectorEntry("sequential", "the rows in order, from where the last step stopped", (0, 0), NoKwargs, "Sequential"),
    SelectorEntry(
        "shuffle", "a permutation of the rows per epoch, seeded by seed + epoch", (0, 0), NoKwargs, "Shuffle", True
    ),
    SelectorEntry(
        "random",
        "a draw of distinct rows per batch, seeded by seed + rows read so far (rows may repeat across batches)",
        (0, 0),
        NoKwargs,
        "Random",
        True,
    ),
    SelectorEntry(
        "offline_easy2hard",
        "the rows by their feature_keys' values, highest (easiest) first, in order from there",
        (1, 64),
        NoKwargs,
        "OfflineEasy2Hard",
    ),
    SelectorEntry(
        "difficulty_based",
        "the rows whose estimated pass rate is nearest target_reward: each task's estimate starts from its two "
        "feature_keys (a weaker and a stronger model's pass rates) and learns from the pass rates the explorer "
        "feeds back (data_processor.experience_pipeline operator pass_rate_calculator)",
        (2, 2),
        DifficultyKwargs,
        "DifficultyBased",
        True,
    ),
)
SELECTORS: dict[str, SelectorEntry] = {e.name: e for e in _ENTRIES}
