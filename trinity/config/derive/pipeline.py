"""Rules for the experience pipeline (`data_processor.experience_pipeline.operators`): each operator one the explorer
runs (config/operators.py), its arguments checked and completed with their defaults."""

from dataclasses import replace

from ...errors import ConfigError, did_you_mean, dotted, undotted
from .. import modes
from ..operators import OPERATORS, REFUSED
from ..validate import validate
from ._context import Context
from ._rule import rule

OPERATORS_KEY = "data_processor.experience_pipeline.operators"
SAVE, SAVE_PATH = "data_processor.experience_pipeline.save_input", "data_processor.experience_pipeline.input_save_path"
SAVED_BY_DEFAULT = (
    "sqlite:///explorer_output.db"  # in the run directory (upstream: <job dir>/buffer/explorer_output.db)
)
SAVE_FORMATS = (".jsonl", ".json", "sqlite:///")  # what upstream's pipeline writes: a JSON-lines file, or SQLite


@rule(reads=(OPERATORS_KEY, "mode"), writes=(f"{OPERATORS_KEY}.*.args",))
def experience_operators(ctx: Context) -> None:
    """Every operator is one the explorer runs, with the arguments it takes (completed with upstream's defaults); in
    a mode without an explorer the pipeline runs nowhere, which a note says."""
    operators = ctx.get(OPERATORS_KEY)
    for i, operator in enumerate(operators):
        key = f"{OPERATORS_KEY}.{i}"
        entry = OPERATORS.get(operator["name"])
        if entry is None:
            _refuse(ctx, f"{key}.name", operator["name"])
            continue
        try:
            args = validate(entry.args, operator["args"], lambda path: ctx.where(dotted(path)), undotted(f"{key}.args"))
        except ConfigError as exc:
            ctx.issues.extend(replace(i, message=f"{i.message} (operator {entry.name!r})") for i in exc.issues)
            continue
        ctx.set(f"{key}.args", args.model_dump(), "experience_operators", (ctx.input(f"{key}.args"),))
    if operators and not modes.mode(ctx.get("mode")).explores_steps:
        ctx.report(
            "note",
            OPERATORS_KEY,
            f"the experience pipeline runs in the explorer, and mode {ctx.get('mode')!r} runs no explore step: no "
            "operator is applied",
        )


def _refuse(ctx: Context, key: str, name: str) -> None:
    allowed = ", ".join(OPERATORS)
    if name in REFUSED:
        ctx.report(
            "error",
            key,
            f"operator {name!r} is known to Trinity-RFT but not run by trinity: {REFUSED[name]}",
            allowed=allowed,
            hint=f"remove it; the operators that run are {allowed}",
        )
        return
    hint = did_you_mean(name, [*OPERATORS, *REFUSED]) or f"name one of {allowed}"
    ctx.report("error", key, f"unknown experience operator {name!r}", allowed=allowed, hint=hint)


@rule(reads=(SAVE, SAVE_PATH, "mode"), writes=(SAVE_PATH,))
def saved_input(ctx: Context) -> None:
    """save_input keeps each explore step's experiences, before the operators, at input_save_path: a JSON-lines file
    or a sqlite:/// URL (upstream's two), unset sqlite:///explorer_output.db in the run directory. Where nothing
    explores steps (train, bench, serve), or save_input is false, a note says it changes nothing."""
    path = ctx.get(SAVE_PATH)
    if path is not None and not (path.startswith(SAVE_FORMATS[-1]) or path.endswith(SAVE_FORMATS[:-1])):
        ctx.report(
            "error",
            SAVE_PATH,
            f"{path!r} is neither a JSON-lines file nor a SQLite database",
            allowed="a path ending in .jsonl or .json; sqlite:///PATH",
            hint=f"write {SAVE_PATH}: {SAVED_BY_DEFAULT} (relative paths are in the run directory)",
        )
        return
    if ctx.get(SAVE) and not modes.mode(ctx.get("mode")).explores_steps:
        ctx.report("note", SAVE, f"changes nothing: mode {ctx.get('mode')!r} runs no explore step")
    elif path is not None and not ctx.get(SAVE):
        ctx.report("note", SAVE_PATH, f"changes nothing: {SAVE} is false", hint=f"set {SAVE}: true to keep them")
    elif ctx.get(SAVE) and path is None:
        ctx.set(SAVE_PATH, SAVED_BY_DEFAULT, "saved_input", (ctx.input(SAVE),))
