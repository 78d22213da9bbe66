"""Algorithm presets and the loss functions the runtime runs, with the arguments each accepts.

An `algorithm_type` names a preset that fills the functions a user left unset, as Trinity-RFT 0.6 does; each
function's arguments are a small model; upstream's other algorithms and functions are known by name and refused
with the reason. What is where:

- `args`: the argument models, one per function (`NoArgs` for none; `ONLY_DEFAULT` marks an argument upstream has
  that the runtime cannot honour, which accepts only upstream's default).
- `advantages`, `losses`, `sampling`: the entries of the advantage functions (`ADVANTAGES`), policy losses
  (`POLICY_LOSSES`) and sample strategies (`SAMPLE_STRATEGIES`); an advantage or loss names the function in verl's
  registries that computes it, which the trainer looks up by that name (trinity/runtime/trainer/functions.py).
- `own`: where trinity's own functions live (trinity/runtime/trainer/algos/) and the name each is registered under
  in verl's registries (`trinity_<its entry's key>`, made there alone).
- `functions`: every function kind with the names the runtime can run (`FUNCTIONS`), and upstream's names it
  cannot yet (`UNSUPPORTED`).
- `presets`: what each algorithm_type fills in (`ALGORITHMS`) and what its trainer reads.
- `queries`: the questions other layers ask of these tables (`needs_rollout`, `data_kind`, `is_rl_loss`, `uses_*`),
  one answer each.

Adding an algorithm is its preset, the entries of the functions it introduces, and, where verl lacks a function,
one runtime module that registers it with verl (named by the entry's `module`). Nothing is re-exported here:
import each name from the module that says what it is.
"""
