"""Rules that split the cluster's devices between rollout and trainer (Trinity-RFT 0.6 semantics)."""

from .. import modes
from ..engines import devices_per_engine
from ._context import Context
from ._rule import rule

NODE_DEVICES = "cluster.node_devices"


@rule(reads=("cluster.gpu_per_node", "cluster.node_devices"), writes=("cluster.gpu_per_node",))
def gpu_per_node(ctx: Context) -> None:
    """cluster.gpu_per_node defaults to the profile's devices_per_node, or the devices a node offers where fewer
    (cluster.node_devices: the live cluster's, or this machine's with hardware=auto); it may not exceed the profile's,
    and one above what a node offers is lowered to it (a fact of the machine, reported)."""
    per_node, limit, offered = ctx.get("cluster.gpu_per_node"), ctx.facts.devices_per_node, ctx.get(NODE_DEVICES)
    if per_node is None:
        value = min(limit, offered or limit)
        inputs = (ctx.fact("devices_per_node"),) + ((ctx.input(NODE_DEVICES),) if offered else ())
        ctx.set("cluster.gpu_per_node", value, "gpu_per_node", inputs)
    elif offered and per_node > offered:
        ctx.report(
            "warning",
            "cluster.gpu_per_node",
            f"{per_node} devices per node, but a node offers {offered} ({ctx.where(NODE_DEVICES)}); using {offered}",
            allowed=f"1..{offered}",
            hint=f"set cluster.gpu_per_node={offered}, or run where nodes have {per_node} devices",
        )
        ctx.set(
            "cluster.gpu_per_node",
            offered,
            "gpu_per_node",
            (ctx.input("cluster.gpu_per_node"), ctx.input(NODE_DEVICES)),
        )
    elif per_node > limit:
        ctx.report(
            "error",
            "cluster.gpu_per_node",
            f"{per_node} devices per node, but one {ctx.loaded.name} node has {limit} "
            f"({ctx.loaded.where(('facts', 'devices_per_node'))})",
            allowed=f"1..{limit}",
            hint="lower cluster.gpu_per_node, raise cluster.node_num, or choose the right hardware profile",
        )


@rule(reads=("cluster.gpu_per_node", "cluster.node_num", "mode"), writes=("mode",))
def shared_devices(ctx: Context) -> None:
    """On a single device (one node offering one, or gpu_per_node 1 on one node) a mode nobody set (the schema's `both`)
    becomes the mode that takes turns on the devices (`colocate`, modes.on_devices): an engine and a trainer rank can
    only share it. The demo on a machine with one GPU or NPU. A mode a person set stays, and so does `both` on more
    devices, where running out of devices for the trainer is refused with the settings that work."""
    asked, devices = ctx.get("mode"), ctx.get("cluster.node_num") * ctx.get("cluster.gpu_per_node")
    runs = modes.on_devices(asked, ctx.user_set("mode"), devices)
    if runs == asked:
        return
    ctx.report(
        "note",
        "mode",
        f"the run has one device, which an engine and a trainer rank can only share: mode {runs!r}, the trainer "
        "and the engines taking turns on it",
        hint=f"set mode to choose; mode {asked!r} needs a device for the engines and one for the trainer",
    )
    inputs = (ctx.input("mode"), ctx.input("cluster.node_num"), ctx.input("cluster.gpu_per_node"))
    ctx.set("mode", runs, "shared_devices", inputs)


@rule(
    reads=(
        "cluster.explorer_gpu_num",
        "cluster.gpu_per_node",
        "cluster.node_num",
        "cluster.rollout_gpu_num",
        "cluster.total_gpu_num",
        "cluster.train_stage_devices",
        "cluster.trainer_gpu_num",
        "cluster.trainer_gpu_num_per_node",
        "cluster.trainer_node_num",
        "explorer.rollout_model.data_parallel_size",
        "explorer.rollout_model.engine_num",
        "explorer.rollout_model.pipeline_parallel_size",
        "explorer.rollout_model.tensor_parallel_size",
        "explorer.auxiliary_models.*.data_parallel_size",
        "explorer.auxiliary_models.*.engine_num",
        "explorer.auxiliary_models.*.pipeline_parallel_size",
        "explorer.auxiliary_models.*.tensor_parallel_size",
        "mode",
        "model.external_model.enable",
    ),
    writes=(
        "cluster.explorer_gpu_num",
        "cluster.rollout_gpu_num",
        "cluster.total_gpu_num",
        "cluster.trainer_gpu_num",
        "cluster.trainer_gpu_num_per_node",
        "cluster.trainer_node_num",
    ),
)
def cluster_counts(ctx: Context) -> None:
    """total, rollout, explorer and trainer device counts; impossible splits are errors."""
    mode, nodes, per_node = ctx.get("mode"), ctx.get("cluster.node_num"), ctx.get("cluster.gpu_per_node")
    if per_node > ctx.facts.devices_per_node:
        return  # already reported by gpu_per_node
    total = nodes * per_node
    # an external (API) model is the rollout model on its own servers: no engines start (derive/external.py)
    engines = modes.mode(mode).runs_engines and not ctx.get("model.external_model.enable")
    rollout = _engine_devices(ctx, "explorer.rollout_model") if engines else 0
    # each auxiliary model's engines hold devices of their own beside the rollout engines' (upstream's explorer_gpu_num)
    auxiliary = _auxiliary_devices(ctx) if modes.mode(mode).runs_engines else 0
    explorer = rollout + auxiliary
    inputs = (ctx.input("mode"), ctx.input("cluster.node_num"), ctx.input("cluster.gpu_per_node"))
    counts = {"total_gpu_num": total, "rollout_gpu_num": rollout, "explorer_gpu_num": explorer}
    beside = ctx.stage_beside()
    if beside:  # the trainer takes its share of the run's exploring stages; their engines start beside it
        inputs += (ctx.stage_devices_input(), f"the run's stages: {', '.join(s.mode for s in ctx.run_stages)}")
        engines_beside = _engine_devices(ctx, "explorer.rollout_model") + _auxiliary_devices(ctx)
        split = _trainer_split(ctx, beside.mode, total, engines_beside, per_node, auxiliary)
    else:
        split = _trainer_split(ctx, mode, total, explorer, per_node, auxiliary)
    counts.update(split)
    for name, value in counts.items():
        _set_count(ctx, name, value, inputs)


def _auxiliary_devices(ctx: Context) -> int:
    """Devices of every auxiliary model's engines (engine_num x TP x PP x DP each)."""
    models = ctx.get("explorer.auxiliary_models") or []
    return sum(_engine_devices(ctx, f"explorer.auxiliary_models[{i}]") for i in range(len(models)))


def _engine_devices(ctx: Context, key: str) -> int:
    """Devices of all engines under `key`; an engine bigger than a node must fill whole nodes."""
    engine = ctx.get(key)
    per_engine = devices_per_engine(engine)
    per_node = ctx.get("cluster.gpu_per_node")
    if per_engine > per_node and per_engine % per_node:
        ctx.report(
            "error",
            f"{key}.tensor_parallel_size",
            f"one engine needs {per_engine} devices (TP x PP x DP); an engine larger than a node must span whole "
            f"nodes of {per_node}",
            allowed=f"devices per engine <= {per_node} or a multiple of {per_node}",
            hint="change the parallel sizes so one engine fits a node or fills whole nodes",
        )
    return engine["engine_num"] * per_engine


def _trainer_split(
    ctx: Context, mode: str, total: int, explorer: int, per_node: int, auxiliary: int = 0
) -> dict[str, int]:
    """The trainer's devices: none, all of them (alone, or shared with the engines), or what the engines leave."""
    entry = modes.mode(mode)
    key, sizes = _blamed(auxiliary)
    if not entry.trains:
        _check_fits(ctx, explorer, total, auxiliary)
        return {"trainer_gpu_num": 0, "trainer_node_num": 0, "trainer_gpu_num_per_node": 0}
    if not entry.splits_devices:
        _check_fits(ctx, explorer, total, auxiliary)
        return {
            "trainer_gpu_num": total,
            "trainer_node_num": ctx.get("cluster.node_num"),
            "trainer_gpu_num_per_node": per_node,
        }
    trainer = total - explorer
    if trainer <= 0:
        ctx.report(
            "error",
            key,
            f"no devices left for the trainer: {total} devices ({ctx.get('cluster.node_num')} node(s) x {per_node}) "
            f"minus {explorer} for rollout{sizes}",
            allowed=f"rollout devices < {total}",
            hint="lower explorer.rollout_model.engine_num or tensor_parallel_size, or raise cluster.node_num"
            + (", or set mode=colocate (trainer and engines take turns on the devices)" if trainer == 0 else ""),
        )
        return {}
    if trainer <= per_node:
        return {"trainer_gpu_num": trainer, "trainer_node_num": 1, "trainer_gpu_num_per_node": trainer}
    if trainer % per_node:
        ctx.report(
            "error",
            key,
            f"the trainer would get {trainer} devices ({total} - {explorer} for rollout{sizes}): that neither fits "
            f"one node of {per_node} nor fills whole nodes",
            allowed=f"trainer devices <= {per_node} or a multiple of {per_node}",
            hint="change the rollout size so the devices left over fit one node or fill whole nodes",
        )
        return {}
    return {"trainer_gpu_num": trainer, "trainer_node_num": trainer // per_node, "trainer_gpu_num_per_node": per_node}


def _blamed(auxiliary: int) -> tuple[str, str]:
    """The key a split that does not work is reported at, and the words that count the auxiliary engines in."""
    if not auxiliary:
        return "explorer.rollout_model.engine_num", ""
    return "explorer.auxiliary_models", f", {auxiliary} of them the auxiliary models' engines"


def _check_fits(ctx: Context, explorer: int, total: int, auxiliary: int = 0) -> None:
    if explorer > total:
        key, sizes = _blamed(auxiliary)
        more = ", or an auxiliary model's engine_num or tensor_parallel_size," if auxiliary else ""
        ctx.report(
            "error",
            key,
            f"rollout needs {explorer} devices{sizes + ',' if sizes else ''} but the cluster has {total}",
            allowed=f"<= {total}",
            hint=f"lower explorer.rollout_model.engine_num{more} or raise cluster.node_num",
        )


def _set_count(ctx: Context, name: str, value: int, inputs: tuple[str, ...]) -> None:
    key = f"cluster.{name}"
    if ctx.user_set(key) and ctx.get(key) != value:
        ctx.report(
            "error",
            key,
            f"is derived ({value}) and must not be set to {ctx.get(key)}",
            hint=f"remove {key}; set node_num, gpu_per_node or the engine sizes instead",
        )
    ctx.set(key, value, "cluster_counts", inputs)
