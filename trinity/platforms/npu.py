"""Huawei Ascend NPUs (torch_npu registers the `npu` device and the `hccl` backend)."""

from .base import Platform

NPU = Platform(
    device_type="npu",
    collective_backend="hccl",
    ray_resource_key="NPU",
    ray_request="resources",  # resources={"NPU": n}
    visible_devices_env="ASCEND_RT_VISIBLE_DEVICES",
    noset_visible_devices_env="RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES",
    vendor_packages=("torch", "torch_npu", "vllm", "vllm-ascend"),
    verl_platform="huawei",
    vllm_modules=("vllm", "vllm_ascend"),  # vllm_ascend registers itself through vllm.platform_plugins
    install_extra="npu",
    alloc_conf_env="PYTORCH_NPU_ALLOC_CONF",
    # vllm-ascend 0.23's NPUWorker.sleep takes level 2, but verl 0.9.1 keeps level 1 on NPUs ("sleep_mode=2 is not
    # supported on vllm-ascend for now", verl/third_party/vllm/__init__.py): level 1 until it is run there
    rollout_sleep_level=1,
    device_ipc=True,
    # torch_npu/multiprocessing/reductions.py (since torch_npu 2.6.0.post3, in 2.9.0 and 2.10.0.post4) replaces
    # torch's reduce_tensor when torch_npu is imported; its memory export needs CANN >= 8.3.RC1 and a driver (Ascend
    # HDK) >= 25.3.RC1 to map memory a process mapped before (every sync after the first): verl 0.9.1's
    # check_ipc_version_support (verl/utils/device.py) asks the same of npu-smi's "Software Version"
    ipc_reason="torch_npu's NPU IPC: torch_npu.multiprocessing.reductions replaces reduce_tensor (CANN >= 8.3.RC1, "
    "driver: Ascend HDK >= 25.3.RC1)",
    ipc_driver="25.3.rc1",
)
