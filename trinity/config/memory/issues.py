"""A memory plan as config issues: 'does not fit' is an error, 'tight' a warning, 'not checked' a note."""

from collections.abc import Callable

from ...errors import Issue
from .checks import TIGHT, Check, Knob
from .estimate import GIB
from .plan import MemoryPlan

Locate = Callable[[str], str]  # dotted key -> where its value was written


# What a role that does not fit becomes with ignore_validator_suggestions (Trinity-RFT's switch that turns its GPU
# memory check off, common/config_validator.py: GPUMemoryValidator): the check still runs, and says so.
ADVISORY = (
    " (a warning, not an error: ignore_validator_suggestions is set; the run starts and may run out of device memory)"
)


def plan_issues(plan: MemoryPlan, locate: Locate, advisory: bool = False) -> list[Issue]:
    """One issue per check that is not comfortable and per part that was not checked; `advisory`
    (ignore_validator_suggestions): a role that does not fit is a warning that says why."""
    issues = [_issue(check, plan.hardware, locate, advisory) for check in plan.checks if check.status != "fits"]
    issues += [
        Issue(u.reason, key=u.key, source=u.source or locate(u.key), hint=u.hint, severity="note")
        for u in plan.unchecked
    ]
    return issues


def gib(size: int) -> str:
    """Bytes as GiB with one decimal."""
    return f"{size / GIB:.1f} GiB"


def _issue(check: Check, hardware: str, locate: Locate, advisory: bool) -> Issue:
    over = check.status == "does not fit"
    severity = "error" if over and check.hard and not advisory else "warning"
    if not check.hard:
        message = _queue_message(check)
    elif over:
        message = (
            f"{check.subject} does not fit on {hardware}: it needs {gib(check.need)} per device and gets "
            f"{gets(check)} ({check.share:.0%}); {_largest(check)}"
        )
    else:
        message = (
            f"{check.subject} is tight on {hardware}: it needs {gib(check.need)} per device and gets "
            f"{gets(check)} ({check.share:.0%}, over {TIGHT:.0%}); allocator fragmentation or longer "
            "sequences can push it over"
        )
    if over and check.hard and advisory:
        message += ADVISORY
    return Issue(
        message,
        key=check.key,
        source=locate(check.key),
        allowed=f"<= {gib(check.capacity)} per device",
        hint=_hint(check),
        severity=severity,
    )


def gets(check: Check) -> str:
    """What the check's device gives it, and how that comes about."""
    return gib(check.capacity) + (f" ({check.capacity_label})" if check.capacity_label else "")


def knob_text(knob: Knob) -> str:
    """'explorer.rollout_model.engine_num=2 (4 trainer devices, needs 47.9 GiB per device)'."""
    return f"{knob.change} ({(knob.effect + ', ') if knob.effect else ''}needs {gib(knob.need)} per device)"


def _largest(check: Check) -> str:
    items = sorted(check.estimate.items, key=lambda i: -i.bytes)[:3]
    return "largest: " + ", ".join(f"{i.label} {gib(i.bytes)}" for i in items)


def _queue_message(check: Check) -> str:
    (item,) = check.estimate.items
    return (
        f"{check.subject}: the {item.label} need {gib(check.need)}, more than {check.capacity_label}, "
        f"{gib(check.capacity)}; vLLM will queue the sequences that do not fit"
    )


def _hint(check: Check) -> str:
    if check.knobs:
        options = "; ".join(knob_text(k) for k in check.knobs)
        return f"it would fit with any of: {options}; see `trinity plan memory` for the breakdown"
    if not check.hard:
        return (
            "raise gpu_memory_utilization or tensor_parallel_size, or lower max_model_len, runner_per_model or "
            "repeat_times, if the queueing costs too much time"
        )
    return "no single change found that makes it fit; see `trinity plan memory` for the breakdown"
