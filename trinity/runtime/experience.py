"""An experience: one rollout's tokens, their log-probs, its reward, and the weights that made it."""

import json
from dataclasses import asdict, dataclass, field


@dataclass
class Experience:
    """What the explorer writes and the trainer consumes exactly once."""

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float] = field(default_factory=list)  # one per response token, from the rollout engine
    reward: float = 0.0
    group: str = ""  # the task it answers: GRPO normalises rewards within a group
    weight_version: int = 0  # the trainer step whose weights generated it (0: the initial model)
    step: int = 0  # the explore step that made it
    metrics: dict[str, float] = field(default_factory=dict)  # e.g. accuracy, for evaluation
    expert: bool = False  # a sample of an SFT data set mixed into an RL batch (sample strategy mix), not a rollout
    baseline: float | None = None  # ReMax: the reward of its task's greedy rollout (None: not made)

    def to_json(self) -> str:
        """One line of JSON."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "Experience":
        """The inverse of to_json."""
        return cls(**json.loads(text))
