"""Platform records agree with the Ray that is installed, and with every shipped profile."""

from trinity import paths
from trinity.config.profiles import available, load_profile
from trinity.platforms import PLATFORMS, SHARED_FACTS, accelerator_keys


def test_records_match_rays_accelerator_managers():
    from ray._private.accelerators import get_accelerator_manager_for_resource

    for platform in PLATFORMS.values():
        if platform.ray_request == "none":
            continue
        manager = get_accelerator_manager_for_resource(platform.ray_resource_key)
        assert manager.get_resource_name() == platform.ray_resource_key
        assert manager.get_visible_accelerator_ids_env_var() == platform.visible_devices_env


def test_every_shipped_profile_agrees_with_its_platform():
    dirs = paths.profile_dirs()
    for name in available(dirs):
        facts = load_profile(name, dirs).profile.facts
        platform = PLATFORMS[facts.device_type]
        assert all(getattr(facts, f) == getattr(platform, f) for f in SHARED_FACTS), name


def test_accelerator_keys():
    assert accelerator_keys() == {"GPU", "NPU"}


def test_verl_platform_names_are_verls_own():
    """nvidia and huawei are verl's built-in names; cpu is registered by the module the record names."""
    names = {p.device_type: p.verl_platform for p in PLATFORMS.values()}
    assert names == {"cuda": "nvidia", "npu": "huawei", "cpu": "cpu"}
    assert PLATFORMS["cpu"].verl_modules == ("trinity.runtime.verl.cpu_platform",)
    assert PLATFORMS["cuda"].verl_modules == PLATFORMS["npu"].verl_modules == ()


def test_verl_env_names_the_platform_and_the_modules_that_register_it():
    assert PLATFORMS["npu"].verl_env() == {"VERL_PLATFORM": "huawei"}
    assert PLATFORMS["cuda"].verl_env() == {"VERL_PLATFORM": "nvidia"}
    assert PLATFORMS["cpu"].verl_env() == {
        "VERL_PLATFORM": "cpu",
        "VERL_USE_EXTERNAL_MODULES": "trinity.runtime.verl.cpu_platform",
    }


def test_the_allocator_variable_a_profile_sets_is_its_platforms():
    """A colocated sync turns the trainer's expandable segments off while it exports and back on where that variable
    had them on (runtime/sync/device_ipc.py): the name must be the one the platform's allocator reads."""
    dirs = paths.profile_dirs()
    for name in available(dirs):
        profile = load_profile(name, dirs).profile
        env = {**profile.env.common, **profile.env.trainer}
        platform = PLATFORMS[profile.facts.device_type]
        assert {k for k in env if k.endswith("_ALLOC_CONF")} <= {platform.alloc_conf_env}, name
    assert {p.alloc_conf_env for p in PLATFORMS.values()} == {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NPU_ALLOC_CONF", None}
