"""The run's LoRA adapter as every layer reads it: which adapter the trainer trains, whether the engines apply it
themselves (synchronizer.lora_sync: adapter) or hold base + adapter merged, and what one stage's adapter means for
the next."""

import json
from pathlib import Path

from ..errors import Issue
from .schema import LoRAConfig, RunConfig

ADAPTER_CONFIG = "adapter_config.json"  # PEFT's: an adapter folder, naming its base model


def adapter_of(config: RunConfig) -> LoRAConfig | None:
    """The run's LoRA adapter settings (None: every weight trains)."""
    return config.model.lora_configs[0] if config.model.lora_configs else None


def adapter_base(folder: Path) -> Path | None:
    """The base model a LoRA checkpoint's adapter names (None: `folder` is no adapter folder)."""
    try:
        return Path(json.loads((folder / ADAPTER_CONFIG).read_text())["base_model_name_or_path"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def moves_adapter(config: RunConfig) -> bool:
    """Whether the engines apply the adapter themselves, so syncs and checkpoints hand them adapter tensors."""
    return adapter_of(config) is not None and config.synchronizer.lora_sync == "adapter"


# the settings a LoRA stage takes over from the adapter of the stage before it (verl loads that adapter as it is)
CARRIED = ("lora_rank", "lora_alpha", "target_modules", "exclude_modules")


def handoff_issues(stages: list[tuple[str, RunConfig]], provenances: list) -> list[Issue]:
    """What a stage's adapter means for the next stage: a full fine-tune needs the merged model, a LoRA stage goes on
    training the same adapter (same shape), and only the first stage starts from model.lora_configs[0].path."""
    issues: list[Issue] = []
    pairs = zip(stages, stages[1:], provenances, provenances[1:])
    for index, ((name, config), (later, after), earlier, provenance) in enumerate(pairs):
        mine, theirs = adapter_of(config), adapter_of(after)
        where = earlier.where(("model", "lora_configs"))
        if mine and not theirs and not config.trainer.save_merged_model:
            issues.append(
                Issue(
                    f"stage '{name}' trains a LoRA adapter and stage '{later}' trains every weight: it starts from "
                    "a full model, which the adapter's checkpoint holds only with trainer.save_merged_model",
                    key="trainer.save_merged_model",
                    source=where,
                    allowed="true",
                    hint=f"set stages.{index}.trainer.save_merged_model: true, or give stage '{later}' "
                    "model.lora_configs too",
                )
            )
        if theirs and theirs.path is not None:
            issues.append(_later_path(later, provenance))
        if mine and theirs:
            issues += [
                _changed(name, later, field, mine, theirs, provenance)
                for field in CARRIED
                if _differs(field, mine, theirs)
            ]
            if after.algorithm.kl_loss_fn not in (None, "none"):
                issues.append(_base_reference(later, provenance))
    return issues


def _differs(field: str, mine: LoRAConfig, theirs: LoRAConfig) -> bool:
    return getattr(mine, field) != getattr(theirs, field)


def _changed(name: str, later: str, field: str, mine: LoRAConfig, theirs: LoRAConfig, provenance) -> Issue:
    return Issue(
        f"stage '{later}' goes on training stage '{name}''s adapter, which has {field}={getattr(mine, field)!r}, "
        f"not {getattr(theirs, field)!r}",
        key=f"model.lora_configs[0].{field}",
        source=provenance.where(("model", "lora_configs", 0, field)) or provenance.where(("model", "lora_configs")),
        allowed=repr(getattr(mine, field)),
        hint=f"give both stages the same {field}",
    )


def _later_path(later: str, provenance) -> Issue:
    return Issue(
        f"stage '{later}' starts from the previous stage's checkpoint, so a pre-trained adapter cannot start it",
        key="model.lora_configs[0].path",
        source=provenance.where(("model", "lora_configs", 0, "path")),
        allowed="a path in the first stage only",
        hint="set the path in the first stage, or start a new run from the adapter",
    )


def _base_reference(later: str, provenance) -> Issue:
    return Issue(
        f"stage '{later}' goes on training an adapter: its KL reference is the base model (the adapter switched "
        "off), not the policy the stage starts from",
        key="algorithm.kl_loss_fn",
        source=provenance.where(("algorithm", "kl_loss_fn")),
        hint="set kl_loss_fn: none in that stage to train without it, or give it its own adapter in a new run",
        severity="warning",
    )
