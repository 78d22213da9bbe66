"""A model's folder as the config path reads it: a local folder, or the cached snapshot of a model named by hub id
(so a name in huggingface_hub's cache reads as a local folder does); its config.json read as JSON, importing no
transformers."""

import json
from pathlib import Path

from .hub.cache import local_folder


def where(value: str | Path | None) -> Path:
    """The folder holding model `value`'s files here: itself, else its cached snapshot, else the path as written (a
    folder that is not here: readers find nothing in it)."""
    return local_folder(str(value) if value else None, "model") or Path(str(value or ""))


def hf_config(folder: str | Path | None) -> dict | None:
    """The model's config.json; None where there is no readable JSON object there."""
    try:
        data = json.loads((where(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
