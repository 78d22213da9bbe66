"""The test tiers (docs/testing.md) hold: a test that starts Ray carries the `ray` marker, found two ways.

Statically, here: every test whose code (or a fixture or helper of its module) calls what starts Ray is marked.
At run time, in tests/conftest.py: a test not marked `ray` that started one fails at its teardown; the inner
pytest runs below show that guard failing such a test and letting a marked one pass.
"""

import ast
import importlib.util
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import RAY_FIXTURES, REPO

# Calls that start a Ray: in this process, a simulated cluster (tests/conftest.py's ray_cluster wraps one), or the head
# process scripts/smoke_train.py starts for one-device machines.
STARTS_RAY = frozenset({"ray.init", "Cluster", "cluster_utils.Cluster", "ray_cluster"})


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return dotted(node.func)
    return ""


def mark_names(nodes) -> set[str]:
    """`pytest.mark.X` (called or not) among decorators or a pytestmark value."""
    names = set()
    for node in nodes:
        name = dotted(node)
        if name.startswith("pytest.mark."):
            names.add(name.removeprefix("pytest.mark."))
    return names


def module_marks(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(dotted(t) == "pytestmark" for t in node.targets):
            value = node.value
            return mark_names(value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
    return set()


def unmarked_ray_tests(path: Path, root: Path = REPO) -> list[str]:
    """The tests of a module that start Ray, through their own calls or their module's fixtures and helpers, without
    the `ray` marker (their own, the module's, or the one a RAY_FIXTURES fixture adds at collection)."""
    tree = ast.parse(path.read_text())
    functions = {f.name: f for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    calls = {name: {dotted(n.func) for n in ast.walk(f) if isinstance(n, ast.Call)} for name, f in functions.items()}
    params = {name: {a.arg for a in f.args.args + f.args.kwonlyargs} for name, f in functions.items()}
    starting = closure(functions, lambda name, more: calls[name] & (STARTS_RAY | more) or params[name] & more)
    # fixtures that use a RAY_FIXTURES one: a test using them is marked at collection
    automarked = closure(functions, lambda name, more: params[name] & (RAY_FIXTURES | more))
    marked = "ray" in module_marks(tree)
    return [
        f"{path.relative_to(root)}::{name}"
        for name, f in functions.items()
        if name.startswith("test_")
        and name in starting
        and not marked
        and "ray" not in mark_names(f.decorator_list)
        and not params[name] & (RAY_FIXTURES | automarked)
    ]


def closure(functions: dict, takes) -> set[str]:
    """The functions that `takes(name, found so far)`, to a fixed point (a helper of a helper that starts Ray...)."""
    found: set[str] = set()
    while more := {name for name in functions if name not in found and takes(name, found)}:
        found |= more
    return found


def test_every_test_that_starts_ray_is_marked_ray():
    unmarked = [t for path in sorted((REPO / "tests").rglob("test_*.py")) for t in unmarked_ray_tests(path)]
    assert unmarked == [], "start Ray without the `ray` marker (docs/testing.md): " + ", ".join(unmarked)


def test_the_static_check_sees_a_ray_started_through_a_fixture_or_a_helper(tmp_path):
    path = tmp_path / "test_probe.py"
    source = textwrap.dedent(
        """
        import pytest
        import ray

        @pytest.fixture(scope="module")
        def node():
            ray.init()
            yield

        def helper():
            return ray_cluster({})

        def test_fixture(node): pass
        def test_helper(): helper()
        def test_direct(): ray.init(address="auto")
        @pytest.mark.ray
        def test_marked(node): pass
        def test_run(run_env): pass
        @pytest.fixture
        def env(run_env): return run_env
        def test_through_env(env): ray.init()
        def test_quiet(): pass
        """
    )
    path.write_text(source)
    assert unmarked_ray_tests(path, tmp_path) == [
        f"test_probe.py::{t}" for t in ("test_fixture", "test_helper", "test_direct")
    ]


INNER_CONFTEST = """
import pytest

from tests.conftest import (  # noqa: F401
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    pytest_unconfigure,
)


@pytest.fixture
def run_env():
    return {}
"""

INNER_INI = """
[pytest]
markers =
    ray: starts Ray
    train: trains
    vllm: vLLM
"""

# What a Ray head leaves in its temporary directory: a session folder under RAY_TMPDIR/ray.
SIMULATED = """
import os
import sys

import pytest


def start(name):
    os.makedirs(os.path.join(os.environ["RAY_TMPDIR"], "ray", f"session_{name}"))


@pytest.fixture(scope="module")
def cluster():
    start("module_fixture")
    yield


def test_unmarked_starts():
    start("unmarked")


@pytest.mark.ray
def test_marked_starts():
    start("marked")


def test_through_run_env(run_env):
    start("run_env")


def test_unmarked_through_a_module_fixture(cluster):
    pass


def test_unmarked_and_quiet():
    pass


def test_unmarked_initialises_ray_here():  # ray.init in this process, connected to a cluster started elsewhere
    import types

    sys.modules["ray"] = types.SimpleNamespace(is_initialized=lambda: True)
"""


def inner_pytest(folder: Path, tests: str, *args: str) -> subprocess.CompletedProcess:
    (folder / "conftest.py").write_text(INNER_CONFTEST)
    (folder / "pytest.ini").write_text(INNER_INI)
    (folder / "test_inner.py").write_text(tests)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_an_unmarked_test_that_leaves_a_ray_session_fails_and_a_marked_one_passes(tmp_path):
    proc = inner_pytest(tmp_path, SIMULATED, "--junitxml", str(tmp_path / "j.xml"))
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "6 passed, 3 errors" in out, out  # the failing two pass their call, then fail at teardown
    failed = [
        line.split("ERROR at teardown of ")[1].split()[0] for line in out.splitlines() if "at teardown of" in line
    ]
    assert failed == [
        "test_unmarked_starts",
        "test_unmarked_through_a_module_fixture",
        "test_unmarked_initialises_ray_here",
    ]
    for name in failed:
        assert f"test_inner.py::{name} started Ray but is not marked `ray`: add @pytest.mark.ray" in out
    tiers = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(tmp_path / "j.xml").iter("testcase")
    }
    assert tiers["test_through_run_env"] == {"tier": "ray", "markers": "ray"}  # marked at collection: uses run_env
    assert tiers["test_marked_starts"]["tier"] == "ray" and tiers["test_unmarked_and_quiet"]["tier"] == "fast"
    # scripts/tier_times.py reads those properties back
    spec = importlib.util.spec_from_file_location("tier_times", REPO / "scripts" / "tier_times.py")
    tier_times = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tier_times)
    rows = {
        line.split()[0]: line.split()[1:] for line in tier_times.report(str(tmp_path / "j.xml")).splitlines() if line
    }
    assert rows["fast"][0] == "4" and rows["fast"][-2:] == ["error:", "3"] and rows["ray"][0] == "2"
    assert rows["all"][0] == "6"
    # the marker run_env adds counts for -m
    fast = inner_pytest(tmp_path, SIMULATED, "--collect-only", "-m", "not ray")
    assert "test_through_run_env" not in fast.stdout and "test_unmarked_and_quiet" in fast.stdout, fast.stdout


REAL = """
import subprocess
import sys


def test_in_a_subprocess():
    probe = "import ray; ray.init(num_cpus=1, include_dashboard=False); ray.shutdown()"
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=240)
"""


@pytest.mark.ray
def test_an_unmarked_test_that_starts_a_real_ray_fails():
    """The guard on a real Ray, started in a subprocess as `trinity run` starts one (a Ray initialised in the test
    process is the simulated case above)."""
    pytest.importorskip("ray")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tt", dir="/tmp") as folder:
        proc = inner_pytest(Path(folder), REAL)
    out = proc.stdout
    assert "1 passed, 1 error" in out, out + proc.stderr[-3000:]
    assert "ERROR at teardown of test_in_a_subprocess" in out
    assert "test_inner.py::test_in_a_subprocess started Ray but is not marked `ray`" in out
