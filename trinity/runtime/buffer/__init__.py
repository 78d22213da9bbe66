"""Where experiences wait between the explorer and the trainer, each consumed exactly once."""
