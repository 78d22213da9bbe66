"""Trinity-RFT's spellings that mean one of trinity's values: mapped with a note, never refused (DESIGN.md section 7).

- `explorer.rollout_model.engine_type: vllm_async` is `vllm` (engines.ALIASES);
- `cluster.gpu_per_node: 0` and `cluster.node_num: 0`, upstream's "ask Ray", are trinity's unset (ASK_RAY);
- keys upstream reads nowhere, or that name what trinity always does, change nothing: a note says so (NO_EFFECT).
"""

from .. import engines
from ._context import Context
from ._rule import rule

ENGINE = "explorer.rollout_model.engine_type"
# key -> (trinity's unset, what it means): Trinity-RFT's 0 asks Ray for the alive nodes and the first node's GPUs
# (common/config_validator.py: _set_cluster_info); trinity plans before Ray starts
ASK_RAY = {
    "cluster.gpu_per_node": (
        None,
        "the profile's devices_per_node, or on the run path what the Ray cluster's nodes offer (cluster.node_devices)",
    ),
    "cluster.node_num": (1, "one node unless told: trinity plans the run before Ray starts; set the number you use"),
}
# key -> why a value set there changes nothing (upstream reads it nowhere, or it names what trinity always does)
NO_EFFECT = {
    "explorer.rollout_model.enable_history": "trinity records every call a workflow makes through its model client "
    "(self.model.recorded_calls(client) returns the OpenAI endpoint's), whatever it says; Trinity-RFT's step-wise "
    "workflows need it on, and here it always is",
    "synchronizer.wait_for_checkpoint": "Trinity-RFT reads it nowhere (a TODO in its SynchronizerConfig), and "
    "neither does trinity: a checkpoint sync always loads the trainer's finished checkpoint",
}


@rule(reads=(ENGINE,), writes=(ENGINE,))
def engine_alias(ctx: Context) -> None:
    """A Trinity-RFT name of an engine (engines.ALIASES) becomes that engine, with a note."""
    written = ctx.get(ENGINE)
    if written not in engines.ALIASES:
        return
    name, why = engines.ALIASES[written]
    ctx.report("note", ENGINE, f"{written!r} is {why}: engine {name!r}", hint=f"write {ENGINE}: {name}")
    ctx.set(ENGINE, name, "engine_alias", (ctx.input(ENGINE),))


@rule(writes=tuple(ASK_RAY), before=tuple(ASK_RAY))
def ask_ray(ctx: Context) -> None:
    """Trinity-RFT's 0 ("ask Ray") in cluster.gpu_per_node or node_num is trinity's unset, with a note."""
    for key, (unset, meaning) in ASK_RAY.items():
        if ctx.get(key) != 0:
            continue
        ctx.report("note", key, f"0 asks Ray in Trinity-RFT; here it is unset: {meaning}", hint=f"remove {key}")
        ctx.set(key, unset, "ask_ray", (ctx.input(key),))


@rule(reads=tuple(NO_EFFECT))
def no_effect(ctx: Context) -> None:
    """A key of NO_EFFECT that a person set gets a note saying why it changes nothing."""
    for key, why in NO_EFFECT.items():
        if ctx.user_set(key):
            ctx.report("note", key, f"changes nothing: {why}", hint=f"remove {key}")
