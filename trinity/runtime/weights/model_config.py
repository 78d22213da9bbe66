"""The policy model's Hugging Face config as the run changes it (model.rope_scaling, model.rope_theta), one dict that
the trainer and every engine apply, so that both compute the same positions:

- vLLM takes it as `hf_overrides` (rollout/vllm_args.py);
- the transformers engine sets it on the config it loads the model with (rollout/transformers_engine.py);
- verl reads a model's config from `hf_config_path`: a folder written here with it (verl's own override_config cannot
  set a dict-valued key such as rope_parameters: its update_model_config recurses into the dict).
"""

import json
import shutil
from pathlib import Path
from typing import Any

from ...config import rope
from ...config.model_folder import hf_config, where
from ...config.schema import RunConfig

ROPE = "rope_parameters"
# a config.json's older rope keys: transformers 5 reads them over rope_parameters, so a written config drops them
LEGACY_ROPE = ("rope_scaling", "rope_theta")
# what verl reads beside config.json from hf_config_path: the generation config, and the code of a model whose config
# names its own classes (auto_map)
COMPANIONS = ("generation_config.json", "*.py")


def overrides(config: RunConfig, model_path: str) -> dict[str, Any]:
    """The config keys the run changes for the model at `model_path` (a local folder): {"rope_parameters": ...}, or {}
    where it changes none."""
    model = config.model
    parameters = rope.rope_parameters(hf_config(model_path) or {}, model.rope_scaling, model.rope_theta)
    return {} if parameters is None else {ROPE: parameters}


def apply(hf: Any, changes: dict[str, Any]) -> Any:
    """A loaded transformers config `hf` with `changes` set on it."""
    for key, value in changes.items():
        setattr(hf, key, value)
    return hf


def config_folder(model_path: str, changes: dict[str, Any], folder: Path) -> str:
    """`folder` holding the model's config.json with `changes` (and without its older rope keys) beside its
    generation config and code: a model config verl reads as hf_config_path."""
    data = {k: v for k, v in (hf_config(model_path) or {}).items() if k not in LEGACY_ROPE} | changes
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    for pattern in COMPANIONS:
        for found in where(model_path).glob(pattern):
            shutil.copy2(found, folder / found.name)
    return str(folder)
