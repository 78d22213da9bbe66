"""A platform: the facts of one device type, as plain attributes (heavy work stays elsewhere)."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Platform:
    """What every device of one type shares, whatever the SKU."""

    device_type: str  # torch device type
    collective_backend: str  # torch.distributed backend between devices
    ray_resource_key: str  # Ray resource that stands for one device
    ray_request: str  # how an actor asks Ray for devices: num_gpus, resources or none
    visible_devices_env: str | None  # set by Ray in each actor that asks for devices
    noset_visible_devices_env: str | None  # stops Ray from setting it
    vendor_packages: tuple[str, ...] = ()  # distributions that drive this device
    verl_platform: str = ""  # name in verl's platform registry (VERL_PLATFORM); chosen by us, never by verl's detection
    # modules verl imports first (VERL_USE_EXTERNAL_MODULES) to register that platform
    verl_modules: tuple[str, ...] = ()
    # what engine_type vllm needs installed here (a platform plugin is loaded by vLLM, never by us)
    vllm_modules: tuple[str, ...] = ()
    install_extra: str = "cpu"  # the pyproject extra that installs the packages of this device
    vllm_install: str = ""  # how vLLM is installed here when the extra does not install it
    # attn_implementation -> (module it needs, the command that installs it), for kernels no extra installs
    attn_modules: dict[str, tuple[str, str]] = field(default_factory=dict)
    # whether another process on the same device can map a tensor's device memory (torch.multiprocessing's
    # reduce_tensor gives a handle it rebuilds): a colocated engine then takes the trainer's weights without a copy
    # through host memory (synchronizer.sync_channel: device_ipc)
    device_ipc: bool = False
    ipc_reason: str = ""  # where that comes from, shown by --explain
    # the accelerator driver release device IPC needs ("" where the mechanism alone decides): the node's driver is
    # read (platforms/ipc.py), and below this release colocate syncs through Ray's object store instead
    ipc_driver: str = ""
    alloc_conf_env: str | None = None  # the variable its caching allocator reads its settings from
    # the deepest level vLLM sleeps at here where a weight sync refills every weight before the engine generates
    # again (colocate): 2 keeps no copy of the weights in host memory (vLLM >= 0.8.5), 1 keeps one
    rollout_sleep_level: int = 1

    def verl_env(self) -> dict[str, str]:
        """Variables that make verl take this platform instead of detecting one."""
        env = {"VERL_PLATFORM": self.verl_platform}
        if self.verl_modules:
            env["VERL_USE_EXTERNAL_MODULES"] = ",".join(self.verl_modules)
        return env

    def process_group_backend(self) -> str:
        """torch.distributed backend string of an FSDP group: gloo for CPU tensors plus the device's collective."""
        parts = {"cpu": "gloo", self.device_type: self.collective_backend}
        return ",".join(f"{device}:{backend}" for device, backend in parts.items())


# Facts a hardware profile repeats and that must agree with its platform.
SHARED_FACTS = (
    "collective_backend",
    "ray_resource_key",
    "ray_request",
    "visible_devices_env",
    "noset_visible_devices_env",
)
