"""What an engine is asked and what it answers: a request's sampling arguments and one generated response. Their own
module: the engines (base.py and its kinds), their OpenAI endpoint (openai_api.py), the explorer and the gatherer
all speak them, and none of those needs the others to."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    """Sampling arguments of one request (a taskset's rollout_args)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 16
    min_tokens: int = 0
    repetition_penalty: float = 1.0  # on tokens already in the prompt or response; 1.0 is none
    logprobs: int = 0  # the k most likely tokens' log-probs per response token, beside the sampled one's (0: none)


@dataclass(frozen=True)
class Sample:
    """One generated response: its tokens, their log-probs under the sampling temperature, its text."""

    response_ids: list[int]
    logprobs: list[float]
    text: str
    stopped: bool  # it ended itself (an end-of-sequence or stop token), not at its token budget
    # with Sampling.logprobs k > 0: per response token, the k most likely tokens -> their log-probs, most likely
    # first, from the distribution the token was drawn from (as `logprobs`); None: not asked for
    top_logprobs: list[dict[int, float]] | None = None
