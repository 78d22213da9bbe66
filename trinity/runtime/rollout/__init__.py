"""Rollout engines by `engine_type` (their entries: trinity/config/engines.py), imported only when a run uses them."""

from ...config import engines
from ...utils.imports import import_path


def engine_class(engine_type: str) -> type:
    """The engine class of `engine_type`, or a ValueError naming the ones this version has."""
    return import_path(engines.engine(engine_type).runtime, f"engine type {engine_type!r}'s class")
