"""Shared helpers: drive the real `trinity` CLI in-process or as a subprocess; the test tiers (docs/testing.md)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from tests.session_ray import SessionRay, assert_no_role_left
from tests.workers import auto_workers
from trinity.cli.main import main

# Real Ray in tests: no auth token files, no usage reporting.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# The Hugging Face hub: this session is a site without a network, HF_HUB_OFFLINE=1, whose hub cache of its own holds a
# stand-in of openai/gsm8k (the reference config's data set, in its layout: subsets main and socratic), so the
# reference config validates as it does on a prepared site. Tests of the hub start a stand-in on loopback (the `hub`
# fixture: tests/hub_standin.py) and go online to it; port 1 refuses at once, so no request ever leaves this machine.
# Set before anything imports huggingface_hub (it reads them at import).
HF_HOME = tempfile.mkdtemp(prefix="hf")
for _var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE"):
    os.environ.pop(_var, None)
for _var in ("HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE"):
    os.environ.pop(_var, None)
os.environ |= {"HF_HOME": HF_HOME, "HF_ENDPOINT": "http://127.0.0.1:1", "HF_HUB_OFFLINE": "1"}
GSM8K_ROW = {"question": "What is 1+1?", "answer": "1+1=2\n#### 2"}
_GSM8K = Path(HF_HOME) / "hub" / "datasets--openai--gsm8k"
for _file in ("main/train.jsonl", "main/test.jsonl", "socratic/train.jsonl", "socratic/test.jsonl"):
    (_GSM8K / "snapshots" / ("0" * 40) / _file).parent.mkdir(parents=True, exist_ok=True)
    (_GSM8K / "snapshots" / ("0" * 40) / _file).write_text(json.dumps(GSM8K_ROW) + "\n")
(_GSM8K / "snapshots" / ("0" * 40) / "README.md").write_text(
    "---\nconfigs:\n- config_name: main\n  data_dir: main\n- config_name: socratic\n  data_dir: socratic\n---\n"
)
(_GSM8K / "refs").mkdir()
(_GSM8K / "refs" / "main").write_text("0" * 40)

# trinity's cache (paths.cache_dir: verl's remembered acceptances, runtime/verl/accepted.py): one folder for the
# session, shared by every `trinity run` it starts, never the user's own; a test of a first check: `cold_verl_cache`.
TRINITY_CACHE = tempfile.mkdtemp(prefix="trinity-cache")
os.environ["TRINITY_CACHE_DIR"] = TRINITY_CACHE

# The environment the session's Ray starts in (session_ray), whichever test first asks for it: this one, before any
# test's fixtures change it.
SESSION_ENV = dict(os.environ)

# Property tests: 150 examples each; scripts/mutation.sh runs every surviving mutant against them, so it asks for fewer.
settings.register_profile("trinity", max_examples=150, deadline=None)
settings.register_profile("mutation", max_examples=25, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "trinity"))

# --- Test tiers (docs/testing.md) ---------------------------------------------------------------------------------
# A test's tier is the first of these markers it carries, else "fast"; `-m "not ray and not train and not vllm"` is the
# fast tier. The markers themselves are listed, with their meanings, in pyproject.toml.
TIERS = ("vllm", "train", "ray")
# Fixtures that start Ray: a test using one (directly or through another fixture) is marked `ray` here, at collection.
# run_env, shared_run_env: the environment of `trinity run` subprocesses, which join the session's Ray (session_ray) or
# start one
RAY_FIXTURES = frozenset({"run_env", "shared_run_env", "session_ray"})
_RAY_TMPDIR = pytest.StashKey[tuple]()  # (RAY_TMPDIR before this session, this session's own)
_RAY_BEFORE = pytest.StashKey[tuple]()  # a test's _ray_state() before its setup


def tier_of(marks) -> str:
    """The tier of a test carrying these marker names."""
    return next((tier for tier in TIERS if tier in marks), "fast")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects, so that the markers added here count there
def pytest_collection_modifyitems(config, items):
    for item in items:
        if RAY_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ray)
        marks = {m.name for m in item.iter_markers()}
        # JUnit XML carries no markers: each test's tier goes into its <properties> (scripts/tier_times.py reads it)
        item.user_properties.append(("tier", tier_of(marks)))
        item.user_properties.append(("markers", ",".join(sorted(marks & set(TIERS)))))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml's addopts): tests/workers.py counts them."""
    return auto_workers(config)


def pytest_configure(config):
    """Every Ray this session starts without a temporary directory of its own writes its session folder into one
    private folder (RAY_TMPDIR), watched by the guard below; other sessions' Rays on this machine stay out of it."""
    config.stash[_RAY_TMPDIR] = (os.environ.get("RAY_TMPDIR"), tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    os.environ["RAY_TMPDIR"] = config.stash[_RAY_TMPDIR][1]  # short: Ray's socket paths must fit


def pytest_unconfigure(config):
    shutil.rmtree(HF_HOME, ignore_errors=True)
    shutil.rmtree(TRINITY_CACHE, ignore_errors=True)
    if _RAY_TMPDIR not in config.stash:
        return
    previous, ours = config.stash[_RAY_TMPDIR]
    if previous is None:
        os.environ.pop("RAY_TMPDIR", None)
    else:
        os.environ["RAY_TMPDIR"] = previous
    shutil.rmtree(ours, ignore_errors=True)


def _ray_state(item) -> tuple:
    """The Ray session folders in this session's RAY_TMPDIR, and whether Ray is initialised in this process (looked
    up, never imported: the config tests check that ray stays out of the test process)."""
    folder = Path(item.config.stash[_RAY_TMPDIR][1]) / "ray"
    sessions = frozenset(p for p in os.listdir(folder) if p.startswith("session_")) if folder.is_dir() else frozenset()
    ray = sys.modules.get("ray")
    return sessions, bool(ray is not None and getattr(ray, "is_initialized", lambda: False)())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if item.get_closest_marker("ray") is None:
        item.stash[_RAY_BEFORE] = _ray_state(item)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A test not marked `ray` that started a Ray (in this process, a simulated cluster, or a subprocess such as
    `trinity run`), in its own code or in a fixture it set up, fails here: it would run in the fast tier."""
    result = yield
    before = item.stash.get(_RAY_BEFORE, None)
    if before is not None:
        sessions, initialised = _ray_state(item)
        if sessions - before[0] or (initialised and not before[1]):
            pytest.fail(
                f"{item.nodeid} started Ray but is not marked `ray`: add @pytest.mark.ray (or the module's pytestmark),"
                " and `train` if it trains; docs/testing.md",
                pytrace=False,
            )
    return result


REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "examples" / "grpo_gsm8k" / "gsm8k.yaml"
PROFILES = ("a100", "a100_40g", "ascend910b", "ascend910b4", "ascend910c", "cpu", "h100", "h200")
MINIMAL = "model:\n  model_path: /models/tiny\n"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """Run `trinity ARGS...` in this process, from a clean temporary working directory."""
    monkeypatch.chdir(tmp_path)
    for var in (
        "TRINITY_PROFILE_PATH",
        "TRINITY_DEVICE",
        "TRINITY_CHECKPOINT_ROOT_DIR",
        "TRINITY_MODEL_PATH",
        "TRINITY_TASKSET_PATH",
    ):
        monkeypatch.delenv(var, raising=False)

    def run(*args: str) -> Result:
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def cold_verl_cache(monkeypatch, tmp_path):
    """A cache that remembers no acceptance of verl's: this test's checks start verl's child."""
    folder = tmp_path / "cold-cache"
    monkeypatch.setenv("TRINITY_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def ascend_driver_here(tmp_path, monkeypatch):
    """`plant(version)`: this node has the Ascend driver (HDK) `version` installed, as its installer leaves it
    (/etc/ascend_install.info naming the folder, its driver/version.info): real files under tmp_path, where
    trinity/platforms/npu_driver.py is pointed to look. Without a call, this node has none."""
    from trinity.platforms import npu_driver

    root = tmp_path / "Ascend"
    monkeypatch.setattr(npu_driver, "INSTALL_INFO", str(tmp_path / "ascend_install.info"))
    monkeypatch.setattr(npu_driver, "DEFAULT_ROOT", str(tmp_path / "absent"))

    def plant(version: str) -> None:
        (root / "driver").mkdir(parents=True, exist_ok=True)
        (root / "driver" / "version.info").write_text(f"Version={version}\nascendhal_version=7.35.23\n")
        (tmp_path / "ascend_install.info").write_text(f"Driver_Install_Path_Param={root}\n")

    return plant


@pytest.fixture
def write(tmp_path):
    """Write a YAML file (dedented) under the test's folder and return its path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    return _write


@pytest.fixture(scope="module")
def minimal_file(tmp_path_factory):
    """A run config with nothing but a model path, for tests that vary everything by overrides."""
    path = tmp_path_factory.mktemp("minimal") / "run.yaml"
    path.write_text(MINIMAL)
    return path


@contextmanager
def ray_cluster(head: dict, *nodes: dict):
    """A real Ray cluster of simulated nodes on this machine (ray.cluster_utils.Cluster), shut down on exit."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for node in nodes:
            cluster.add_node(**node)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def run_process(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> Result:
    """Run `python -m trinity ARGS...` as a separate process."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "trinity", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _run_env(demo_assets: Path, folder: Path, ray_tmps: list, ray_address: str) -> dict:
    ray_tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")  # short: Ray's socket paths must fit
    ray_tmps.append(ray_tmp)
    return {
        **os.environ,
        "TRINITY_DEMO_DIR": str(demo_assets),
        "TRINITY_CHECKPOINT_ROOT_DIR": str(folder / "ckpt"),
        "RAY_ADDRESS": ray_address,  # wins over cluster.ray_address=local; own_ray(env) drops it
        "RAY_TMPDIR": ray_tmp,
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
def run_env(demo_assets, tmp_path, session_ray):
    """The environment of a `trinity run` subprocess: the demo's assets, checkpoints under the test's folder, the
    session's Ray (`own_ray(run_env)`: a Ray of the run's own, in a temp dir of its own). No process of its runs is
    left once the test ends (assert_no_role_left)."""
    ray_tmps = []
    yield _run_env(demo_assets, tmp_path, ray_tmps, session_ray.address())
    try:
        assert_no_role_left(tmp_path)
    finally:
        for folder in ray_tmps:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def shared_run_env(demo_assets, session_ray):
    """run_env for a run that a module-scoped fixture shares between tests: `shared_run_env(folder)` is the
    environment of a `trinity run` with checkpoints under `folder`, on the session's Ray."""
    ray_tmps, folders = [], []

    def env(folder: Path) -> dict:
        folders.append(folder)
        return _run_env(demo_assets, folder, ray_tmps, session_ray.address())

    yield env
    try:
        for folder in folders:
            assert_no_role_left(folder)
    finally:
        for folder in ray_tmps:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def session_ray():
    """One Ray head for the session's `trinity run`s to join (RAY_ADDRESS in run_env), as a user joins a running
    cluster: a run that starts a local Ray of its own takes ~9 s longer on 2 cores (Ray's start and stop beside the
    roles' imports). Started on first use; started again if a test ended it."""
    head = SessionRay(SESSION_ENV)
    yield head
    head.stop()


@pytest.fixture(scope="session")
def demo_assets(tmp_path_factory):
    """The embedded demo's tokenizer, tiny model and problems, built once per test session."""
    pytest.importorskip("transformers")
    from trinity import demo

    folder = tmp_path_factory.mktemp("demo")
    demo.build(folder)
    return folder


@pytest.fixture(scope="session")
def remote_code_model(demo_assets, tmp_path_factory):
    """The demo model as a model type transformers does not know: its class is the folder's own code (auto_map)."""
    folder = tmp_path_factory.mktemp("remote") / "model"
    shutil.copytree(demo_assets / "model", folder)
    (folder / "configuration_tiny.py").write_text(
        "from transformers import Qwen2Config\n\n\nclass TinyConfig(Qwen2Config):\n    model_type = 'trinity_tiny'\n"
    )
    (folder / "modeling_tiny.py").write_text(
        "from transformers import Qwen2ForCausalLM\n\nfrom .configuration_tiny import TinyConfig\n\n\nclass "
        "TinyForCausalLM(Qwen2ForCausalLM):\n    config_class = TinyConfig\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config |= {
        "model_type": "trinity_tiny",
        "architectures": ["TinyForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_tiny.TinyConfig",
            "AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM",
        },
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture
def local_gsm8k(cli, monkeypatch, tmp_path):
    """A local GSM8K-shaped data set where the reference config's $TRINITY_TASKSET_PATH points."""
    folder = tmp_path / "gsm8k"
    folder.mkdir()
    for split in ("train", "test"):
        (folder / f"{split}.jsonl").write_text(
            json.dumps({"question": "What is 1+1?", "answer": "1+1=2\n#### 2"}) + "\n"
        )
    monkeypatch.setenv("TRINITY_TASKSET_PATH", str(folder))
    return folder


@pytest.fixture
def online(monkeypatch, tmp_path):
    """This test is online, with an empty hub cache under its folder: HF_HUB_OFFLINE unset, and huggingface_hub's
    copy of it, read once at import (in this process, under the session's HF_HUB_OFFLINE=1), set as a new process
    reads it."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


@pytest.fixture
def hub(online, monkeypatch):
    """A hub stand-in on loopback (tests/hub_standin.py) that this test's huggingface_hub clients talk to, `online`:
    HF_ENDPOINT names it. `hub.publish(...)` what the test reads."""
    from tests.hub_standin import StandInHub

    stand_in = StandInHub().start()
    monkeypatch.setenv("HF_ENDPOINT", stand_in.url)
    try:
        yield stand_in
    finally:
        stand_in.close()
