"""An experience: one rollout's tokens, their log-probs, its reward, and the weights that made it.

A multi-turn rollout is one experience too: its response holds every turn after the first prompt, the model's own
tokens and what the environment or a tool said between them, as the token ids the model saw; `action_mask` tells the
two apart, and only the model's tokens are trained. Each run of the model's tokens is one turn (a step, to a step-wise
advantage); a workflow may reward turns one by one (`turn_rewards`, which add up to `reward`). An episode recorded as
several experiences (an agent whose calls do not all continue one another) gives them one `episode` id. Where a task
set asks for top-k log-probs (rollout_args.logprobs), `top_logprobs` holds, beside each response token's own log-prob
(`logprobs`, what the trainer reads), the k most likely tokens of the distribution it was drawn from."""

import json
import math
from dataclasses import asdict, dataclass, field


def with_accuracy(reward: float, metrics: dict[str, float]) -> dict[str, float]:
    """A rollout's metrics, `accuracy` first: the workflow's own, else its reward (what evaluation reports)."""
    rest = {k: float(v) for k, v in metrics.items() if k != "accuracy"}
    return {"accuracy": float(metrics.get("accuracy", reward)), **rest}


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
    # the response was cut: the conversation reached max_model_len, or its last reply reached max_tokens without ending
    # (Trinity-RFT's truncate_status "response_truncated"; the explorer marks it from the engine's answer)
    truncated: bool = False
    episode: str = ""  # the episode it is part of, unique in the run ("": an episode of its own)
    # each turn's own reward, in order (None: the reward is the last turn's, as it is for a single turn)
    turn_rewards: list[float] | None = None
    run: int = 0  # which of its task's rollouts it is, 0 .. repeat_times - 1 (Trinity-RFT's eid.run)
    # per response token, the k most likely tokens -> their log-probs, most likely first ({} on the environment's
    # tokens); None: not asked for (rollout_args.logprobs 0), or not made by the engines through the model client
    top_logprobs: list[dict[int, float]] | None = None

    def __post_init__(self) -> None:
        for name in ("action_mask", "top_logprobs"):
            entries = getattr(self, name)
            if entries is not None and len(entries) != len(self.response_ids):
                raise ValueError(
                    f"an experience's {name} has {len(entries)} entries for {len(self.response_ids)} response tokens"
                )
        if self.turn_rewards is not None:
            self._check_turn_rewards()

    def _check_turn_rewards(self) -> None:
        turns = len(self.turns())
        if len(self.turn_rewards) != turns:
            raise ValueError(f"an experience has {len(self.turn_rewards)} turn_rewards for its {turns} turns")
        scale = max(1.0, sum(map(abs, self.turn_rewards)))  # the rounding of a sum grows with its terms
        if not math.isclose(sum(self.turn_rewards), self.reward, rel_tol=0.0, abs_tol=1e-9 * scale):
            raise ValueError(
                f"an experience's turn_rewards add up to {sum(self.turn_rewards)}, not its reward {self.reward}"
            )

    def turns(self) -> list[tuple[int, int]]:
        """The model's turns: each run of its own tokens in the response, as (start, end) positions."""
        spans: list[tuple[int, int]] = []
        for i, own in enumerate(self.mask()):
            if own and spans and spans[-1][1] == i:
                spans[-1] = (spans[-1][0], i + 1)
            elif own:
                spans.append((i, i + 1))
        return spans

    def rewards_by_turn(self, turns: list[tuple[int, int]] | None = None) -> list[float]:
        """Each turn's reward: `turn_rewards`, else the whole reward on the last turn (of `turns`, where the caller
        has them: `self.turns()`)."""
        if self.turn_rewards is not None:
            return list(self.turn_rewards)
        count = len(self.turns() if turns is None else turns)
        return [0.0] * (count - 1) + [self.reward] if count else []

    def mask(self) -> list[int]:
        """1 on each response token the model produced (the ones trained), 0 on the environment's."""
        return list(self.action_mask) if self.action_mask is not None else [1] * len(self.response_ids)

    def to_json(self, **before: object) -> str:
        """One line of JSON (led by the keys `before`, as a store marks a line: a reader can pick lines by prefix)."""
        return json.dumps(before | asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "Experience":
        """The inverse of to_json."""
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, fields: dict) -> "Experience":
        """An experience of its JSON's fields (JSON writes the token ids of top_logprobs as text)."""
        if fields.get("top_logprobs") is not None:
            fields["top_logprobs"] = [{int(t): lp for t, lp in top.items()} for top in fields["top_logprobs"]]
        return cls(**fields)
