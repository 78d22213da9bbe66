"""Rules for the replay buffer (buffer.trainer_input.experience_buffer.replay_buffer and capacity): the queue served
by priority, as Trinity-RFT's AsyncPriorityQueue (buffer/storage/queue.py)."""

from dataclasses import replace

from ...errors import ConfigError, dotted, undotted
from ..provenance import WRITTEN
from ..replay import PRIORITY_FUNCTIONS
from ..schema.buffer import ExperienceBufferConfig
from ..validate import validate
from ._context import Context
from ._rule import rule
from .buffer import EXPERIENCES

REPLAY = f"{EXPERIENCES}.replay_buffer"
# what only the replay buffer reads: a value written there without it would change nothing
REPLAY_ONLY = (
    f"{EXPERIENCES}.capacity",
    f"{REPLAY}.priority_fn",
    f"{REPLAY}.priority_fn_args",
    f"{REPLAY}.reuse_cooldown_time",
)


@rule(
    reads=(EXPERIENCES,),
    writes=(f"{REPLAY}.priority_fn_args",),
)
def replay_buffer(ctx: Context) -> None:
    """The replay buffer is the in-memory queue's (a sql or file store, or a queue kept in SQLite for an exact resume,
    keeps no priorities); its priority function's arguments are checked and completed with their defaults; what only
    it reads is refused where it is off."""
    if not ctx.get(EXPERIENCES):
        return
    if not ctx.get(f"{REPLAY}.enable"):
        _unread(ctx)
        return
    storage, path = ctx.get(f"{EXPERIENCES}.storage_type"), ctx.get(f"{EXPERIENCES}.path") or ""
    if storage != "queue" or path:
        where = f"{EXPERIENCES}.storage_type" if storage != "queue" else f"{EXPERIENCES}.path"
        ctx.report(
            "error",
            where,
            f"the replay buffer serves experiences from memory by priority; {where.rsplit('.', 1)[1]} "
            f"{(storage if storage != 'queue' else path)!r} keeps them in order on disk",
            allowed="storage_type: queue without a path",
            hint=f"set {EXPERIENCES}.storage_type: queue without a path, or {REPLAY}.enable: false",
        )
    entry, key = PRIORITY_FUNCTIONS[ctx.get(f"{REPLAY}.priority_fn")], f"{REPLAY}.priority_fn_args"
    try:
        args = validate(entry.args, ctx.get(key), lambda path: ctx.where(dotted(path)), undotted(key))
    except ConfigError as exc:
        ctx.issues.extend(replace(i, message=f"{i.message} (priority function {entry.name!r})") for i in exc.issues)
        return
    ctx.set(key, args.model_dump(), "replay_buffer", (ctx.input(key),))


def _unread(ctx: Context) -> None:
    defaults = ExperienceBufferConfig()
    for key in REPLAY_ONLY:
        if _written(ctx, key) and ctx.get(key) != _default(defaults, key):
            ctx.report(
                "error",
                key,
                "only the replay buffer reads it, and it is off: the queue serves experiences in order, unbounded "
                "(the explorer runs at most synchronizer.sync_offset steps ahead)",
                allowed=repr(_default(defaults, key)),
                hint=f"set {REPLAY}.enable: true, or remove {key}",
            )


def _written(ctx: Context, key: str) -> bool:
    """Whether a person wrote the key, or (a mapping) a key inside it."""
    path = undotted(key)
    return any(p[: len(path)] == path and ctx.provenance.set_by(p, *WRITTEN) for p in ctx.provenance.by_path)


def _default(section: ExperienceBufferConfig, key: str) -> object:
    value = section
    for part in key.removeprefix(f"{EXPERIENCES}.").split("."):
        value = getattr(value, part)
    return value.model_dump() if hasattr(value, "model_dump") else value
