"""Auxiliary models (Trinity-RFT's `explorer.auxiliary_models`): each one's engines seen as a run of their own.

An auxiliary model's engines are rollout engines of another model: planned, placed, sized and started as the rollout
engines are, never weight-synced, served on their OpenAI endpoint for the workflows. Every engine reads its settings
from `explorer.rollout_model` and its model from `model.*`, so an auxiliary engine is given the run's config seen from
its model (`engine_view`): its section as the rollout model, its model_path as the model's, no LoRA adapter (the
trainer trains none for it) and no external API. The driver's checks (preflight) read the same view.
"""

from .schema import RunConfig


def engine_view(config: RunConfig, index: int) -> RunConfig:
    """`config` as auxiliary model `index`'s engines read it."""
    auxiliary = config.explorer.auxiliary_models[index]
    model = config.model.model_copy(
        update={
            "model_path": auxiliary.model_path,
            "lora_configs": None,
            "external_model": config.model.external_model.model_copy(update={"enable": False}),
        }
    )
    explorer = config.explorer.model_copy(update={"rollout_model": auxiliary})
    return config.model_copy(update={"model": model, "explorer": explorer})


def engine_views(config: RunConfig) -> list[RunConfig]:
    """`engine_view` of each auxiliary model, in order."""
    return [engine_view(config, i) for i in range(len(config.explorer.auxiliary_models))]
