"""Each role class keeps the protocol the driver calls it by, and the driver (the stage and its synchronizer) calls
nothing else."""

import ast
import inspect
from pathlib import Path

import pytest

from tests.runtime import stand_ins
from trinity.config.engines import ENGINES
from trinity.launch.roles import ROLES
from trinity.runtime.roles.protocols import AnyRole
from trinity.runtime.rollout import engine_class
from trinity.utils.imports import import_path

RUNTIME = Path(__file__).resolve().parents[3] / "trinity" / "runtime"


def classes(name: str) -> list[type]:
    """Every runtime class of role `name`: its entry's, or each engine's (the rollout role's class is its engine's)."""
    entry = ROLES[name]
    if entry.runtime_class is None:
        return [engine_class(engine) for engine in ENGINES]
    return [import_path(entry.runtime_class, name)]


def protocol(name: str) -> type:
    return import_path(ROLES[name].protocol, name)


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


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_role_class_keeps_its_protocol(role):
    assert set(stand_ins.STAND_INS) == set(ROLES)
    for klass in [*classes(role), stand_ins.STAND_INS[role]]:
        for name, function in methods(protocol(role)).items():
            assert hasattr(klass, name), f"{klass.__name__} lacks {name}, which the stage calls"
            assert shape(getattr(klass, name)) == shape(function), f"{klass.__name__}.{name}"


# how the driver names each role's handles: the stage's attribute, or the loop variable over them
RECEIVERS = {
    "self.explorer": "explorer",
    "stage.explorer": "explorer",
    "self.buffer": "buffer",
    "stage.buffer": "buffer",
    "self.ranks[0]": "trainer",
    "trainer_ranks[0]": "trainer",
    "r": "trainer",  # for r in stage.ranks
    "e": "rollout",  # for e in stage.engines
    "engine": "rollout",  # for engine in engines
    "launch.actors[name]": "rollout",  # run.py: the next stage's engines, loading early
}


@pytest.mark.parametrize(
    "files,least",
    [(sorted((RUNTIME / "driver").rglob("*.py")), 20), ([RUNTIME / "sync" / "synchronizer.py"], 8)],
    ids=["driver", "synchronizer"],
)
def test_the_driver_calls_each_role_only_through_its_protocol(files, least):
    calls = [call for path in files for call in remote_calls(path)]
    assert len(calls) > least
    for receiver, method in calls:
        if receiver in ("a", "actor"):  # for each actor of every role: what every role answers
            assert method in methods(AnyRole), method
            continue
        assert receiver in RECEIVERS, f"the driver calls {method} on {receiver}, a handle of no known role"
        assert method in methods(protocol(RECEIVERS[receiver])), f"{receiver}.{method} is not in its protocol"


def remote_calls(path: Path) -> list[tuple[str, str]]:
    """(receiver, method) of every `<receiver>.<method>.remote` in the module at `path`."""
    tree = ast.parse(path.read_text())
    return [
        (ast.unparse(node.value.value), node.value.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "remote" and isinstance(node.value, ast.Attribute)
    ]
