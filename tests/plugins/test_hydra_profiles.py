"""trinity's profiles in other Hydra apps: `+hardware=<profile>` on verl's own config, and the `${hw:...}` resolvers.

(Not `tests/hydra_plugins/`: should that folder's parent reach sys.path, Hydra would scan the tests as plugins.)
"""

import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, MissingConfigException
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf
from omegaconf.errors import InterpolationResolutionError

from tests.conftest import PROFILES, REPO

MINIMAL_RUN = REPO / "conf" / "minimal_run.yaml"

# verl key -> the trinity key whose derived value it must hold (written out here, independently of the mapping file).
MAPPED = {
    "trainer.device": "trainer.device",
    "trainer.n_gpus_per_node": "cluster.gpu_per_node",
    "actor_rollout_ref.actor.use_torch_compile": "trainer.use_torch_compile",
    "actor_rollout_ref.actor.fsdp_config.use_torch_compile": "trainer.use_torch_compile",
    "actor_rollout_ref.ref.use_torch_compile": "trainer.use_torch_compile",
    "actor_rollout_ref.ref.fsdp_config.use_torch_compile": "trainer.use_torch_compile",
    "critic.fsdp.use_torch_compile": "trainer.use_torch_compile",
    "actor_rollout_ref.rollout.gpu_memory_utilization": "explorer.rollout_model.gpu_memory_utilization",
    "actor_rollout_ref.rollout.enforce_eager": "explorer.rollout_model.enforce_eager",
}
# verl's platform names (VERL_PLATFORM) and, for the CPU, the module that registers it.
VERL_PLATFORM_ENV = {
    "cuda": {"VERL_PLATFORM": "nvidia"},
    "npu": {"VERL_PLATFORM": "huawei"},
    "cpu": {"VERL_PLATFORM": "cpu", "VERL_USE_EXTERNAL_MODULES": "trinity.runtime.verl.cpu_platform"},
}
ENV_VARS = "ray_kwargs.ray_init.runtime_env.env_vars"
TINY_MODEL = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "vocab_size": 64,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}


@pytest.fixture
def app(tmp_path, monkeypatch):
    """A Hydra app of its own (not verl): compose its config with overrides, from the test's folder."""
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "config.yaml").write_text("defaults:\n  - _self_\nname: app\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRINITY_PROFILE_PATH", raising=False)

    def run(*overrides: str, config: str = "config"):
        with initialize_config_dir(str(folder), version_base=None):
            return compose(config, overrides=list(overrides))

    run.folder = folder
    return run


def skip_without_verl() -> None:
    # Not importorskip: importing verl imports torch into this process, which other tests check stays out.
    if importlib.util.find_spec("verl") is None:
        pytest.skip("verl is not installed (the cpu extra installs it)")


def site_profiles(tmp_path, monkeypatch, **files: str):
    """Profile files in a folder on $TRINITY_PROFILE_PATH."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    for name, text in files.items():
        (site / f"{name}.yaml").write_text(text)
    monkeypatch.setenv("TRINITY_PROFILE_PATH", str(site))
    return site


# --- verl's own config, once per shipped profile ---------------------------------------------------------


@pytest.fixture(scope="module")
def verl_side(tmp_path_factory):
    """What verl_probe.py composes and validates for every shipped profile, in a process of its own (verl imports
    torch)."""
    skip_without_verl()
    model = tmp_path_factory.mktemp("tiny-qwen2")
    (model / "config.json").write_text(json.dumps(TINY_MODEL))  # a model config verl reads without downloading
    request = {
        "profiles": list(PROFILES),
        "keys": list(MAPPED),
        "env_key": ENV_VARS,
        "overrides": validation_overrides(model),
    }
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRINITY_PROFILE_PATH", None)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("verl_probe.py"))],
        input=json.dumps(request),
        cwd=model,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def validation_overrides(model) -> list[str]:
    # What verl's validation asks for besides the hardware; kl loss and GAE keep the ref and critic sections in the
    # check.
    return [
        f"actor_rollout_ref.model.path={model}",
        f"critic.model.path={model}",
        "actor_rollout_ref.rollout.name=vllm",
        "data.train_batch_size=16",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "critic.ppo_mini_batch_size=8",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "critic.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.actor.use_kl_loss=true",
    ]


def expected_env(rendered: dict) -> dict:
    """What every role of the render shares, the trinity device variables, and verl's platform."""
    env, hardware = rendered["env"], rendered["hardware"]
    trainer, rollout = {**env["common"], **env["trainer"]}, {**env["common"], **env["rollout"]}
    shared = {name: value for name, value in trainer.items() if rollout.get(name) == value}
    ours = {"TRINITY_DEVICE": hardware["device_type"], "TRINITY_HARDWARE": hardware["name"]}
    return {**shared, **ours, **VERL_PLATFORM_ENV[hardware["device_type"]]}


def pick(tree: dict, dotted: str):
    for part in dotted.split("."):
        tree = tree[part]
    return tree


@pytest.mark.parametrize("profile", PROFILES)
def test_verl_config_holds_what_trinity_render_derives_and_passes_verls_validation(profile, cli, verl_side):
    """verl's validation reads no platform (measured: its platform singleton stays unset), so no VERL_PLATFORM is needed
    here."""
    render = ("config", "render", "-c", MINIMAL_RUN, f"hardware={profile}", "mode=colocate", "--format", "json")
    rendered, explained = cli(*render), cli(*render, "--explain", *sorted(set(MAPPED.values())))
    assert rendered.code == 0 and explained.code == 0, rendered.err + explained.err
    trinity = rendered.json()
    layers = {e["key"]: {step["layer"] for step in e["chain"]} for e in explained.json()["explain"]}

    verl = verl_side[profile]
    for verl_key, trinity_key in MAPPED.items():
        # A value only trinity's schema default sets is no hardware fact: verl keeps its own default.
        derived = layers[trinity_key] != {"schema"}
        want = pick(trinity, trinity_key) if derived else verl_side["defaults"][verl_key]
        assert verl["values"][verl_key] == want, (profile, verl_key, trinity_key)
    assert verl["env"] == expected_env(trinity)
    assert verl["validation"] == {
        "printed": "[validate_config] All configuration checks passed successfully!\n",
        "rollout": "RolloutConfig",
        "critic": True,
        "ref": True,
    }


def test_main_ppo_cfg_job_prints_the_npu_values(tmp_path):
    skip_without_verl()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRINITY_PROFILE_PATH", None)
    proc = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", "+hardware=ascend910b", "--cfg", "job"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    assert cfg["trainer"]["device"] == "npu" and cfg["trainer"]["n_gpus_per_node"] == 8
    assert cfg["actor_rollout_ref"]["actor"]["use_torch_compile"] is False
    assert cfg["actor_rollout_ref"]["actor"]["fsdp_config"]["use_torch_compile"] is False
    assert cfg["actor_rollout_ref"]["rollout"]["gpu_memory_utilization"] == 0.8
    assert cfg["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]["VERL_PLATFORM"] == "huawei"
    assert "left out: trainer CPU_AFFINITY_CONF=1" in proc.stderr


# --- the group and the resolvers in any Hydra app -----------------------------------------------------------


def test_an_explicit_override_wins_over_the_profile(app):
    plain = app("+hardware=ascend910b")
    assert (plain.trainer.n_gpus_per_node, plain.actor_rollout_ref.actor.use_torch_compile) == (8, False)
    assert plain.ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM == "huawei"
    mine = app(
        "+hardware=ascend910b",
        "trainer.n_gpus_per_node=2",
        "actor_rollout_ref.actor.use_torch_compile=true",
        f"{ENV_VARS}.VERL_PLATFORM=mine",
        f"+{ENV_VARS}.CPU_AFFINITY_CONF='1'",
    )
    assert (mine.trainer.n_gpus_per_node, mine.actor_rollout_ref.actor.use_torch_compile) == (2, True)
    assert mine.ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM == "mine"
    assert mine.ray_kwargs.ray_init.runtime_env.env_vars.CPU_AFFINITY_CONF == "1"


def test_a_default_in_the_apps_own_file_before_self_wins_too(app):
    (app.folder / "mine.yaml").write_text(
        "defaults:\n  - hardware: ascend910b\n  - _self_\ntrainer:\n  n_gpus_per_node: 4\n"
    )
    cfg = app(config="mine")
    assert (cfg.trainer.device, cfg.trainer.n_gpus_per_node) == ("npu", 4)


def test_an_apps_own_hardware_option_wins_over_the_profile_of_that_name(app):
    (app.folder / "hardware").mkdir()
    (app.folder / "hardware" / "a100.yaml").write_text("# @package _global_\nmine: true\n")
    assert OmegaConf.to_container(app("+hardware=a100")) == {"name": "app", "mine": True}
    assert app("+hardware=h100").trainer.device == "cuda"  # the other options are still the profiles


def test_profiles_on_TRINITY_PROFILE_PATH_are_options_and_shadow_shipped_ones(app, tmp_path, monkeypatch):
    shipped_a100 = (REPO / "profiles" / "a100.yaml").read_text()
    site_profiles(
        tmp_path,
        monkeypatch,
        mynpu="extends: ascend910b\nfacts:\n  devices_per_node: 4\n",
        a100=shipped_a100.replace("devices_per_node: 8", "devices_per_node: 2"),
    )
    mine = app("+hardware=mynpu")
    assert (mine.trainer.device, mine.trainer.n_gpus_per_node) == ("npu", 4)
    assert mine.ray_kwargs.ray_init.runtime_env.env_vars.TRINITY_HARDWARE == "mynpu"
    assert app("+hardware=a100").trainer.n_gpus_per_node == 2
    # the shipped h100 extends whichever a100 wins, as in trinity
    assert app("+hardware=h100").trainer.n_gpus_per_node == 2


def test_an_unknown_profile_lists_the_options(app):
    with pytest.raises(MissingConfigException) as caught:
        app("+hardware=a1000")
    assert "Available options in 'hardware'" in str(caught.value)
    assert all(f"\t{name}\n" in str(caught.value) for name in PROFILES)


def test_a_bad_profile_fails_with_trinitys_report(app, tmp_path, monkeypatch):
    site_profiles(tmp_path, monkeypatch, broken="extends: a100\nfacts:\n  devices_per_node: -1\n")
    with pytest.raises(ConfigCompositionException) as caught:
        app("+hardware=broken")
    message = str(caught.value)
    assert message.startswith("hardware=broken: trinity: 1 problem in the config")
    assert "site/broken.yaml:3:3: facts.devices_per_node: input should be greater than 0 (got -1)" in message


@pytest.mark.parametrize(
    ("profile", "left_out"),
    [
        (
            "ascend910b",
            "trainer CPU_AFFINITY_CONF=1 PYTORCH_NPU_ALLOC_CONF=expandable_segments:True TASK_QUEUE_ENABLE=2; "
            "rollout TASK_QUEUE_ENABLE=1 VLLM_ASCEND_ENABLE_NZ=0",
        ),
        ("a100", "trainer PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; rollout NCCL_CUMEM_ENABLE=0"),
        # roles that take turns share the node's cores: the engine's 8 threads differ from each rank's one
        ("cpu", "trainer OMP_NUM_THREADS=1; rollout OMP_NUM_THREADS=8"),
    ],
)
def test_variables_of_one_role_only_are_left_out_and_said_so(app, caplog, profile, left_out):
    with caplog.at_level(logging.WARNING, logger="trinity.hydra"):
        env = app(f"+hardware={profile}").ray_kwargs.ray_init.runtime_env.env_vars
    messages = [r.getMessage() for r in caplog.records if r.name == "trinity.hydra"]
    assert (
        len(messages) == 1
        and f"left out: {left_out} (to give one to every process: +{ENV_VARS}.NAME='VALUE')" in messages[0]
    )
    assert not {"CPU_AFFINITY_CONF", "TASK_QUEUE_ENABLE", "NCCL_CUMEM_ENABLE", "PYTORCH_CUDA_ALLOC_CONF"} & set(env)


def test_a_secret_left_out_is_masked_in_the_warning(app, caplog, tmp_path, monkeypatch):
    site_profiles(tmp_path, monkeypatch, tok="extends: a100\nenv:\n  trainer:\n    HF_TOKEN: hf_planted\n")
    with caplog.at_level(logging.WARNING, logger="trinity.hydra"):
        app("+hardware=tok")
    assert "HF_TOKEN=***" in caplog.text and "hf_planted" not in caplog.text


def test_a_value_exported_in_the_driver_wins(app, monkeypatch):
    monkeypatch.setenv("HCCL_CONNECT_TIMEOUT", "999")
    assert app("+hardware=ascend910b").ray_kwargs.ray_init.runtime_env.env_vars.HCCL_CONNECT_TIMEOUT == "999"


def test_hw_resolvers_in_an_apps_own_config(app):
    (app.folder / "own.yaml").write_text(
        "device: ${hw:trainer.device,ascend910b}\n"
        "backend: ${hw:trainer.process_group_backend,ascend910b}\n"
        "rollout_memory: ${hw:explorer.rollout_model.gpu_memory_utilization,a100}\n"
        "env: ${hw.verl_env:h100}\n"
        "unnamed: ${hw:trainer.device}\n"
        "typo: ${hw:trainer.devic,a100}\n"
    )
    cfg = app(config="own")
    assert (cfg.device, cfg.backend) == ("npu", "cpu:gloo,npu:hccl")
    assert cfg.rollout_memory is None  # only trinity's schema default sets it on a100
    assert (cfg.env["VERL_PLATFORM"], cfg.env["TRINITY_HARDWARE"]) == ("nvidia", "h100")
    with pytest.raises(
        InterpolationResolutionError,
        match=r"name the hardware profile as the last argument, e\.g\. \$\{hw:trainer.device,ascend910b\}",
    ):
        cfg.unnamed
    with pytest.raises(InterpolationResolutionError, match="did you mean 'trainer.device'"):
        cfg.typo


def test_hydras_plugin_scan_imports_no_heavy_package(tmp_path):
    probe = (
        "import sys; from hydra.core.plugins import Plugins; from hydra.plugins.search_path_plugin import "
        "SearchPathPlugin; "
        "found = [c.__name__ for c in Plugins.instance().discover(SearchPathPlugin)]; "
        "print(found, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'ray', 'verl', 'pydantic', "
        "'vllm')))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['TrinityProfilesSearchPathPlugin'] []"


ENV_BLOCK = st.dictionaries(
    st.sampled_from(["HWTEST_A", "HWTEST_B", "HWTEST_C"]), st.sampled_from(["0", "1"]), max_size=3
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(common=ENV_BLOCK, trainer=ENV_BLOCK, rollout=ENV_BLOCK)
def test_every_variable_is_either_shared_by_both_roles_or_reported(
    app, caplog, tmp_path, monkeypatch, common, trainer, rollout
):
    """verl's one env holds exactly what trainer and rollout both get; every other variable is named as left out."""
    env = {"common": common, "trainer": trainer, "rollout": rollout}
    site_profiles(tmp_path, monkeypatch, prop=yaml.safe_dump({"extends": "cpu", "env": env}))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trinity.hydra"):
        got = OmegaConf.to_container(app("+hardware=prop").ray_kwargs.ray_init.runtime_env.env_vars)
    roles = {"trainer": {**common, **trainer}, "rollout": {**common, **rollout}}
    shared = {n: v for n, v in roles["trainer"].items() if roles["rollout"].get(n) == v}
    assert {n: v for n, v in got.items() if n.startswith("HWTEST_")} == shared
    told = " ".join(r.getMessage() for r in caplog.records if r.name == "trinity.hydra")
    for role, values in roles.items():
        for name, value in values.items():
            assert (f"{name}={value}" in told) == (name not in shared), (role, name)
