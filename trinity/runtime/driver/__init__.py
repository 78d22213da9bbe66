"""The driver: the run's own process. It checks, launches and drives each stage's roles on Ray (run, stage, the loop
each mode names, the scheduler and its sync policy, the watcher of role calls, the factory of role actors); data and
weights never pass through it."""
