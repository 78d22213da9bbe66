"""From a resolved config to Ray: the launch plan as data, its check against the cluster, and the launcher."""
