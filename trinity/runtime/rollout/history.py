"""The calls an engine's OpenAI endpoint answered, kept by session until their workflow takes them.

A workflow's client names its session in a header (`SESSION_HEADER`), and the sampling arguments its requests
default to in another (`SAMPLING_HEADER`); each choice of each call it makes is kept here
with the token ids the engine saw and produced and their log-probs, so the workflow trains on exactly what the model
did, whatever its agent code kept of the responses. Calls without a session are not kept.
"""

from collections import OrderedDict
from dataclasses import dataclass

SESSION_HEADER = "X-Trinity-Session"
# a session's default sampling arguments (rollout.samples.Sampling as JSON): its taskset's rollout_args
SAMPLING_HEADER = "X-Trinity-Sampling"
# sessions a crashed workflow never took (serve mode: calls never rewarded) are dropped, oldest first
MAX_SESSIONS = 65536


@dataclass(frozen=True)
class RecordedCall:
    """One choice of one endpoint call: what the model saw and generated, as token ids."""

    id: str  # the response's id (chatcmpl-..., cmpl-...); choices of one call share it
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]  # of each response token, under the distribution it was drawn from
    text: str
    weight_version: int
    finish_reason: str  # stop, length or tool_calls


class History:
    """Session -> the calls made in it, in the order they were answered."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, list[RecordedCall]] = OrderedDict()

    def record(self, session: str, calls: list[RecordedCall]) -> None:
        """Keep a call's choices under its session."""
        self._sessions.setdefault(session, []).extend(calls)
        self._sessions.move_to_end(session)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)

    def has(self, session: str) -> bool:
        """Whether calls of `session` wait here."""
        return session in self._sessions

    def take(self, session: str) -> list[RecordedCall]:
        """The session's calls, forgotten here."""
        return self._sessions.pop(session, [])
