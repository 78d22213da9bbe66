"""Each role class keeps the protocol the driver calls it by, and the driver (the stage and its synchronizer) calls
nothing else."""

import ast
import inspect
from pathlib import Path

import pytest

from tests.runtime import stand_ins
from trinity.config.engines import ENGINES
from trinity.runtime.buffer.actor import ExperienceBuffer
from trinity.runtime.explorer import Explorer
from trinity.runtime.protocols import PROTOCOLS, AnyRole
from trinity.runtime.rollout import engine_class
from trinity.runtime.trainer.rank import TrainerRank

CLASSES = {
    "explorer": [Explorer],
    "trainer": [TrainerRank],
    "rollout": [engine_class(name) for name in ENGINES],
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
    # without self; ray.remote(cls), which other tests in this process run, adds _ray_trace_ctx to every method
    params = [p for p in list(inspect.signature(function).parameters.values())[1:] if p.name != "_ray_trace_ctx"]
    return inspect.iscoroutinefunction(function), [(p.name, p.kind, p.default) for p in params]


@pytest.mark.parametrize("role", sorted(PROTOCOLS))
def test_every_role_class_keeps_its_protocol(role):
    assert set(CLASSES) == set(PROTOCOLS)
    for klass in [*CLASSES[role], stand_ins.STAND_INS[role]]:
        for name, function in methods(PROTOCOLS[role]).items():
            assert hasattr(klass, name), f"{klass.__name__} lacks {name}, which the stage calls"
            assert shape(getattr(klass, name)) == shape(function), f"{klass.__name__}.{name}"


# how the driver names each role's handles: its attribute, or the loop variable over them
RECEIVERS = {
    "self.explorer": "explorer",
    "self.buffer": "buffer",
    "self.ranks[0]": "trainer",
    "trainer_ranks[0]": "trainer",
    "r": "trainer",  # for r in self.ranks
    "e": "rollout",  # for e in self.engines
    "engine": "rollout",  # for engine in engines
}


@pytest.mark.parametrize("module,least", [("trinity.runtime.stage", 15), ("trinity.runtime.sync.synchronizer", 8)])
def test_the_driver_calls_each_role_only_through_its_protocol(module, least):
    import importlib

    tree = ast.parse(Path(importlib.import_module(module).__file__).read_text())
    calls = [
        (ast.unparse(node.value.value), node.value.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "remote" and isinstance(node.value, ast.Attribute)
    ]
    assert len(calls) > least
    for receiver, method in calls:
        if receiver == "a":  # for a in every actor: what every role answers
            assert method in methods(AnyRole), method
            continue
        assert receiver in RECEIVERS, f"the stage calls {method} on {receiver}, a handle of no known role"
        assert method in methods(PROTOCOLS[RECEIVERS[receiver]]), f"{receiver}.{method} is not in its protocol"
