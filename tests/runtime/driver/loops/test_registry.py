"""Every mode of the modes table has its loop, found by the name its entry gives; every loop drives some mode."""

import dataclasses

import pytest

from trinity.config.modes import MODES
from trinity.runtime.driver import loops


@pytest.mark.parametrize("name", sorted(MODES))
def test_every_mode_has_its_loop(name):
    entry = MODES[name]
    assert loops.loop(entry) is loops.LOOPS[entry.loop]
    assert loops.loop(entry).__module__ == f"{loops.__name__}.{entry.loop}"  # one module per loop, named as it


def test_every_loop_drives_a_mode():
    assert set(loops.LOOPS) == {m.loop for m in MODES.values()}


def test_a_mode_naming_no_loop_is_refused_with_the_loops_there_are():
    entry = dataclasses.replace(MODES["both"], loop="async")
    with pytest.raises(ValueError, match="^mode 'both' names loop 'async', which is none of both, explore, train"):
        loops.loop(entry)
