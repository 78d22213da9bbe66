"""What the engines answered a task's workflow, kept to complete the experiences it returns.

A workflow builds its experiences from the engines' token ids and log-probs; what else an engine said of a reply (its
top-k log-probs, whether it stopped by itself) is kept here by the model client, under the context it continued (the
tokens the engine was given). An experience's every run of the model's tokens is then found again as the replies that
continued its prompt and response up to there: any workflow that keeps the engine's tokens as they came (every
built-in one, a conversation's turns included) gets them, and an experience whose tokens were not generated through
the model client (the OpenAI endpoint's recorded calls, a workflow's own) is left as it is.
"""

from dataclasses import replace
from typing import TYPE_CHECKING

from ..experience import Experience

if TYPE_CHECKING:
    from ..rollout.samples import Sample


class Replies:
    """Every reply the engines gave one task's workflow, by the context it continued."""

    def __init__(self) -> None:
        self.by_context: dict[tuple[int, ...], list[Sample]] = {}

    def add(self, context: list[int], samples: "list[Sample]") -> None:
        """The replies continuing `context` (a prompt, or a conversation so far)."""
        self.by_context.setdefault(tuple(context), []).extend(samples)

    def complete(self, exp: Experience) -> Experience:
        """`exp` with its replies' top-k log-probs (where asked for) and, where its last reply ended at its token
        budget, marked truncated; as it is where a run of its tokens was not found among the replies."""
        found = self._replies(exp)
        if found is None:
            return exp
        cut = bool(found) and not found[-1][1].stopped
        if not found or any(sample.top_logprobs is None for _, sample in found):  # none asked for
            return replace(exp, truncated=exp.truncated or cut)
        tops: list[dict[int, float]] = [{} for _ in exp.response_ids]  # none on the environment's tokens
        for start, sample in found:
            tops[start : start + len(sample.response_ids)] = sample.top_logprobs
        return replace(exp, top_logprobs=tops, truncated=exp.truncated or cut)

    def _replies(self, exp: Experience) -> "list[tuple[int, Sample]] | None":
        """(where it starts in the response, the reply) of each reply the model's tokens are made of, in order; None
        where some of them continue no context kept here."""
        found = []
        for start, end in exp.turns():
            at = start
            while at < end:
                sample = self._continuing(exp, at, end)
                if sample is None:
                    return None
                found.append((at, sample))
                at += len(sample.response_ids)
        return found

    def _continuing(self, exp: Experience, at: int, end: int) -> "Sample | None":
        """The longest reply to the context before response token `at` whose tokens are the response's from `at`
        (within the model's run ending at `end`)."""
        context = tuple(exp.prompt_ids) + tuple(exp.response_ids[:at])
        fitting = [
            s
            for s in self.by_context.get(context, ())
            if s.response_ids
            and at + len(s.response_ids) <= end
            and exp.response_ids[at : at + len(s.response_ids)] == s.response_ids
        ]
        return max(fitting, key=lambda s: len(s.response_ids), default=None)
