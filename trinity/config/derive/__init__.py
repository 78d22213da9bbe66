"""Derivation: one ordered pass of small pure rules over the validated tree, each recording provenance."""

from typing import Any

from ...errors import Issue
from ..profiles import LoadedProfile
from ..provenance import Provenance
from . import (
    algorithm,
    aliases,
    batch_size,
    buffer,
    chat_template,
    cluster,
    env,
    external,
    hardware,
    lora,
    model,
    optimizer,
    pipeline,
    replay,
    rollout,
    rollout_correction,
    runners,
    selectors,
    serve_proxy,
    storage,
    sync,
    threads,
    trainer,
    values,
)
from ._context import SYNC_KEYS as SYNC_KEYS  # what RunStage.sync holds, for resolve
from ._context import Context, RunStage

# Run in this order. Each rule declares what it reads and writes (@rule, _rule.py) and tests/config/derive/test_order.py
# refuses an order where a rule reads what a later rule writes, so a rule goes after every rule it reads from.
RULES = (
    aliases.engine_alias,
    rollout.auxiliary_engines,
    aliases.ask_ray,
    aliases.no_effect,
    aliases.sync_bucket,
    trainer.verl_twins,
    hardware.hardware_section,
    hardware.trainer_device,
    hardware.process_group_backend,
    hardware.torch_compile,
    hardware.trainer_strategy,
    hardware.dtypes,
    hardware.rollout_engines,
    values.values_not_run,
    hardware.attn_implementation,
    hardware.remove_padding,
    hardware.fused_kernels,
    hardware.fused_optimizer,
    hardware.gradient_checkpointing,
    hardware.train_stage_devices,
    cluster.gpu_per_node,
    cluster.shared_devices,
    rollout.auxiliary_models,
    rollout.sleep_mode,
    algorithm.algorithm_preset,
    optimizer.lr_scheduler,
    optimizer.gradient_clip,
    buffer.buffer_names,
    buffer.taskset_workflows,
    rollout.auto_tool_choice,
    rollout.openai_api,
    serve_proxy.serve_proxy,
    rollout.auxiliary_judges,
    runners.explorer_runners,
    buffer.taskset_repeat_times,
    batch_size.mix_batch,
    buffer.train_batch_size,
    runners.over_rollout,  # after the train batch it is checked against
    pipeline.experience_operators,
    pipeline.saved_input,
    selectors.data_selectors,
    storage.data_set_thinking,
    storage.unread_keys,
    replay.replay_buffer,
    model.model_budget,
    model.min_response,
    buffer.rollout_args,
    model.engine_top_k,
    buffer.training_temperature,
    buffer.engine_logprobs,
    buffer.batch_masked_loss,
    rollout_correction.rollout_correction,
    model.critic_model,
    chat_template.chat_template,
    model.rollout_model,
    model.rollout_budget,
    model.rope_scaling,
    lora.lora_adapter,
    lora.lora_modules,
    lora.lora_engine,
    lora.lora_base_name,
    external.external_model,
    rollout.kv_cache,
    rollout.memory_utilization,
    model.token_budget,
    cluster.cluster_counts,
    batch_size.pairs_batch,
    sync.sync_method,
    sync.sync_intervals,
    sync.fully_async,
    sync.eval_interval,
    threads.compute_threads,
    trainer.checkpoints_kept,
    trainer.trainer_config,
    trainer.critic_warmup,
    trainer.balance_batch,
    trainer.bench_on_latest,
    env.env_when,
    env.collective_timeouts,
    env.explorer_env_vars,
)


def derive(
    data: dict[str, Any],
    loaded: LoadedProfile,
    provenance: Provenance,
    selection: str = "",
    run_stages: tuple[RunStage, ...] = (),
    stage_index: int | None = None,
    driver: dict[str, str | None] | None = None,
) -> tuple[dict[str, Any], list[Issue]]:
    """The filled tree and every error, warning and note the rules raised; when resolving a stage, `run_stages` are
    every stage of its run and `stage_index` is its place among them; `driver` is the node's driver release where the
    platform's device IPC depends on it (platforms/ipc.py)."""
    ctx = Context(data, loaded, provenance, selection, run_stages, stage_index, driver)
    for rule in RULES:
        rule(ctx)
    return ctx.data, ctx.issues
