"""Where a model's shape comes from: its local `config.json`, else the shipped table of common models.

The table (`models.csv` beside this file) is keyed by hub id; each row names the `config.json` it
was copied from. A model in neither place is not an error: the memory check says it was not done.
"""

import json
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from ..model_folder import where
from .shape import ModelShape, UnknownShape, from_hf_config

TABLE = Path(__file__).with_name("models.csv")


class FoundShape(NamedTuple):
    """A model's shape and where it was read."""

    name: str
    shape: ModelShape
    source: str


class NoShape(NamedTuple):
    """Why a model's shape is unknown."""

    name: str
    reason: str


def find_shape(model_path: str) -> FoundShape | NoShape:
    """The shape of `model_path`: its config.json (a local folder, or a hub name's snapshot in the hub cache) first,
    then the table by hub id."""
    config = where(model_path) / "config.json"
    if config.is_file():
        return _from_file(model_path, config)
    row = known_models().get(model_path)
    if row is not None:
        return FoundShape(model_path, *row)
    reason = (
        f"{model_path!r} is neither a local folder with a config.json nor a model in trinity's table of common models"
    )
    return NoShape(model_path, reason)


def _from_file(name: str, config: Path) -> FoundShape | NoShape:
    try:
        return FoundShape(name, from_hf_config(json.loads(config.read_text())), str(config))
    except (OSError, ValueError) as exc:  # UnknownShape and JSONDecodeError are ValueErrors
        reason = str(exc) if isinstance(exc, UnknownShape) else f"cannot read it: {exc}"
        return NoShape(name, f"{config}: {reason}")


@lru_cache(maxsize=1)
def known_models() -> dict[str, tuple[ModelShape, str]]:
    """hub id -> (shape, the config.json it came from), read once per process."""
    table = {}
    for row in table_rows():
        shape = from_hf_config(_as_hf_config(row))
        table.update({hub_id: (shape, row["source"]) for hub_id in row["hub_ids"].split()})
    return table


def table_rows() -> list[dict[str, str]]:
    """The rows of the table as written (hub_ids, the config.json fields, published, source)."""
    import csv  # only hub names need the table

    lines = [line for line in TABLE.read_text().splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(lines))


def _as_hf_config(row: dict[str, str]) -> dict:
    numbers = {
        "layers": "num_hidden_layers",
        "hidden": "hidden_size",
        "intermediate": "intermediate_size",
        "heads": "num_attention_heads",
        "kv_heads": "num_key_value_heads",
        "head_dim": "head_dim",
        "vocab": "vocab_size",
    }
    data = {hf: int(row[ours]) for ours, hf in numbers.items()}
    return {**data, "model_type": row["model_type"], "tie_word_embeddings": row["tied"] == "true"}
