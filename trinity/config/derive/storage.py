"""Rules for the keys every data set has (Trinity-RFT's one StorageConfig and FormatConfig) that only some kinds of
data set read: a value written where nothing reads it gets a note saying why it changes nothing, as upstream
ignores it there too (NO_EFFECT); and the experience buffer's format.enable_thinking follows model.enable_thinking
(upstream's common/config_validator.py)."""

from ...errors import undotted
from ..provenance import WRITTEN
from ._context import Context
from ._rule import each_taskset, rule
from .buffer import AUXILIARY, EXPERIENCES
from .selectors import places

THINKING = f"{EXPERIENCES}.format.enable_thinking"
_SQL = (
    "Trinity-RFT reads it only in its SQL storage (buffer/storage/sql.py: each database operation tried "
    "max(1, max_retry_times) times, max_retry_interval seconds apart)"
)
_FILE = "a data set read from its path"
_SFT_ONLY = "Trinity-RFT's task reader ignores it too: a task opens with one prompt (its SFTFormatter reads it)"
_TASKS_ONLY = (
    "a trainer's data set has no workflow or reward function to name (Trinity-RFT reads it in its TaskFormatter only)"
)
_QUEUE = "Trinity-RFT reads it only in a queue (buffer/storage/queue.py, reader/queue_reader.py)"
# kind of data set (selectors.places) -> key under it -> why a value written there changes nothing
NO_EFFECT = {
    "train": {
        "max_retry_times": f"{_SQL}; a taskset is {_FILE}. A workflow that fails is retried explorer.max_retry_times "
        "times",
        "max_retry_interval": f"{_SQL}; a taskset is {_FILE}",
        "format.enable_concatenated_multi_turn": _SFT_ONLY,
    },
    "auxiliary": {
        "max_retry_times": f"{_SQL}; an auxiliary buffer is {_FILE}",
        "max_retry_interval": f"{_SQL}; an auxiliary buffer is {_FILE}",
        "capacity": f"{_QUEUE}; an auxiliary buffer is {_FILE}",
        "max_read_timeout": f"{_QUEUE}; an auxiliary buffer is {_FILE}, whole, when the trainer starts",
        "format.workflow_key": _TASKS_ONLY,
        "format.reward_fn_key": _TASKS_ONLY,
    },
    "experiences": {
        "max_retry_times": f"{_SQL}; this experience buffer is not kept in SQLite (storage_type sql, or a "
        "sqlite:/// path)",
        "max_retry_interval": f"{_SQL}; this experience buffer is not kept in SQLite",
        "format.workflow_key": _TASKS_ONLY,
        "format.reward_fn_key": _TASKS_ONLY,
    },
}
NO_EFFECT["eval"] = NO_EFFECT["train"]
SQLITE_KEYS = ("max_retry_times", "max_retry_interval")  # what an experience buffer kept in SQLite reads


@rule(
    reads=(
        *each_taskset(*NO_EFFECT["train"], "format.enable_thinking"),
        *(f"{EXPERIENCES}.{key}" for key in (*NO_EFFECT["experiences"], "storage_type", "path")),
        *(f"{AUXILIARY}.*.{key}" for key in NO_EFFECT["auxiliary"]),
    ),
)
def unread_keys(ctx: Context) -> None:
    """A key written on a kind of data set that does not read it: a note saying why it changes nothing there."""
    for place, kind in places(ctx):
        for key, why in NO_EFFECT[kind].items():
            if kind == "experiences" and key in SQLITE_KEYS and _in_sqlite(ctx):
                continue
            value = ctx.get(f"{place}.{key}")
            if _written(ctx, f"{place}.{key}") and value is not False and value != "":  # false, '': what is done
                ctx.report("note", f"{place}.{key}", f"changes nothing: {why}", hint=f"remove {place}.{key}")
    for place, kind in places(ctx):
        if kind in ("train", "eval") and ctx.get(f"{place}.format.enable_thinking") is not None:
            ctx.report(
                "note",
                f"{place}.format.enable_thinking",
                f"this taskset's prompts are rendered with enable_thinking={ctx.get(f'{place}.format.enable_thinking')}"
                " (explorer.rollout_model.enable_thinking for the others); Trinity-RFT 0.6.0 reads a taskset's "
                "format.enable_thinking nowhere and renders every prompt with the rollout model's",
            )


@rule(reads=("model.enable_thinking", THINKING), writes=(THINKING,))
def data_set_thinking(ctx: Context) -> None:
    """The experience buffer's (an SFT or DPO data set's) chat template renders with model.enable_thinking unless its
    format says (upstream's rule); an auxiliary buffer's keeps its own, null: the template's default."""
    if ctx.get(EXPERIENCES) and ctx.get(THINKING) is None and ctx.get("model.enable_thinking") is not None:
        ctx.set(THINKING, ctx.get("model.enable_thinking"), "data_set_thinking", (ctx.input("model.enable_thinking"),))


def _in_sqlite(ctx: Context) -> bool:
    path = ctx.get(f"{EXPERIENCES}.path") or ""
    return ctx.get(f"{EXPERIENCES}.storage_type") == "sql" or path.startswith("sqlite:///")


def _written(ctx: Context, key: str) -> bool:
    """Whether a person wrote the key."""
    return ctx.provenance.set_by(undotted(key), *WRITTEN)
