"""verl's `actor_rollout_ref` config, built from our resolved config and validated by verl's own dataclasses.

Every trainer knob comes from the ResolvedConfig: strategy, device, torch.compile, attention,
dtype, offload, batch and token budgets, the optimizer and schedule, and the algorithm's loss
functions with their arguments. `trainer.trainer_config` (Trinity-RFT's verl passthrough) is merged
over that, except the keys trinity sets itself, and verl's dataclasses check every section it
touches. verl's defaults fill the rest. A value verl rejects becomes a ConfigError in our format
before any trainer starts.
"""

import os
from typing import Any

from ...config import engines
from ...config.algorithms.losses import POLICY_LOSSES
from ...config.schema import RunConfig
from ...config.schema.model import module_names
from ...errors import ConfigError, Issue

VERL_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
KL_TYPES = {"k1": "k1", "k2": "k2", "k3": "k3", "low_var_kl": "low_var_kl", "abs": "abs", "mse": "mse"}
OPTIMIZERS = {"adam": "AdamW", "adamw": "AdamW", "sgd": "SGD"}  # Trinity-RFT's names for verl's FSDP optimizer
PASSTHROUGH = "trainer.trainer_config"
LORA_KEYS = {
    f"model.{key}": "model.lora_configs"
    for key in ("lora_rank", "lora_alpha", "target_modules", "exclude_modules", "lora_adapter_path", "lora")
}
FUSED_KEY = "optim.override_optimizer_config.fused"  # trinity.fused_optimizer's, set or not
SECTIONS = ("model", "actor", "ref", "rollout")
CRITIC = "critic"  # verl's critic section: trainer_config.critic, for an algorithm that trains a critic
TRAINED = ("actor", CRITIC)  # the sections with an optimizer verl builds (the ref's optim is a stub)
ARR = "actor_rollout_ref"


def overrides(config: RunConfig, model_path: str, total_steps: int, adapter: str | None = None) -> list[str]:
    """Hydra overrides of verl's `ppo_trainer` config for the trainer of `config`."""
    settings = _settings(config, model_path, total_steps, adapter, None)
    return [f"{key}={_hydra(value)}" for key, (value, _) in settings.items()]


def _settings(
    config: RunConfig, model_path: str, total_steps: int, adapter: str | None = None, hf_config: str | None = None
) -> dict[str, tuple[Any, str]]:
    """verl key -> (value, the trinity key it comes from); `hf_config`: a folder of the model's config as the run
    changes it (weights/model_config.py), None where it changes nothing."""
    trainer, algo, optim = config.trainer, config.algorithm, config.algorithm.optimizer
    kl_on = algo.kl_loss_fn not in (None, "none")
    tokens, precision = _tokens(trainer), _precision(trainer)
    batch, seed, actor = config.buffer.train_batch_size, config.explorer.rollout_model.seed, f"{ARR}.actor"
    shard = _shard(config)
    out = {
        "trainer.device": (trainer.device, "trainer.device"),
        **_model(config, f"{ARR}.model", model_path, "model.model_path", hf_config),
        f"{ARR}.model.use_fused_kernels": (trainer.use_fused_kernels, "trainer.use_fused_kernels"),
        # verl needs a name; our engines do the rollout (the engine's entry says which name)
        f"{ARR}.rollout.name": (
            engines.engine(config.explorer.rollout_model.engine_type).verl_name,
            "explorer.rollout_model.engine_type",
        ),
        f"{ARR}.rollout.log_prob_use_dynamic_bsz": (trainer.use_dynamic_bsz, "trainer.use_dynamic_bsz"),
        f"{ARR}.rollout.log_prob_max_token_len_per_gpu": (tokens, "trainer.max_token_len_per_gpu"),
        f"{ARR}.rollout.log_prob_micro_batch_size_per_gpu": (shard, "buffer.train_batch_size"),
        f"{ARR}.ref.log_prob_micro_batch_size_per_gpu": (shard, "buffer.train_batch_size"),
        f"+{ARR}.ref.fsdp_config.mixed_precision": (precision, "trainer.param_dtype"),
        # full fine-tuning keeps fp32 master weights; LoRA's frozen base stays in the training dtype and its adapter,
        # which the rank hands verl as a folder (runtime/weights/lora.py initial_adapter), in fp32
        f"{actor}.fsdp_config.model_dtype": (
            VERL_DTYPE[trainer.param_dtype] if config.model.lora_configs else "fp32",
            "trainer.param_dtype",
        ),
        f"+{actor}.fsdp_config.mixed_precision": (precision, "trainer.param_dtype"),
        f"{actor}.fsdp_config.param_offload": (trainer.param_offload, "trainer.param_offload"),
        f"{actor}.fsdp_config.optimizer_offload": (trainer.optimizer_offload, "trainer.optimizer_offload"),
        f"{actor}.fsdp_config.offload_policy": (trainer.offload_policy, "trainer.offload_policy"),
        f"{actor}.fsdp_config.seed": (seed, "explorer.rollout_model.seed"),
        f"{actor}.ulysses_sequence_parallel_size": (
            trainer.ulysses_sequence_parallel_size,
            "trainer.ulysses_sequence_parallel_size",
        ),
        f"{actor}.ppo_mini_batch_size": (batch, "buffer.train_batch_size"),
        f"{actor}.ppo_micro_batch_size_per_gpu": (shard, "buffer.train_batch_size"),
        f"{actor}.use_dynamic_bsz": (trainer.use_dynamic_bsz, "trainer.use_dynamic_bsz"),
        f"{actor}.ppo_max_token_len_per_gpu": (tokens, "trainer.max_token_len_per_gpu"),
        f"{actor}.grad_clip": (trainer.grad_clip, "trainer.grad_clip"),
        f"{actor}.ppo_epochs": (1, "the runtime (one update per batch)"),
        f"{actor}.shuffle": (False, "the runtime (one update per batch)"),
        f"{actor}.data_loader_seed": (seed, "explorer.rollout_model.seed"),
        **_compile(trainer),
        **_optimizer(optim, total_steps),
        **_fused_optimizer(trainer, actor),
        **_losses(algo, kl_on),
        **_lora(config, adapter),
    }
    return out


def _model(config: RunConfig, prefix: str, path: str, source: str, hf_config: str | None) -> dict[str, tuple[Any, str]]:
    """verl's model section at `prefix` (the actor's or the critic's): where it starts, its config (`hf_config`, a
    folder of it as the run changes it, else the model's own), how it is run."""
    trainer = config.trainer
    changed = {f"{prefix}.hf_config_path": (hf_config, "model.rope_scaling, model.rope_theta")} if hf_config else {}
    return changed | {
        f"{prefix}.path": (path, source),
        f"{prefix}.trust_remote_code": (config.model.trust_remote_code, "model.trust_remote_code"),
        f"{prefix}.use_remove_padding": (trainer.use_remove_padding, "trainer.use_remove_padding"),
        f"{prefix}.enable_gradient_checkpointing": (
            trainer.enable_gradient_checkpointing,
            "trainer.enable_gradient_checkpointing",
        ),
        f"+{prefix}.override_config.attn_implementation": (trainer.attn_implementation, "trainer.attn_implementation"),
    }


def _tokens(trainer: Any) -> int:
    """A micro-batch's token budget per device: verl's default when no max_model_len says otherwise."""
    return trainer.max_token_len_per_gpu or 16384


def _precision(trainer: Any) -> str:
    """FSDP mixed precision: parameters in the training dtype, reductions and buffers in fp32."""
    return f"{{param_dtype: {VERL_DTYPE[trainer.param_dtype]}, reduce_dtype: fp32, buffer_dtype: fp32}}"


def _shard(config: RunConfig) -> int:
    """Experiences one trainer rank takes a step: with token-balanced micro-batches off, one micro-batch of them."""
    return max(1, config.buffer.train_batch_size // (config.cluster.trainer_gpu_num or 1))


def _lora(config: RunConfig, adapter: str | None) -> dict[str, tuple[Any, str]]:
    """verl's peft path in the FSDP engine: the adapter's shape, and the adapter folder it goes on training."""
    from ..weights.lora import adapter_of, target_modules

    lora, model, key = adapter_of(config), f"{ARR}.model", "model.lora_configs[0]"
    if lora is None:
        return {}
    targets = target_modules(lora)
    excluded = module_names(lora.exclude_modules)
    out = {
        f"{model}.lora_rank": (lora.lora_rank, f"{key}.lora_rank"),
        f"{model}.lora_alpha": (lora.lora_alpha, f"{key}.lora_alpha"),
        f"{model}.target_modules": (targets if isinstance(targets, str) else f"[{','.join(targets)}]", key),
        f"{model}.exclude_modules": (f"[{','.join(excluded)}]" if excluded else "null", f"{key}.exclude_modules"),
    }
    if adapter is not None:
        out[f"{model}.lora_adapter_path"] = (adapter, f"{key}.path")
    return out


def _compile(trainer: Any) -> dict[str, tuple[Any, str]]:
    keys = ("actor.strategy", "ref.strategy")
    out = {f"{ARR}.{key}": (trainer.trainer_strategy, "trainer.trainer_strategy") for key in keys}
    compiled = (
        "actor.use_torch_compile",
        "actor.fsdp_config.use_torch_compile",
        "ref.use_torch_compile",
        "ref.fsdp_config.use_torch_compile",
    )
    return out | {f"{ARR}.{key}": (trainer.use_torch_compile, "trainer.use_torch_compile") for key in compiled}


def _optimizer(optim: Any, total_steps: int) -> dict[str, tuple[Any, str]]:
    prefix, source = f"{ARR}.actor.optim", "algorithm.optimizer"
    values = {
        "lr": optim.lr,
        "weight_decay": optim.weight_decay,
        "betas": f"[{optim.betas[0]},{optim.betas[1]}]",
        "lr_warmup_steps": optim.lr_warmup_steps,
        "lr_warmup_steps_ratio": optim.lr_warmup_steps_ratio,
        "min_lr_ratio": optim.min_lr_ratio,
        "lr_scheduler_type": optim.lr_scheduler_type,
        "optimizer": OPTIMIZERS[optim.optimizer_type],
        "clip_grad": optim.clip_grad,
    }
    out = {f"{prefix}.{key}": (value, f"{source}.{key}") for key, value in values.items()}
    out[f"{prefix}.optimizer"] = (values["optimizer"], f"{source}.optimizer_type")
    return out | {f"{prefix}.total_training_steps": (total_steps, "trainer.total_steps")}


def _fused_optimizer(trainer: Any, prefix: str) -> dict[str, tuple[Any, str]]:
    """torch's `fused=True` for the optimizer at `prefix` where asked; otherwise nothing: torch's own choice (an
    explicit False would also turn off the foreach step torch picks on GPUs, and an optimizer_impl without `fused`
    would refuse even None). The key is trinity's either way (FUSED_KEY)."""
    return {f"+{prefix}.{FUSED_KEY}": (True, "trainer.fused_optimizer")} if trainer.fused_optimizer else {}


def _losses(algo: Any, kl_on: bool) -> dict[str, tuple[Any, str]]:
    policy, actor = algo.policy_loss_fn_args or {}, f"{ARR}.actor"
    clip = policy.get("clip_range")
    low = policy.get("clip_range_low") if policy.get("clip_range_low") is not None else clip
    high = policy.get("clip_range_high") if policy.get("clip_range_high") is not None else clip
    entropy = (algo.entropy_loss_fn_args or {}).get("entropy_coef", 0.0) if algo.entropy_loss_fn != "none" else 0.0
    args = "algorithm.policy_loss_fn_args"
    # the entry's name in verl's policy-loss registry; an SFT loss has none (the rank sets verl's sft_loss, which
    # reads no mode), so verl's default stands there
    mode = POLICY_LOSSES[algo.policy_loss_fn].loss_mode or "vanilla"
    return {
        f"{actor}.policy_loss.loss_mode": (mode, "algorithm.policy_loss_fn"),
        f"{actor}.clip_ratio": (clip if clip is not None else low or 0.2, f"{args}.clip_range"),
        f"{actor}.clip_ratio_low": (low or 0.2, f"{args}.clip_range_low"),
        f"{actor}.clip_ratio_high": (high or 0.2, f"{args}.clip_range_high"),
        f"{actor}.clip_ratio_c": (policy.get("clip_ratio_c", 3.0), f"{args}.clip_ratio_c"),
        f"{actor}.loss_agg_mode": (algo.loss_agg_mode or "token-mean", "algorithm.loss_agg_mode"),
        f"{actor}.entropy_coeff": (entropy, "algorithm.entropy_loss_fn_args.entropy_coef"),
        f"{actor}.use_kl_loss": (kl_on, "algorithm.kl_loss_fn"),
        f"{actor}.kl_loss_coef": (
            (algo.kl_loss_fn_args or {}).get("kl_coef", 0.0) if kl_on else 0.0,
            "algorithm.kl_loss_fn_args.kl_coef",
        ),
        f"{actor}.kl_loss_type": (KL_TYPES.get(algo.kl_loss_fn, "low_var_kl"), "algorithm.kl_loss_fn"),
    }


def _hydra(value: Any) -> str:
    if value is None:  # a null the user wrote (clip_ratio_c: null) reaches verl as null, not the string 'None'
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build(
    config: RunConfig, model_path: str, total_steps: int, adapter: str | None = None, hf_config: str | None = None
) -> Any:
    """verl's `actor_rollout_ref` DictConfig with the passthrough merged, after verl's dataclasses accepted it."""
    settings = _settings(config, model_path, total_steps, adapter, hf_config)
    composed = _compose(settings)
    touched = _merge_passthrough(composed.actor_rollout_ref, config.trainer.trainer_config, settings)
    _validate(composed.actor_rollout_ref, touched)
    return composed.actor_rollout_ref


def build_critic(config: RunConfig, model_path: str, total_steps: int, hf_config: str | None = None) -> Any:
    """verl's `critic` section (FSDPCriticConfig, validated) for a value model started from `model_path`, with
    trainer_config.critic merged over what trinity does not set itself."""
    from omegaconf import OmegaConf, open_dict

    settings = _critic_settings(config, model_path, total_steps, hf_config)
    composed = _compose(settings)
    passed = config.trainer.trainer_config.get(CRITIC) or {}
    ours = {f"{CRITIC}.{FUSED_KEY}": "trainer.fused_optimizer"} | {k.lstrip("+"): s for k, (_, s) in settings.items()}
    clashes = [_clash(p, s, p) for p in (f"{CRITIC}.{leaf}" for leaf in _leaves(passed)) if (s := _owner(p, ours))]
    if clashes:
        raise ConfigError(clashes)
    with open_dict(composed):
        composed[CRITIC] = OmegaConf.merge(composed[CRITIC], passed)
    issue = _refusal(composed, CRITIC, bool(passed))
    if issue is not None:
        raise ConfigError([issue])
    return composed[CRITIC]


def _critic_settings(
    config: RunConfig, model_path: str, total_steps: int, hf_config: str | None = None
) -> dict[str, tuple[Any, str]]:
    """verl key -> (value, the trinity key it comes from), for the critic: the actor's engine and budgets, verl's
    (and Trinity-RFT's) critic optimizer defaults with the run's total steps."""
    trainer, batch, critic = config.trainer, config.buffer.train_batch_size, CRITIC
    precision, tokens = _precision(trainer), _tokens(trainer)
    return {
        "trainer.device": (trainer.device, "trainer.device"),
        f"{critic}.strategy": (trainer.trainer_strategy, "trainer.trainer_strategy"),
        **_model(config, f"{critic}.model", model_path, "model.critic_model_path", hf_config),
        f"{critic}.ppo_mini_batch_size": (batch, "buffer.train_batch_size"),
        f"{critic}.ppo_micro_batch_size_per_gpu": (_shard(config), "buffer.train_batch_size"),
        f"{critic}.use_dynamic_bsz": (trainer.use_dynamic_bsz, "trainer.use_dynamic_bsz"),
        f"{critic}.ppo_max_token_len_per_gpu": (tokens, "trainer.max_token_len_per_gpu"),
        f"+{critic}.ppo_infer_max_token_len_per_gpu": (tokens, "trainer.max_token_len_per_gpu"),
        f"{critic}.ppo_epochs": (1, "the runtime (one update per batch)"),
        f"{critic}.shuffle": (False, "the runtime (one update per batch)"),
        f"{critic}.data_loader_seed": (config.explorer.rollout_model.seed, "explorer.rollout_model.seed"),
        f"{critic}.rollout_n": (1, "the runtime (the trainer's batch counts every rollout)"),
        f"{critic}.grad_clip": (trainer.grad_clip, "trainer.grad_clip"),
        f"{critic}.ulysses_sequence_parallel_size": (
            trainer.ulysses_sequence_parallel_size,
            "trainer.ulysses_sequence_parallel_size",
        ),
        f"{critic}.fsdp.model_dtype": ("fp32", "trainer.param_dtype"),
        f"+{critic}.fsdp.mixed_precision": (precision, "trainer.param_dtype"),
        f"{critic}.fsdp.param_offload": (trainer.param_offload, "trainer.param_offload"),
        f"{critic}.fsdp.optimizer_offload": (trainer.optimizer_offload, "trainer.optimizer_offload"),
        f"{critic}.fsdp.offload_policy": (trainer.offload_policy, "trainer.offload_policy"),
        f"{critic}.fsdp.seed": (config.explorer.rollout_model.seed, "explorer.rollout_model.seed"),
        f"{critic}.fsdp.use_torch_compile": (trainer.use_torch_compile, "trainer.use_torch_compile"),
        f"{critic}.optim.total_training_steps": (total_steps, "trainer.total_steps"),
        **_fused_optimizer(trainer, critic),
    }


SETTINGS = {build: _settings, build_critic: _critic_settings}  # builder -> what it composes verl's config from


def _compose(settings: dict[str, tuple[Any, str]]) -> Any:
    """verl's `ppo_trainer` config composed with `settings` as Hydra overrides (Hydra's global state restored)."""
    import verl
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    folder = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    saved = GlobalHydra.instance().hydra if GlobalHydra.instance().is_initialized() else None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=folder, version_base=None):
            return compose("ppo_trainer", overrides=[f"{key}={_hydra(value)}" for key, (value, _) in settings.items()])
    finally:
        GlobalHydra.instance().clear()
        if saved is not None:
            GlobalHydra.instance().initialize(saved)


def passthrough_sections(trainer_config: dict) -> dict[str, dict]:
    """trainer_config's verl sections, flat (actor: ...) or under actor_rollout_ref, as Trinity-RFT reads them."""
    sections = {k: v for k, v in (trainer_config.get(ARR) or {}).items() if k in SECTIONS}
    return sections | {k: v for k, v in trainer_config.items() if k in SECTIONS}


def _merge_passthrough(section: Any, trainer_config: dict, settings: dict[str, tuple[Any, str]]) -> set[str]:
    """Merge the passthrough into verl's config; a key trinity sets from the run config is an error naming that key."""
    from omegaconf import OmegaConf, open_dict

    sections = passthrough_sections(trainer_config)
    ours = {key.lstrip("+").removeprefix(f"{ARR}."): source for key, (_, source) in settings.items()}
    # trinity's, set or not: a LoRA that trinity does not know of would not sync; a fused flag would be left unread
    ours = LORA_KEYS | {f"actor.{FUSED_KEY}": "trainer.fused_optimizer"} | ours
    owned = [(path, _owner(path, ours)) for path in _leaves(sections)]
    clashes = [_clash(f"{ARR}.{path}", source, _written(trainer_config, path)) for path, source in owned if source]
    if clashes:
        raise ConfigError(clashes)
    with open_dict(section):
        for name, values in sections.items():
            section[name] = OmegaConf.merge(section[name], values)
    return set(sections)


def _owner(path: str, ours: dict[str, str]) -> str | None:
    """The trinity key that sets verl's `path`, a section holding it, or a key inside it (a passthrough leaf that is
    a section trinity writes into, set to null or a scalar, would drop trinity's value). None: the passthrough may."""
    parts = path.split(".")
    held = (ours[k] for k in (".".join(parts[:n]) for n in range(len(parts), 0, -1)) if k in ours)
    inside = (source for key, source in ours.items() if key.startswith(f"{path}."))
    return next(held, None) or next(inside, None)


def _leaves(tree: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        out += _leaves(value, path) if isinstance(value, dict) and value else [path]
    return out


def _written(trainer_config: dict, path: str) -> str:
    """The key as the user wrote it: flat, or under actor_rollout_ref."""
    return path if path.split(".")[0] in trainer_config else f"{ARR}.{path}"


def _clash(verl_key: str, source: str, written: str) -> Issue:
    return Issue(
        f"verl's {verl_key} is set by trinity from {source}",
        key=f"{PASSTHROUGH}.{written}",
        source="the run config",
        hint=f"set {source} instead, and remove {PASSTHROUGH}.{written}",
    )


def _validate(section: Any, touched: set[str] = frozenset()) -> None:
    """The actor and every section the passthrough touched through verl's dataclass; each refusal is an Issue."""
    names = ("actor", *sorted(touched - {"actor"}))
    issues = [issue for name in names if (issue := _refusal(section, name, name in touched)) is not None]
    if issues:
        raise ConfigError(issues)


def _as_verl_reads(section: Any, name: str) -> Any:
    """A section as verl's worker converts it: the ref's log-prob keys become actor keys first
    (engine_workers.init_model)."""
    if name != "ref":
        return section[name]
    from omegaconf import OmegaConf, open_dict

    ref = OmegaConf.create(OmegaConf.to_container(section.ref))
    with open_dict(ref):
        ref.ppo_mini_batch_size = section.actor.ppo_mini_batch_size
        for old, new in (
            ("log_prob_micro_batch_size", "ppo_micro_batch_size"),
            ("log_prob_micro_batch_size_per_gpu", "ppo_micro_batch_size_per_gpu"),
            ("log_prob_use_dynamic_bsz", "use_dynamic_bsz"),
            ("log_prob_max_token_len_per_gpu", "ppo_max_token_len_per_gpu"),
        ):
            ref[new] = ref.pop(old, None)
    return ref


def _build_optimizer(optim: Any) -> None:
    """Build a trained section's optimizer on one parameter, as verl's engine will: torch refuses arguments it cannot
    take together (`fused` with `foreach`) only then. An optimizer package missing here is left to the trainer's
    node."""
    import torch
    from verl.workers.config.optimizer import build_optimizer

    try:
        build_optimizer([torch.nn.Parameter(torch.zeros(1))], optim)
    except ImportError:
        return


def _refusal(section: Any, name: str, touched: bool) -> Any:
    from hydra.errors import InstantiationException
    from omegaconf.errors import OmegaConfBaseException
    from verl.utils.config import omega_conf_to_dataclass

    try:
        converted = omega_conf_to_dataclass(_as_verl_reads(section, name))
        if name in TRAINED:
            _build_optimizer(converted.optim)
    except (
        ValueError,
        AssertionError,
        TypeError,
        RuntimeError,
        AttributeError,  # an optimizer name its optimizer_impl module lacks
        InstantiationException,
        OmegaConfBaseException,
    ) as exc:
        cause = exc.__cause__ or exc
        reason = (
            str(cause).strip().splitlines()[0]
            if str(cause).strip()
            else f"{type(cause).__name__} in {str(exc).splitlines()[0]}"
        )
        target = section[name].get("_target_", name).rsplit(".", 1)[-1]
        return Issue(
            f"verl rejected the trainer configuration built from this run config: {reason}",
            key=f"{PASSTHROUGH}.{name}" if touched else "trainer",
            source=f"verl's {target}",
            hint=f"check trainer.*, algorithm.* and {PASSTHROUGH}; the values verl received are in the run's "
            "logs/trainer_node*.log",
        )
    return None
