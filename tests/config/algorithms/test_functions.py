"""trinity/config/algorithms/functions.py: the function kinds' tables are the entries' arguments."""

from trinity.config.algorithms.presets import ALGORITHMS


def test_the_function_registries_are_the_entries_arguments():
    from trinity.config.algorithms.advantages import ADVANTAGES
    from trinity.config.algorithms.functions import FUNCTIONS
    from trinity.config.algorithms.losses import POLICY_LOSSES

    assert FUNCTIONS["advantage_fn"] == {name: entry.args for name, entry in ADVANTAGES.items()}
    assert FUNCTIONS["policy_loss_fn"] == {name: entry.args for name, entry in POLICY_LOSSES.items()}
    # every preset's functions have entries the runtime can look up
    for preset in ALGORITHMS.values():
        assert preset.functions["advantage_fn"] in ADVANTAGES and preset.functions["policy_loss_fn"] in POLICY_LOSSES
