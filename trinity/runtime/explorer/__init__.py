"""The explorer role: tasks from its tasksets run as workflows against the rollout engines, experiences to the
buffer."""
