"""Rules for what the rollout engines may ask of the hardware: auxiliary engines, sleep mode, KV cache size."""

from ._context import Context

ROLLOUT = "explorer.rollout_model"


def auxiliary_models(ctx: Context) -> None:
    """explorer.auxiliary_models are refused: no workflow of this version runs them, so nothing plans or places them."""
    if ctx.get("explorer.auxiliary_models"):
        ctx.report(
            "error",
            "explorer.auxiliary_models",
            "auxiliary models (judges, reward models) are not run by this version of trinity: no workflow calls "
            "them, so their engines would hold devices and do nothing",
            allowed="[] (none)",
            hint="remove explorer.auxiliary_models; score responses in the workflow's reward function instead",
        )


def sleep_mode(ctx: Context) -> None:
    """mode colocate with vLLM needs vLLM's sleep mode (the engine frees the devices while the trainer steps)."""
    if ctx.get("mode") != "colocate" or ctx.get(f"{ROLLOUT}.engine_type") != "vllm" or ctx.facts.rollout_sleep_mode:
        return
    reason = ctx.facts.reasons.get("rollout_sleep_mode", "the hardware profile says it is missing")
    ctx.report(
        "error",
        f"{ROLLOUT}.engine_type",
        f"mode 'colocate' with engine type 'vllm' needs vLLM's sleep mode, which {ctx.loaded.name} lacks "
        f"({ctx.fact('rollout_sleep_mode')}): {reason}",
        allowed=", ".join(e for e in ctx.facts.rollout_engines if e != "vllm") or "none",
        hint=f"set {ROLLOUT}.engine_type=transformers, or mode=both",
    )


def kv_cache(ctx: Context) -> None:
    """A vLLM engine's KV cache takes the profile's explicit size where vLLM would size it wrongly from memory shares;
    another engine has no KV cache to size, so a size given to it is refused."""
    key, size, engine = f"{ROLLOUT}.kv_cache_mib", ctx.facts.rollout_kv_cache_mib, ctx.get(f"{ROLLOUT}.engine_type")
    if engine != "vllm" and ctx.get(key) is not None:
        ctx.report(
            "error",
            key,
            f"a KV cache size is vLLM's, but the engine is {engine!r}, which keeps no KV cache of a set size",
            allowed="null",
            hint=f"remove it, or set {ROLLOUT}.engine_type=vllm",
        )
        return
    if engine == "vllm" and ctx.get(key) is None and size is not None:
        ctx.set(key, size, "kv_cache", (ctx.fact("rollout_kv_cache_mib"), ctx.input(f"{ROLLOUT}.engine_type")))


def memory_utilization(ctx: Context) -> None:
    """A gpu_memory_utilization above what starts vLLM on this hardware is reported with the reason."""
    key, ceiling = f"{ROLLOUT}.gpu_memory_utilization", ctx.facts.max_gpu_memory_utilization
    value = ctx.get(key)
    if ctx.get(f"{ROLLOUT}.engine_type") != "vllm" or not ctx.user_set(key) or value <= ceiling:
        return
    reason = ctx.facts.reasons.get("max_gpu_memory_utilization", "")
    size = ctx.get(f"{ROLLOUT}.kv_cache_mib")
    sized = f" (the KV cache is sized by {ROLLOUT}.kv_cache_mib={size} here)" if size else ""
    ctx.report(
        "warning",
        key,
        f"{value} is above {ceiling}, the most {ctx.loaded.name} allows ({ctx.fact('max_gpu_memory_utilization')})"
        + (f": {reason}" if reason else ""),
        allowed=f"<= {ceiling}",
        hint=f"set {key} to at most {ceiling}, or remove it{sized}",
    )
