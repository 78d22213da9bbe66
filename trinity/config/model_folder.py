"""What a local model folder's config.json states, read as JSON: the config path imports no transformers."""

import json
from pathlib import Path


def hf_config(folder: str | Path | None) -> dict | None:
    """The folder's config.json; None where there is no readable JSON object there."""
    try:
        data = json.loads((Path(str(folder)) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
