"""The RFT runtime: Ray roles that read only the frozen ResolvedConfig and really train.

One folder per part of the data path: driver/ (the run's process: stages, their loops, the watcher), roles/ (what
every role actor is and the calls it keeps), explorer/, workflows/, rewards/ and data/ (tasks to experiences),
rollout/ (engines), buffer/ (experiences to the trainer), trainer/ and verl/ (the update), sync/ and weights/ (weights
to the engines and on disk), records/ (what the run directory and the terminal show); experience.py is the unit they
pass on. docs/runtime.md's source layout says the same in more words.
"""
