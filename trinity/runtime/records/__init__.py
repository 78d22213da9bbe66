"""What a run leaves in its run directory and on the terminal: the directory itself, metrics, TensorBoard events,
progress and the summary."""
