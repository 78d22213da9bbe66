"""Rules for the data selectors (`data_selector`, and upstream's deprecated `task_selector` of a taskset): each one
reads the feature columns and takes the kwargs its entry in config/selectors.py says, completed with upstream's
defaults; and where nothing feeds back what difficulty_based learns from, or nothing reads a selector, a note or a
warning says so."""

from dataclasses import replace

from ...errors import ConfigError, dotted, undotted
from .. import modes
from ..algorithms.queries import needs_rollout
from ..provenance import WRITTEN
from ..selectors import SELECTORS, SelectorEntry
from ..validate import validate
from ._context import Context
from ._rule import each_taskset, rule
from .buffer import AUXILIARY, EXPERIENCES, tasksets
from .pipeline import OPERATORS_KEY

FEEDS_BACK = "pass_rate_calculator"  # the experience operator whose pass rates a learning selector reads


def places(ctx: Context) -> list[tuple[str, str]]:
    """(dotted key of a data set, what it is: train, eval, experiences, auxiliary) of every data set a run reads."""
    found = [(key, "eval" if is_eval else "train") for key, _, is_eval in tasksets(ctx)]
    found += [(EXPERIENCES, "experiences")] if ctx.get(EXPERIENCES) else []
    return found + [(f"{AUXILIARY}.{name}", "auxiliary") for name in ctx.get(AUXILIARY) or {}]


@rule(
    reads=(
        *each_taskset("data_selector", "task_selector"),
        f"{EXPERIENCES}.data_selector",
        f"{AUXILIARY}.*.data_selector",
        "algorithm.algorithm_type",
        OPERATORS_KEY,
        "mode",
    ),
    writes=(
        *each_taskset("data_selector"),
        f"{EXPERIENCES}.data_selector.kwargs",
        f"{AUXILIARY}.*.data_selector.kwargs",
    ),
)
def data_selectors(ctx: Context) -> None:
    """A training taskset's task_selector replaces its data_selector (upstream's deprecated name); every selector's
    feature_keys are as many as it reads and its kwargs the ones it takes, completed with their defaults."""
    for key, kind in places(ctx):
        if kind in ("train", "eval") and ctx.get(f"{key}.task_selector") is not None:
            _task_selector(ctx, key, kind)
        selector = f"{key}.data_selector"
        entry = SELECTORS[ctx.get(f"{selector}.selector_type")]
        _check_features(ctx, selector, entry)
        _complete_kwargs(ctx, selector, entry)
        if entry.name == "difficulty_based":
            _learns(ctx, selector, kind)
        elif kind == "experiences" and _written(ctx, selector) and _reads_experiences(ctx):
            ctx.report(
                "note",
                selector,
                "changes nothing: the trainer reads experiences in the order the buffer serves them (Trinity-RFT's "
                "queue and SQL readers have no selector); a selector chooses a data set's rows (SFT, DPO)",
                hint=f"remove {selector}",
            )


def _task_selector(ctx: Context, key: str, kind: str) -> None:
    """Upstream copies a training taskset's task_selector over its data_selector (common/config_validator.py); an
    evaluation taskset's it reads nowhere."""
    old, new = f"{key}.task_selector", f"{key}.data_selector"
    if kind == "eval":
        ctx.report(
            "note",
            old,
            "changes nothing: Trinity-RFT reads task_selector (deprecated) for training tasksets only",
            hint=f"write {new}",
        )
        return
    if _written(ctx, new) and ctx.get(new) != ctx.get(old):
        ctx.report(
            "error",
            new,
            f"{old} (deprecated upstream) replaces it, and both are written, differing",
            hint=f"write only {new}",
        )
        return
    ctx.report("warning", old, "deprecated upstream: it replaces data_selector", hint=f"write {new} instead")
    ctx.set(new, ctx.get(old), "data_selectors", (ctx.input(old),))


def _check_features(ctx: Context, selector: str, entry: SelectorEntry) -> None:
    keys, (fewest, most) = ctx.get(f"{selector}.feature_keys"), entry.features
    if fewest <= len(keys) <= most:
        return
    wants = "no" if most == 0 else str(fewest) if fewest == most else f"{fewest} or more"
    ctx.report(
        "error",
        f"{selector}.feature_keys",
        f"selector {entry.name!r} reads {wants} feature columns; {len(keys)} given",
        allowed="[]" if most == 0 else f"{wants} column names",
        hint="remove feature_keys" if most == 0 else f"name {wants} numeric columns of the data set",
    )


def _complete_kwargs(ctx: Context, selector: str, entry: SelectorEntry) -> None:
    key = f"{selector}.kwargs"
    try:
        args = validate(entry.kwargs, ctx.get(key), lambda path: ctx.where(dotted(path)), undotted(key))
    except ConfigError as exc:
        ctx.issues.extend(replace(i, message=f"{i.message} (selector {entry.name!r})") for i in exc.issues)
        return
    if args.model_dump() != ctx.get(key):
        ctx.set(key, args.model_dump(), "data_selectors", (ctx.input(key),))


def _learns(ctx: Context, selector: str, kind: str) -> None:
    """difficulty_based learns from the pass rates pass_rate_calculator feeds back to training tasksets only."""
    key = f"{selector}.selector_type"
    if kind != "train":
        ctx.report(
            "note",
            key,
            "difficulty_based learns from the pass rates the explorer feeds back to training tasksets; nothing feeds "
            "this data set back, so it picks by the estimate its feature columns give (as Trinity-RFT's)",
        )
        return
    names = [operator["name"] for operator in ctx.get(OPERATORS_KEY)]
    if FEEDS_BACK not in names and modes.mode(ctx.get("mode")).explores:
        ctx.report(
            "warning",
            key,
            f"difficulty_based learns from the pass rates the {FEEDS_BACK} experience operator feeds back, and no "
            "operator does: every task keeps the estimate its feature columns give",
            hint=f"add {{name: {FEEDS_BACK}}} to {OPERATORS_KEY}",
        )


def _reads_experiences(ctx: Context) -> bool:
    """Whether the trainer reads rollouts' experiences (RL), not a data set's rows."""
    return needs_rollout(ctx.get("algorithm.algorithm_type"))


def _written(ctx: Context, key: str) -> bool:
    """Whether a person wrote the key, or a key inside it."""
    path = undotted(key)
    return any(p[: len(path)] == path and ctx.provenance.set_by(p, *WRITTEN) for p in ctx.provenance.by_path)
