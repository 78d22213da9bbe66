"""What a run reads from outside itself: the models its stages load and the data sets they read, by key.

One list for every consumer: the checks that each is on this machine (`local_inputs`), on the hub or in its cache
(`hub.issues`), the driver's download before Ray (`trinity.launch.fetch`) and the data sets' column check.
"""

from typing import TYPE_CHECKING, Any, NamedTuple

from . import modes
from .algorithms.queries import data_kind, needs_rollout, uses_critic, uses_teacher

if TYPE_CHECKING:
    from .schema import RunConfig


class DataInput(NamedTuple):
    """A data set a config reads: the key of its section, the section, and what its rows feed (the data kinds of
    runtime/data/prompts.py: rollouts for a taskset, else what the trainer reads)."""

    key: tuple
    storage: Any
    data: str


def model_inputs(config: "RunConfig") -> list[tuple[tuple, str | None]]:
    """(key, value) of each model the run loads: the policy, the critic where a critic trains, the teacher where the
    advantage reads one, each auxiliary model where engines run. An external (API) model loads none: model_path is
    then a name only (Trinity-RFT's example sets the API model's), never fetched."""
    model, advantage = config.model, config.algorithm.advantage_fn
    policy = [] if model.external_model.enable else [(("model", "model_path"), model.model_path)]
    found: list[tuple[tuple, str | None]] = policy
    if modes.mode(config.mode).trains and uses_critic(advantage):
        found.append((("model", "critic_model_path"), model.critic_model_path))
    if uses_teacher(advantage) and model.teacher_model_path:
        found.append((("model", "teacher_model_path"), model.teacher_model_path))
    if modes.mode(config.mode).runs_engines:  # each auxiliary model's engines load theirs beside the rollout engines
        auxiliary = config.explorer.auxiliary_models
        found += [(("explorer", "auxiliary_models", i, "model_path"), m.model_path) for i, m in enumerate(auxiliary)]
    return found


def data_inputs(config: "RunConfig") -> list[DataInput]:
    """Every data set the config reads."""
    found = []
    explorer_input = config.buffer.explorer_input
    if modes.mode(config.mode).explores:
        named = [(("taskset",), explorer_input.taskset)] if explorer_input.taskset else []
        named += [(("tasksets", i), t) for i, t in enumerate(explorer_input.tasksets)]
        named += [(("eval_tasksets", i), t) for i, t in enumerate(explorer_input.eval_tasksets)]
        found += [DataInput(("buffer", "explorer_input", *key), t, "rollouts") for key, t in named]
    experiences = config.buffer.trainer_input.experience_buffer
    algorithm = config.algorithm.algorithm_type
    if experiences and not needs_rollout(algorithm) and experiences.storage_type == "file":
        found.append(DataInput(("buffer", "trainer_input", "experience_buffer"), experiences, data_kind(algorithm)))
    for name, data_set in config.buffer.trainer_input.auxiliary_buffers.items():  # mixed into batches (mix)
        found.append(DataInput(("buffer", "trainer_input", "auxiliary_buffers", name), data_set, "sft"))
    return found
