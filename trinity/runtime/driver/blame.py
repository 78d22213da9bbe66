"""Which of a stage's failures is the cause and which are its consequences: one role dies or raises, and its peers
fail because of it (a trainer rank's collective finds its connection to a killed engine closed). The watcher
(watcher.py) collects every failure of a short settling time after the first one it sees, as Failure records; this
module orders them and words them, without Ray, so that the order is tested on records made by hand.

The order: a process that died (a signal, an exit code) comes before a role that raised, and a role that raised an error
of its own before one whose error says it lost a peer (a connection closed or reset, a broken pipe, a collective
library's error, an actor that died under it); within each, the earlier first (a death's time as its process's
sentinel wrote it, roles/sentinel.py, else when the driver saw it). One record per role: its first in that order.
"""

import re
from dataclasses import dataclass

DIED, RAISED, LOST_PEER = 0, 1, 2  # the ranks of a failure, first to last
# what an error says when it failed because another process went away: a consequence, never the cause
PEER_LOST = re.compile(
    "|".join(
        (
            r"connection ?(?:was )?(?:closed|reset|refused|aborted)",
            r"closed by (?:the )?peer",
            r"broken ?pipe",
            r"connect(?:ion)? ?error",
            r"\bEOF",
            r"server disconnected",
            r"remote ?protocol ?error",
            r"\bgloo\b",
            r"\bnccl",
            r"\bhccl",
            r"the actor died",
            r"actor ?died ?error",
            r"ray ?actor ?error",
            r"actor is unavailable",
        )
    ),
    re.IGNORECASE,
)
MORE_LINES = 8  # of the cause's own lines (its error's, its log's end), shown under it


@dataclass(frozen=True)
class Failure:
    """One role's failure: it died (its process ended) or it raised. `how`: the signal or exit code of a death, the
    error of a raise; `at`: when it happened (seconds since the epoch), as near as known; `more`: the lines shown under
    it when it is the cause (its error's further lines, its log's end, where its log is); `log`: where its log is."""

    role: str | None  # None: the error came from no actor of the stage
    died: bool
    how: str
    at: float
    more: tuple[str, ...] = ()
    log: str | None = None

    @property
    def headline(self) -> str:
        """`<role> died: <how>` or `<role> failed: <error>`."""
        return f"{self.role or 'a role'} {'died' if self.died else 'failed'}: {self.how}"

    @property
    def rank(self) -> int:
        if self.died:
            return DIED
        return LOST_PEER if PEER_LOST.search(self.how) else RAISED


def ordered(failures: list[Failure]) -> list[Failure]:
    """`failures`, the cause first and its consequences after it, one per role (an unnamed role's: one per error)."""
    found: dict[str, Failure] = {}
    for failure in sorted(failures, key=lambda f: (f.rank, f.at)):
        found.setdefault(failure.role or failure.headline, failure)
    return list(found.values())


def message(failures: list[Failure]) -> str:
    """What the user reads: the cause's headline and its lines, then each consequence's headline ("then: ...") and
    where its log is."""
    cause, *then = ordered(failures)
    lines = [cause.headline, *cause.more[:MORE_LINES]]
    for failure in then:
        lines.append(f"then: {failure.headline}")
        lines += [f"  log: {failure.log}"] if failure.log else []
    return "\n".join(lines)


def record(failures: list[Failure]) -> dict:
    """The failure as the run's records keep it (metrics.jsonl, `trinity run --format json`): the cause, the role that
    caused it and how, and each consequence's headline, in the order `message` shows them."""
    cause, *then = ordered(failures)
    return {
        "cause": cause.headline,
        "cause_role": cause.role,
        "died": cause.died,
        "how": cause.how,
        "then": [f.headline for f in then],
    }
