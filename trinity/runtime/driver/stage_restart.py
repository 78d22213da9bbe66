"""A stage that restarts itself (issue 49): when a trainer rank or the buffer dies, the driver ends the stage's actors
and runs the stage again from its last complete checkpoint, as `trinity run` with continue_from_checkpoint would
(the trainer's state, the buffer rewound to that step, the engines given the checkpoint's weights), while the run's
restart budget (restarts.py) has one left.

Which failures restart it: a death (a signal, an exit code, the kernel's OOM killer) of a trainer rank or the buffer,
and an error of theirs that says a device or a collective failed under them (a CUDA or NPU fault, a gloo / NCCL /
HCCL error, a lost connection): what a new process on a fresh start may well not meet again. An error a role raised
of its own (a ValueError of a reward, a TimeoutError of a buffer that waited too long, a device's out-of-memory on the
same batch sizes, a ConfigError) comes back on the same step: restarting would spend the budget and end the same way,
so it ends the run at once. A rollout engine, an auxiliary model's engine or the explorer that dies where the stage
does not replace it in place (replace.py: colocate, an engine spanning nodes, an auxiliary engine, a replacement
that failed) restarts a stage that trains too; their errors, and a death not replaced in a stage that does not
train (which writes no checkpoint to go on from), end the run as before.

The decision is made on the blame's records (blame.Failure), without Ray, so that it is tested on values made by hand.
"""

import re
import sys
from dataclasses import dataclass

from ...config import modes
from ...config.schema import RunConfig
from ...launch.roles import AUXILIARY, BUFFER, EXPLORER, ROLLOUT, TRAINER
from ..records.metrics import MetricsLog
from ..records.progress import restart_line
from .blame import PEER_LOST, Failure
from .restarts import RestartBudget
from .watcher import RoleFailed

RESTARTS_STAGE = (TRAINER, BUFFER)  # the roles whose crash restarts the stage
# the roles whose death restarts a stage that trains where it is not replaced in place (replace.py)
RESTARTS_STAGE_WHEN_DEAD = (ROLLOUT, AUXILIARY, EXPLORER)
RESTART = "restart"  # the metrics line of a restart
# what an error says when the device or the collective failed under it, not the role's own code: a fresh process may
# not meet it again (a device-side assert is left out: a bad index asserts again on the same batch)
DEVICE_FAULT = re.compile(
    "|".join(
        (
            r"CUDA error(?!: device-side assert)",
            r"\bcuda\w*Error",
            r"\bECC\b",
            r"\bXid\b",
            r"NPU function error",
            r"\bACL (?:error|stream)",
            r"Dist(?:Backend|Network|Store)Error",
            r"device (?:lost|unavailable|not ready)",
        )
    ),
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Verdict:
    """Whether a failure restarts its stage; `why` it does not, where the stage's own role failed (shown the user)."""

    restart: bool
    why: str = ""


def verdict(cause: Failure | None, roles: dict[str, str], trains: bool = True) -> Verdict:
    """Whether `cause` (the failure blame put first; None: one that is no role's, a misplaced actor) restarts the
    stage; `roles`: the stage's actor names -> their role (launch/roles.py); `trains`: the stage's mode trains."""
    role = roles.get(cause.role or "") if cause else None
    if cause is not None and cause.died and role in RESTARTS_STAGE_WHEN_DEAD:
        return Verdict(trains)
    if cause is None or role not in RESTARTS_STAGE:
        return Verdict(False)
    if cause.died or PEER_LOST.search(cause.how) or DEVICE_FAULT.search(cause.how):
        return Verdict(True)
    why = (
        f"{cause.role} raised an error of its own ({cause.how.partition(':')[0]}), not a crash: the same step would "
        "raise it again"
    )
    return Verdict(False, why)


@dataclass
class StageRestarts:
    """The restarts of one stage, asked of the run's `budget`; each granted one recorded in `metrics` and on stderr."""

    budget: RestartBudget
    metrics: MetricsLog
    stage: str | None  # its name in the records (None: a run of one stage)
    shown: str  # its name as the user reads it
    trains: bool = True  # the stage's mode trains (writes the checkpoints a restart goes on from)
    count: int = 0  # restarts of this stage granted

    @classmethod
    def of(cls, budget: RestartBudget, metrics: MetricsLog, name: str | None, config: RunConfig) -> "StageRestarts":
        """The restarts of stage `name` (None: a run of one stage), which runs `config`."""
        return cls(budget, metrics, name, name or "run", modes.mode(config.mode).trains)

    def after(self, failed: RoleFailed, roles: dict[str, str], step: int, resume: str | None) -> RoleFailed | None:
        """A restart of the stage after `failed` at global step `step`, from checkpoint `resume` (None: the stage's
        start), recorded; None when it restarts, else the failure that ends the run (saying why it was not
        restarted, where the stage's own role failed)."""
        if failed.not_restarted:  # a replacement the spent budget refused, which says so (replace.py grant)
            return failed
        cause = failed.failures[0] if failed.failures else None
        judged = verdict(cause, roles, self.trains)
        if not judged.restart:
            return failed.refused(judged.why) if judged.why and self.budget.most else failed
        granted = self.budget.grant(cause.role, cause.headline, step)
        if granted is None:
            return (
                failed.refused(f"the restart budget is spent ({self.budget.spent()})") if self.budget.most else failed
            )
        self.count += 1
        attempt = sum(1 for r in self.budget.restarts if granted.at_s - r.at_s < self.budget.window_s)  # k of most
        values = {"cause_role": cause.role, "cause": cause.headline, "attempt": attempt, "from_checkpoint": resume}
        self.metrics.event(RESTART, step, self.stage, cause.headline, **values, max_restarts=self.budget.most)
        line = restart_line(self.shown, resume, cause.headline, attempt, self.budget.most)
        print(("\r\033[K" if sys.stderr.isatty() else "") + line, file=sys.stderr, flush=True)
        return None
