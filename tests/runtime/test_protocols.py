"""Each role class keeps the protocol the stage calls it by, and the stage calls nothing else."""

import ast
import inspect
from pathlib import Path

import pytest

from tests.runtime import stand_ins
from trinity.config.engines import ENGINES
from trinity.runtime.buffer.actor import ExperienceBuffer
from trinity.runtime.explorer import Explorer
from trinity.runtime.protocols import PROTOCOLS
from trinity.runtime.rollout import engine_class
from trinity.runtime.sync.synchronizer import Synchronizer
from trinity.runtime.trainer.rank import TrainerRank

CLASSES = {
    "explorer": [Explorer],
    "trainer": [TrainerRank],
    "rollout": [engine_class(name) for name in ENGINES],
    "synchronizer": [Synchronizer],
    "buffer": [ExperienceBuffer],
}


def methods(protocol: type) -> dict[str, inspect.Signature]:
    """The protocol's methods (its own and inherited), by name."""
    found = {}
    for klass in reversed(protocol.__mro__):
        for name, value in vars(klass).items():
            if inspect.isfunction(value) and not name.startswith("_"):
                found[name] = value
    return found


def shape(function) -> tuple:
    params = list(inspect.signature(function).parameters.values())[1:]  # without self
    return inspect.iscoroutinefunction(function), [(p.name, p.kind, p.default) for p in params]


@pytest.mark.parametrize("role", sorted(PROTOCOLS))
def test_every_role_class_keeps_its_protocol(role):
    assert set(CLASSES) == set(PROTOCOLS)
    for klass in [*CLASSES[role], stand_ins.STAND_INS[role]]:
        for name, function in methods(PROTOCOLS[role]).items():
            assert hasattr(klass, name), f"{klass.__name__} lacks {name}, which the stage calls"
            assert shape(getattr(klass, name)) == shape(function), f"{klass.__name__}.{name}"


def test_the_stage_calls_only_protocol_methods():
    import trinity.runtime.stage as stage

    tree = ast.parse(Path(stage.__file__).read_text())
    called = {
        node.value.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "remote" and isinstance(node.value, ast.Attribute)
    }
    known = {name for protocol in PROTOCOLS.values() for name in methods(protocol)}
    assert called and called <= known, called - known
