"""verl's `actor_rollout_ref` config, built from our resolved config and validated by verl's own dataclasses.

Every trainer knob comes from the ResolvedConfig: strategy, device, torch.compile, attention,
dtype, offload, batch and token budgets, the optimizer and schedule, and the algorithm's loss
functions with their arguments. verl's defaults fill the rest. A value verl rejects becomes a
ConfigError in our format before any trainer starts.
"""

import os
from typing import Any

from ...config.errors import ConfigError, Issue

VERL_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
KL_TYPES = {"k1": "k1", "k2": "k2", "k3": "k3", "low_var_kl": "low_var_kl", "abs": "abs", "mse": "mse"}


def overrides(config: Any, model_path: str, total_steps: int) -> list[str]:
    """Hydra overrides of verl's `ppo_trainer` config for the trainer of `config`."""
    trainer, algo, optim = config.trainer, config.algorithm, config.algorithm.optimizer
    policy = algo.policy_loss_fn_args or {}
    clip = policy.get("clip_range", 0.2)
    kl_on = algo.kl_loss_fn not in (None, "none")
    tokens = trainer.max_token_len_per_gpu or 16384  # verl's default when no max_model_len says otherwise
    dtype = VERL_DTYPE[trainer.param_dtype]
    actor = "actor_rollout_ref.actor"
    out = {
        "trainer.device": trainer.device,
        "actor_rollout_ref.model.path": model_path,
        "actor_rollout_ref.model.use_remove_padding": True,
        "actor_rollout_ref.model.enable_gradient_checkpointing": trainer.enable_gradient_checkpointing,
        "+actor_rollout_ref.model.override_config.attn_implementation": trainer.attn_implementation,
        f"{actor}.strategy": trainer.trainer_strategy,
        "actor_rollout_ref.ref.strategy": trainer.trainer_strategy,
        f"{actor}.use_torch_compile": trainer.use_torch_compile,
        f"{actor}.fsdp_config.use_torch_compile": trainer.use_torch_compile,
        "actor_rollout_ref.ref.use_torch_compile": trainer.use_torch_compile,
        "actor_rollout_ref.ref.fsdp_config.use_torch_compile": trainer.use_torch_compile,
        f"{actor}.fsdp_config.param_offload": trainer.param_offload,
        f"{actor}.fsdp_config.optimizer_offload": trainer.optimizer_offload,
        f"{actor}.fsdp_config.model_dtype": "fp32",
        f"+{actor}.fsdp_config.mixed_precision": f"{{param_dtype: {dtype}, reduce_dtype: fp32, buffer_dtype: fp32}}",
        "+actor_rollout_ref.ref.fsdp_config.mixed_precision": f"{{param_dtype: {dtype}, reduce_dtype: fp32, buffer_dtype: fp32}}",
        f"{actor}.ulysses_sequence_parallel_size": trainer.ulysses_sequence_parallel_size,
        f"{actor}.ppo_mini_batch_size": config.buffer.train_batch_size,
        f"{actor}.use_dynamic_bsz": trainer.use_dynamic_bsz,
        f"{actor}.ppo_max_token_len_per_gpu": tokens,
        f"{actor}.ppo_micro_batch_size_per_gpu": config.buffer.train_batch_size,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": trainer.use_dynamic_bsz,
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": tokens,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": config.buffer.train_batch_size,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": config.buffer.train_batch_size,
        "actor_rollout_ref.rollout.name": "hf",  # verl needs a name; our engines do the rollout
        f"{actor}.grad_clip": trainer.grad_clip,
        f"{actor}.optim.lr": optim.lr,
        f"{actor}.optim.weight_decay": optim.weight_decay,
        f"{actor}.optim.betas": f"[{optim.betas[0]},{optim.betas[1]}]",
        f"{actor}.optim.lr_warmup_steps": optim.lr_warmup_steps,
        f"{actor}.optim.lr_warmup_steps_ratio": optim.lr_warmup_steps_ratio,
        f"{actor}.optim.min_lr_ratio": optim.min_lr_ratio if optim.min_lr_ratio is not None else 0.0,
        f"{actor}.optim.lr_scheduler_type": optim.warmup_style,
        f"{actor}.optim.total_training_steps": total_steps,
        f"{actor}.optim.clip_grad": trainer.grad_clip,
        f"{actor}.policy_loss.loss_mode": "vanilla",
        f"{actor}.clip_ratio": clip,
        f"{actor}.clip_ratio_low": policy.get("clip_range_low") or clip,
        f"{actor}.clip_ratio_high": policy.get("clip_range_high") or clip,
        f"{actor}.loss_agg_mode": algo.loss_agg_mode or "token-mean",
        f"{actor}.entropy_coeff": (algo.entropy_loss_fn_args or {}).get("entropy_coef", 0.0) if algo.entropy_loss_fn != "none" else 0.0,
        f"{actor}.use_kl_loss": kl_on,
        f"{actor}.kl_loss_coef": (algo.kl_loss_fn_args or {}).get("kl_coef", 0.0) if kl_on else 0.0,
        f"{actor}.kl_loss_type": KL_TYPES.get(algo.kl_loss_fn, "low_var_kl"),
        f"{actor}.ppo_epochs": 1,
        f"{actor}.shuffle": False,
        f"{actor}.data_loader_seed": config.explorer.rollout_model.seed,
        f"{actor}.fsdp_config.seed": config.explorer.rollout_model.seed,
    }
    return [f"{key}={_hydra(value)}" for key, value in out.items()]


def _hydra(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build(config: Any, model_path: str, total_steps: int) -> Any:
    """verl's `actor_rollout_ref` DictConfig, after verl's dataclasses accepted its actor section."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import verl

    folder = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    saved = GlobalHydra.instance().hydra if GlobalHydra.instance().is_initialized() else None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=folder, version_base=None):
            composed = compose("ppo_trainer", overrides=overrides(config, model_path, total_steps))
    finally:
        GlobalHydra.instance().clear()
        if saved is not None:
            GlobalHydra.instance().initialize(saved)
    _validate(composed.actor_rollout_ref)
    return composed.actor_rollout_ref


def _validate(section: Any) -> None:
    from hydra.errors import InstantiationException
    from verl.utils.config import omega_conf_to_dataclass

    try:
        omega_conf_to_dataclass(section.actor)
    except (ValueError, AssertionError, TypeError, InstantiationException) as exc:
        cause = exc.__cause__ or exc
        reason = str(cause).strip().splitlines()[0] if str(cause).strip() else f"{type(cause).__name__} in {str(exc).splitlines()[0]}"
        raise ConfigError(
            [Issue(f"verl rejected the trainer configuration built from this run config: {reason}", key="trainer", source="verl's FSDPActorConfig", hint="check trainer.* and algorithm.*; the values verl received are in the run's logs/trainer_node*.log")]
        ) from None
