"""The stage loops, one module each; every mode's entry (config/modes.py) names the loop that drives it, and
`loop(mode)` finds it here. A loop takes the set-up Stage and drives its roles to the stage's last step."""

from collections.abc import Callable
from typing import TYPE_CHECKING

from ....config.modes import Mode
from . import bench, both, explore, serve, train

if TYPE_CHECKING:
    from ..stage import Stage

Loop = Callable[["Stage"], None]
# loop name (Mode.loop) -> the loop
LOOPS: dict[str, Loop] = {
    "both": both.run,
    "explore": explore.run,
    "train": train.run,
    "bench": bench.run,
    "serve": serve.run,
}


def loop(mode: Mode) -> Loop:
    """The loop mode `mode` names; a ValueError naming the loops there are."""
    if mode.loop not in LOOPS:
        raise ValueError(f"mode {mode.name!r} names loop {mode.loop!r}, which is none of {', '.join(LOOPS)}")
    return LOOPS[mode.loop]
