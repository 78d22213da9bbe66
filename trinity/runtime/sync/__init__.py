"""Moving trained weights to the rollout engines: a collective, files, or the object store."""
