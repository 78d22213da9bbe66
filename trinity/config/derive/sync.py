"""Rules for synchronizer.sync_method, the channel its weights take, and the weight-sync world size."""

from ...platforms import get_platform, ipc
from .. import modes, sync_methods
from ..algorithms.queries import needs_rollout
from ._context import Context
from ._rule import rule

KEY = "synchronizer.sync_method"


@rule(
    reads=(
        "algorithm.algorithm_type",
        "cluster.rollout_gpu_num",
        "mode",
        "synchronizer.sync_channel",
        "synchronizer.sync_method",
    ),
    writes=("synchronizer.sync_channel", "synchronizer.sync_method", "synchronizer.weight_sync_world_size"),
)
def sync_method(ctx: Context) -> None:
    """online -> the hardware's collective; another vendor's collective is corrected; then what the method becomes in
    the mode (sync_methods.SyncMethod.in_mode)."""
    asked, backend, mode = ctx.get(KEY), ctx.facts.collective_backend, ctx.get("mode")
    inputs = (ctx.input(KEY), ctx.fact("collective_backend"), ctx.input("mode"))
    name = {"online": backend, "offline": sync_methods.CHECKPOINT}.get(asked, asked)
    if sync_methods.method(name).collective and name != backend:
        ctx.report(
            "warning",
            KEY,
            f"{asked!r} is not the collective backend of {ctx.loaded.name}, which is {backend!r} "
            f"({ctx.loaded.where(('facts', 'collective_backend'))}); using {backend!r}",
            allowed=f"{backend}, online, checkpoint, memory",
            hint="write sync_method: online to get the right collective on every hardware",
        )
        name = backend
    entry, wanted = modes.mode(mode), sync_methods.method(name)
    method = wanted.in_mode(entry)
    if method is not wanted and needs_rollout(ctx.get("algorithm.algorithm_type")):  # SFT syncs nothing: no note
        ctx.report("note", KEY, f"{_why(wanted, entry)}; in mode {mode!r} it becomes {method.name!r}")
    ctx.set(KEY, method.name, "sync_method", inputs)
    _channel(ctx, method, entry)
    rollout = ctx.get("cluster.rollout_gpu_num")
    world = rollout + 1 if method.collective and rollout is not None else None
    ctx.set(
        "synchronizer.weight_sync_world_size",
        world,
        "weight_sync_world_size",
        (ctx.input("cluster.rollout_gpu_num"), f"{KEY}={method.name!r}"),
    )


def _why(wanted: sync_methods.SyncMethod, entry: modes.Mode) -> str:
    if wanted.collective and not entry.splits_devices:
        return "a collective sync needs explorer and trainer running side by side"
    return f"a {wanted.name} sync needs trainer and engines in one run"


def _channel(ctx: Context, method: sync_methods.SyncMethod, entry: modes.Mode) -> None:
    """synchronizer.sync_channel: the method's; memory maps the trainer's device memory where the roles take turns on
    devices whose platform shares memory between processes (Platform.device_ipc) on this node (its driver release,
    where the platform names one: platforms/ipc.py); a node whose driver is too old syncs through the object store,
    with a note."""
    platform, key = get_platform(ctx.facts.device_type), "synchronizer.sync_channel"
    value = sync_methods.channel(method, entry, platform.device_ipc)
    here = ipc.support(platform, ctx.driver) if value == sync_methods.DEVICE_IPC and platform.ipc_driver else None
    if here is not None and not here.on:
        value = sync_methods.channel(method, entry, device_ipc=False)
        ctx.report(
            "note",
            key,
            f"{value!r} (Ray's object store, through host memory), not 'device_ipc': {here.why}",
            hint=f"install the {platform.device_type} driver release {platform.ipc_driver} or newer (trinity doctor "
            "shows this node's)",
        )
    if ctx.user_set(key) and ctx.get(key) != value:
        ctx.report(
            "error",
            key,
            f"is derived ({value!r}: from sync_method, mode and the platform) and must not be set to {ctx.get(key)!r}",
            allowed=repr(value),
            hint=f"remove {key}; set synchronizer.sync_method or mode instead",
        )
    inputs = (
        f"{KEY}={method.name!r}",
        ctx.input("mode"),
        f"platform {platform.device_type}.device_ipc={platform.device_ipc!r} ({platform.ipc_reason})",
        *((f"this node: device IPC {'on' if here.on else 'off'} ({here.why})",) if here is not None else ()),
    )
    ctx.set(key, value, "sync_channel", inputs)


INTERVALS = ("synchronizer.explorer_sync_interval", "synchronizer.trainer_sync_interval")


@rule(
    reads=(
        "mode",
        "synchronizer.explorer_sync_interval",
        "synchronizer.sync_interval",
        "synchronizer.sync_style",
        "synchronizer.trainer_sync_interval",
    ),
    writes=INTERVALS,
)
def sync_intervals(ctx: Context) -> None:
    """synchronizer.explorer_sync_interval (the explorer looks for new weights every so many explore steps) and
    trainer_sync_interval (the trainer offers its weights every so many train steps) default to sync_interval, as in
    Trinity-RFT (common/config_validator.py); under sync_style fixed, where the explorer waits at each of its syncs
    for the trainer's next offer, the two must be one interval (runtime/driver/sync_policy.py)."""
    every = ctx.get("synchronizer.sync_interval")
    for key in INTERVALS:
        if ctx.get(key) is None:
            ctx.set(key, every, "sync_intervals", (ctx.input("synchronizer.sync_interval"),))
    explorer, trainer = (ctx.get(key) for key in INTERVALS)
    entry = modes.mode(ctx.get("mode"))  # a mode whose stage loop orders explore and train steps (its SyncPolicy)
    if ctx.get("synchronizer.sync_style") == "fixed" and entry.explores and entry.trains and explorer != trainer:
        key = INTERVALS[0] if ctx.user_set(INTERVALS[0]) else INTERVALS[1]
        ctx.report(
            "error",
            key,
            f"explorer_sync_interval={explorer} and trainer_sync_interval={trainer} differ under sync_style 'fixed', "
            "where the explorer waits at each of its syncs for the trainer's next weights: with the trainer's "
            "interval above the explorer's they stop coming (Trinity-RFT's explorer waits sync_timeout for each), "
            "below it the "
            "trainer falls further behind at every sync",
            allowed=f"equal intervals ({explorer} and {explorer}, or {trainer} and {trainer})",
            hint="set both to one value (or only synchronizer.sync_interval), or use sync_style trainer_driven or "
            "explorer_driven, where the explorer takes the trainer's weights at its own interval",
        )


@rule(
    reads=("algorithm.algorithm_type", "explorer.eval_interval", "mode", "synchronizer.explorer_sync_interval"),
    writes=("explorer.eval_interval",),
)
def eval_interval(ctx: Context) -> None:
    """explorer.eval_interval is rounded down to a multiple of explorer_sync_interval, so evaluation follows a sync
    (upstream's rule)."""
    every, sync = ctx.get("explorer.eval_interval"), ctx.get("synchronizer.explorer_sync_interval")
    # a mode that evaluates each saved checkpoint once has no evaluation interval
    if (
        modes.mode(ctx.get("mode")).evaluates_checkpoints
        or not needs_rollout(ctx.get("algorithm.algorithm_type"))
        or every % sync == 0
    ):
        return
    value = max(every // sync, 1) * sync
    # the key the user wrote: explorer_sync_interval when set, else sync_interval, which it was filled from
    named = "explorer_sync_interval" if ctx.user_set("synchronizer.explorer_sync_interval") else "sync_interval"
    ctx.report(
        "warning",
        "explorer.eval_interval",
        f"{every} is not a multiple of synchronizer.{named}={sync}; using {value}",
        allowed=f"a multiple of {sync}",
        hint=f"set explorer.eval_interval to a multiple of {sync}",
    )
    ctx.set(
        "explorer.eval_interval",
        value,
        "eval_interval",
        (ctx.input("explorer.eval_interval"), ctx.input("synchronizer.explorer_sync_interval")),
    )


@rule(reads=("explorer.max_inflight_batches", "mode", "synchronizer.sync_style"))
def fully_async(ctx: Context) -> None:
    """sync_style fully_async runs explore steps beside each other and moves weights while they run (Trinity-RFT's
    explorer/explorer.py; runtime/driver/sync_policy.py): not where explorer and trainer take turns on the devices;
    explorer.max_inflight_batches is read under it only, as upstream."""
    style, entry = ctx.get("synchronizer.sync_style"), modes.mode(ctx.get("mode"))
    if style == "fully_async" and entry.explores and entry.trains and entry.shares_devices:
        ctx.report(
            "error",
            "synchronizer.sync_style",
            f"'fully_async' cannot run in mode {ctx.get('mode')!r}, where the engines sleep while the trainer steps: "
            "nothing runs beside anything there",
            allowed="fixed, trainer_driven, explorer_driven",
            hint="use mode both to explore beside training, or sync_style fixed here",
        )
    if style != "fully_async" and ctx.user_set("explorer.max_inflight_batches"):
        ctx.report(
            "note",
            "explorer.max_inflight_batches",
            f"changes nothing under sync_style {style!r}: explore steps run one at a time",
            hint="set synchronizer.sync_style=fully_async to run several at once, or remove it",
        )
