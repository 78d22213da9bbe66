"""NVIDIA GPUs."""

from .base import Platform

CUDA = Platform(
    device_type="cuda",
    collective_backend="nccl",
    ray_resource_key="GPU",
    ray_request="num_gpus",  # Ray rejects resources={"GPU": n}
    visible_devices_env="CUDA_VISIBLE_DEVICES",
    noset_visible_devices_env="RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
    vendor_packages=("torch", "vllm"),
    verl_platform="nvidia",
    vllm_modules=("vllm",),
    install_extra="gpu",
    # transformers raises ImportError at model init without it; it builds against the installed torch
    alloc_conf_env="PYTORCH_CUDA_ALLOC_CONF",
    rollout_sleep_level=2,  # verl 0.9.1 sleeps vLLM >= 0.18 at level 2 (verl/third_party/vllm/__init__.py)
    device_ipc=True,
    ipc_reason="CUDA IPC handles: torch.multiprocessing.reductions.reduce_tensor / rebuild_cuda_tensor",
    attn_modules={"flash_attention_2": ("flash_attn", "pip install flash-attn --no-build-isolation")},
)
