"""The replay buffer's priority functions (`buffer.trainer_input.experience_buffer.replay_buffer.priority_fn`), as
data: each one's arguments (upstream's names and defaults, buffer/storage/queue.py: LinearDecayPriority,
LinearDecayUseCountControlPriority) and the runtime function that computes it (trinity/runtime/buffer/replay.py)."""

from dataclasses import dataclass

from pydantic import Field, NonNegativeFloat

from .schema._base import Section

RUNTIME = "trinity.runtime.buffer.replay:"


class LinearDecayArgs(Section):
    decay: float = Field(2.0, description="Priority lost each time a task's experiences are served.")


class DecayLimitArgs(LinearDecayArgs):
    use_count_limit: int = Field(3, description="Times a task's experiences are served at most (0: no limit).")
    sigma: NonNegativeFloat = Field(0.0, description="Standard deviation of the Gaussian noise added to a priority.")


@dataclass(frozen=True)
class PriorityEntry:
    """One priority function: what it computes, its arguments, the function."""

    name: str
    computes: str
    args: type[Section]
    runtime: str  # "module:function": (model version, uses, args, rng) -> (priority, whether it is queued)


_ENTRIES = (
    PriorityEntry(
        "linear_decay",
        "model_version - decay x use_count, always queued again",
        LinearDecayArgs,
        RUNTIME + "linear_decay",
    ),
    PriorityEntry(
        "decay_limit_randomization",
        "model_version - decay x use_count + N(0, sigma), queued again while used fewer than use_count_limit times",
        DecayLimitArgs,
        RUNTIME + "decay_limit_randomization",
    ),
)
PRIORITY_FUNCTIONS: dict[str, PriorityEntry] = {e.name: e for e in _ENTRIES}
