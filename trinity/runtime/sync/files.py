"""Where weights moved through files live in the run directory, named in one place.

- a checkpoint sync's file: `sync/weights_v<version>.safetensors`, removed once every engine loaded it;
- the weights a `train` run publishes for an `explore` (or `serve`) run of the same directory:
  `sync/published.safetensors`, and `sync/published.json` naming their version, written after the weights.
Each weights file is written atomically, then its marker `<stem>.json` ({"version": N}).
"""

import json
from pathlib import Path

FOLDER = "sync"


def folder(run_root: Path) -> Path:
    """The run directory's folder of weights in flight."""
    return run_root / FOLDER


def checkpoint_file(run_root: Path, version: int) -> Path:
    """The file a checkpoint sync of `version` goes through."""
    return folder(run_root) / f"weights_v{version}.safetensors"


def published_file(run_root: Path) -> Path:
    """The weights a train run publishes."""
    return folder(run_root) / "published.safetensors"


def marker(weights: Path) -> Path:
    """The version marker written beside a weights file once it is complete."""
    return weights.with_suffix(".json")


def mark(weights: Path, version: int) -> None:
    """Say, atomically, that `weights` is complete and holds `version`."""
    from ...utils.atomic import write_text_atomic

    write_text_atomic(marker(weights), json.dumps({"version": version}))


def published_version(run_root: Path) -> int | None:
    """The version of the published weights, None when nothing is published (yet)."""
    path = marker(published_file(run_root))
    return json.loads(path.read_text())["version"] if path.exists() else None


def remove(weights: Path) -> None:
    """A weights file and its marker, once no engine needs them."""
    weights.unlink(missing_ok=True)
    marker(weights).unlink(missing_ok=True)
