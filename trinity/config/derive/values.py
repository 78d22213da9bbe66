"""Values the schema accepts (they are Trinity-RFT's) that this version's runtime does not run: refused by name.

A value listed here would otherwise validate and then be ignored or run as something else; the reason says
what the runtime does instead. tests/config/test_every_value_is_honoured.py holds every other value to a test
that runs it.
"""

import typing

from ..schema import RunConfig
from ._context import Context
from ._rule import each_taskset, rule
from .buffer import AUXILIARY, EXPERIENCES, tasksets

_DPO = (
    "chatpair rows (chat messages with a chosen and a rejected reply) are not read yet; DPO reads plaintext rows "
    "(prompt_key, chosen_key, rejected_key)"
)
_DATA_SET_FILE = "a data set mixed into batches is read from its path (a file, a folder or a saved data set)"
_TASKSET_FILE = (
    "a taskset is read from its path (a file, a folder or a saved data set); queue and sql are "
    "experience buffer storages"
)

# dotted key (a taskset's keys start with 'taskset.', the SFT data set's with 'experience_buffer.', a data set mixed
# into batches with 'auxiliary_buffer.') -> value -> why it is refused
NOT_RUN: dict[str, dict[str, str]] = {
    "monitor.monitor_type": {
        name: f"metrics go to metrics.jsonl, and to TensorBoard or wandb; no {name} logger is implemented "
        "(trinity.runtime.records.metrics)"
        for name in ("mlflow", "swanlab")
    },
    "trainer.trainer_strategy": {
        "megatron": "verl's Megatron backend is not wired in this version of trinity: nothing installs or runs it"
    },
    "taskset.storage_type": {name: _TASKSET_FILE for name in ("queue", "sql")},
    "taskset.format.prompt_type": {"chatpair": _DPO},
    "experience_buffer.format.prompt_type": {"chatpair": _DPO},
    "auxiliary_buffer.storage_type": {name: _DATA_SET_FILE for name in ("queue", "sql")},
    "auxiliary_buffer.format.prompt_type": {"chatpair": _DPO},
}
# keys whose values the hardware profile narrows further: what is allowed is what both trinity and the profile run
PROFILE_FACT = {"trainer.trainer_strategy": "trainer_strategies"}


@rule(
    reads=(
        "buffer.trainer_input.auxiliary_buffers.*.format.prompt_type",
        "buffer.trainer_input.auxiliary_buffers.*.storage_type",
        "buffer.trainer_input.experience_buffer.format.prompt_type",
        "monitor.monitor_type",
        "synchronizer.sync_style",
        "trainer.trainer_strategy",
        *each_taskset("format.prompt_type", "storage_type"),
    ),
)
def values_not_run(ctx: Context) -> None:
    """A value the runtime does not run is an error naming the key, the value, why, and what runs."""
    for key, table in _keys(ctx):
        value = ctx.get(key)
        if value not in table or _reported(ctx, key):
            continue
        fact = getattr(ctx.facts, PROFILE_FACT.get(key, ""), None)
        allowed = [v for v in _choices(key) if v not in table and (fact is None or v in fact)]
        ctx.report(
            "error",
            key,
            f"{value!r} is not run by this version of trinity: {table[value]}",
            allowed=", ".join(allowed),
            hint=f"set {key}={allowed[0]}, or remove it",
        )


def _keys(ctx: Context) -> list[tuple[str, dict[str, str]]]:
    """(dotted key, its refused values) for every place a table entry applies in this config."""
    places = ("taskset.", "experience_buffer.", "auxiliary_buffer.")
    out = [(key, table) for key, table in NOT_RUN.items() if not key.startswith(places)]
    for key, _, _ in tasksets(ctx):
        out += [(f"{key}.{k.removeprefix('taskset.')}", t) for k, t in NOT_RUN.items() if k.startswith("taskset.")]
    if ctx.get(EXPERIENCES):
        out += [
            (f"{EXPERIENCES}.{k.removeprefix('experience_buffer.')}", t)
            for k, t in NOT_RUN.items()
            if k.startswith("experience_buffer.")
        ]
    for name in ctx.get(AUXILIARY) or {}:
        out += [
            (f"{AUXILIARY}.{name}.{k.removeprefix('auxiliary_buffer.')}", t)
            for k, t in NOT_RUN.items()
            if k.startswith("auxiliary_buffer.")
        ]
    return out


def _reported(ctx: Context, key: str) -> bool:
    # a hardware rule that refused the same key already said why (megatron on an NPU): one error per key
    return any(issue.key == key and issue.severity == "error" for issue in ctx.issues)


def _choices(key: str) -> list:
    """The values the schema's Literal field at `key` accepts (list indices are skipped)."""
    model, annotation = RunConfig, None
    for part in key.split("."):
        if part.isdigit() or part not in model.model_fields:  # a list index, a mapping's key
            continue
        annotation = model.model_fields[part].annotation
        model = _model_in(annotation)
    return list(typing.get_args(_literal_in(annotation)))


def _model_in(annotation):
    """The pydantic model inside Optional[...] / list[...], or None."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    return next((found for arg in typing.get_args(annotation) if (found := _model_in(arg)) is not None), None)


def _literal_in(annotation):
    if typing.get_origin(annotation) is typing.Literal:
        return annotation
    return next((found for arg in typing.get_args(annotation) if (found := _literal_in(arg)) is not None), None)
