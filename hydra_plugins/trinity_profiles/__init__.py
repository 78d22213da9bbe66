"""trinity's hardware profiles in every Hydra app: a `hardware` config group and `${hw:...}` resolvers."""
