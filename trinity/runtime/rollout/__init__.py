"""Rollout engines by `engine_type`, imported only when a run uses them."""

import importlib

ENGINES = {
    "transformers": "trinity.runtime.rollout.transformers_engine:TransformersEngine",
    "vllm": "trinity.runtime.rollout.vllm_engine:VllmEngine",
}


def engine_class(engine_type: str) -> type:
    """The engine class of `engine_type`, or a ValueError naming the ones this version has."""
    if engine_type not in ENGINES:
        raise ValueError(
            f"engine_type {engine_type!r} has no engine in this version of trinity (engines: {', '.join(ENGINES)})"
        )
    module, _, attr = ENGINES[engine_type].partition(":")
    return getattr(importlib.import_module(module), attr)
