"""No accelerator."""

from .base import Platform

CPU = Platform(
    device_type="cpu",
    collective_backend="gloo",
    ray_resource_key="CPU",
    ray_request="none",
    visible_devices_env=None,
    noset_visible_devices_env=None,
    vendor_packages=("torch",),
    verl_platform="cpu",
    verl_modules=("trinity.runtime.verl.cpu_platform",),  # verl has no CPU platform of its own
)
