"""What the driver hands to Ray: actor environments and the cluster check (the launcher builds on these)."""
