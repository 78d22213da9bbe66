"""An experience: one rollout's tokens, their log-probs, its reward, and the weights that made it.

A multi-turn rollout is one experience too: its response holds every turn after the first prompt, the model's own
tokens and what the environment or a tool said between them, as the token ids the model saw; `action_mask` tells the
two apart, and only the model's tokens are trained."""

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
    # per response token: 1 on the model's own, 0 on what the environment put between its turns (None: all the model's)
    action_mask: list[int] | None = None
    truncated: bool = False  # the conversation reached max_model_len and was cut there

    def __post_init__(self) -> None:
        if self.action_mask is not None and len(self.action_mask) != len(self.response_ids):
            raise ValueError(
                f"an experience's action_mask has {len(self.action_mask)} entries for {len(self.response_ids)} "
                "response tokens"
            )

    def mask(self) -> list[int]:
        """1 on each response token the model produced (the ones trained), 0 on the environment's."""
        return list(self.action_mask) if self.action_mask is not None else [1] * len(self.response_ids)

    def to_json(self) -> str:
        """One line of JSON."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "Experience":
        """The inverse of to_json."""
        return cls(**json.loads(text))
