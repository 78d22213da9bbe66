"""Trinity-RFT's spellings that mean one of trinity's values: mapped with a note, never refused (DESIGN.md section 7).

- `explorer.rollout_model.engine_type: vllm_async` is `vllm` (engines.ALIASES);
- `cluster.gpu_per_node: 0` and `cluster.node_num: 0`, upstream's "ask Ray", are trinity's unset (ASK_RAY);
- keys upstream reads nowhere, or that name what trinity always does, change nothing: a note says so (NO_EFFECT);
- `explorer.rollout_model.weight_sync_buffer_size` is `synchronizer.sync_bucket_mib` (sync_bucket).
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
    "explorer.rollout_model.use_v1": "vLLM's V1 engine is the only engine of the vLLM releases trinity runs (vLLM 0.11 "
    "removed V0); Trinity-RFT's true sets up that engine, which trinity always runs",
    "explorer.runner_num": "deprecated in Trinity-RFT, which warns and ignores it (explorer/scheduler.py): runners are "
    "explorer.rollout_model.engine_num x explorer.runner_per_model",
    "explorer.runner_prepare_concurrency": "Trinity-RFT caps how many runner actors start at once "
    "(explorer/scheduler.py); trinity's runners are threads of the explorer, with nothing to start",
    "explorer.runner_prepare_max_retries": "Trinity-RFT retries a runner actor's start (explorer/scheduler.py); "
    "trinity's runners are threads of the explorer, with nothing to start",
    "trainer.grad_offload": "Trinity-RFT passes it to its Megatron engine only (trainer/verl/config.py); verl's FSDP "
    "engine, which trains here as it does there with FSDP, has no gradient offload (param_offload and "
    "optimizer_offload do offload)",
    "trainer.fix_actor_microbatch_loss_scale": "Trinity-RFT reads it in its legacy verl actor only (verl < 0.8: "
    "verl_legacy/dp_actor.py), to scale token-mean by the whole mini-batch's tokens; verl 0.9.1's engine, which trains "
    "here, always does (verl/workers/engine/fsdp/transformer_impl.py batch_num_tokens, core_algos.agg_loss)",
}
BUCKET, BUFFER = "synchronizer.sync_bucket_mib", "explorer.rollout_model.weight_sync_buffer_size"


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


@rule(reads=(BUCKET, BUFFER), writes=(BUCKET, BUFFER))
def sync_bucket(ctx: Context) -> None:
    """Trinity-RFT's weight_sync_buffer_size (MB, its weight sync's batching buffer) is synchronizer.sync_bucket_mib:
    written, it sets that (both written and differing is an error); unset, it shows that value."""
    if not ctx.user_set(BUFFER):
        ctx.set(BUFFER, ctx.get(BUCKET), "sync_bucket", (ctx.input(BUCKET),))
    elif ctx.user_set(BUCKET) and ctx.get(BUCKET) != ctx.get(BUFFER):
        ctx.report(
            "error",
            BUFFER,
            f"{ctx.get(BUFFER)} MiB and {BUCKET}={ctx.get(BUCKET)} ({ctx.where(BUCKET)}) name one size, the largest "
            "piece of weights a sync moves, differently",
            allowed=str(ctx.get(BUCKET)),
            hint=f"remove one of them ({BUFFER} is Trinity-RFT's name of {BUCKET})",
        )
    else:
        ctx.report(
            "note",
            BUFFER,
            f"Trinity-RFT's name of {BUCKET}, the largest piece of weights a sync moves: {ctx.get(BUFFER)} MiB",
            hint=f"write {BUCKET}: {ctx.get(BUFFER)}",
        )
        ctx.set(BUCKET, ctx.get(BUFFER), "sync_bucket", (ctx.input(BUFFER),))
