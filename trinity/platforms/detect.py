"""What accelerators this machine has, found without importing vendor packages or starting a device runtime.

Every look goes through `Probes`, so tests can present any machine.
"""

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# subprocess, glob and importlib.metadata are imported where used: `trinity config render` with a
# named profile never probes, and these imports are a tenth of its time budget.


def _run(cmd: list[str]) -> str | None:
    """stdout of a command, or None when it is missing, fails or hangs."""
    import subprocess

    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _glob(pattern: str) -> list[str]:
    import glob

    return glob.glob(pattern)


def _read(path: str) -> str | None:
    """A text file's content, or None when it is not there or cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def _machine() -> str:
    import platform

    return platform.machine()


def _python() -> str:
    import sys

    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _distributions() -> list[str]:
    from importlib import metadata

    return sorted({(d.metadata["Name"] or "").lower() for d in metadata.distributions()})


def _nvml() -> list[tuple[str, float]] | None:
    """(name, memory GiB) per GPU through NVML when pynvml is installed; NVML does not create a CUDA context."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver
        return None
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        return [(_text(pynvml.nvmlDeviceGetName(h)), pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**30) for h in handles]
    finally:
        pynvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Probes:
    """The ways detection looks at a machine; replace any of them to present another machine."""

    glob: Callable[[str], list[str]] = _glob
    run: Callable[[list[str]], str | None] = _run
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    version: Callable[[str], str | None] = _version
    nvml: Callable[[], list[tuple[str, float]] | None] = _nvml
    exists: Callable[[str], bool] = os.path.exists
    distributions: Callable[[], list[str]] = _distributions
    read: Callable[[str], str | None] = _read  # a file's text (CANN's version files)
    machine: Callable[[], str] = _machine  # the CPU architecture: x86_64, aarch64
    python: Callable[[], str] = _python  # this Python's major.minor


@dataclass(frozen=True)
class Detection:
    """What was found, and the evidence for it."""

    device_type: str
    names: tuple[str, ...] = ()  # one per device
    memory_gb: float | None = None
    evidence: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return len(self.names)

    def summary(self) -> str:
        """e.g. '8 x NVIDIA H200 (141 GB) from nvidia-smi'."""
        if not self.names:
            return "no accelerator found (" + "; ".join(self.evidence) + ")"
        kinds = sorted(set(self.names))
        memory = f" ({self.memory_gb:.0f} GB)" if self.memory_gb else ""
        return f"{self.count} x {', '.join(kinds)}{memory} from {self.evidence[0]}"


def detect(probes: Probes = Probes()) -> Detection:
    """NPUs first, then NVIDIA GPUs, else the CPU."""
    return (
        _ascend(probes)
        or _nvidia(probes)
        or Detection("cpu", evidence=("no /dev/davinci*, npu-smi, /dev/nvidia* or nvidia-smi",))
    )


def _ascend(probes: Probes) -> Detection | None:
    chips = _npu_smi_chips(probes.run(["npu-smi", "info", "-m"]))
    if chips:
        return Detection("npu", tuple(chips), evidence=("npu-smi info -m",))
    devices = sorted(p for p in probes.glob("/dev/davinci*") if re.fullmatch(r"/dev/davinci\d+", p))
    if devices:
        hint = "npu-smi is not on PATH, so the chip is unknown"
        return Detection(
            "npu", ("Ascend (unknown chip)",) * len(devices), evidence=(f"{len(devices)} x /dev/davinci*", hint)
        )
    return None


def _npu_smi_chips(output: str | None) -> list[str]:
    """Chip names from `npu-smi info -m`: rows of NPU ID, Chip ID, Chip Logic ID, Chip Name; Mcu rows: no logic id."""
    chips = []
    for line in (output or "").splitlines()[1:]:
        cols = line.split(None, 3)
        if len(cols) == 4 and cols[0].isdigit() and cols[2].isdigit():
            chips.append(cols[3].strip())
    return chips


def _nvidia(probes: Probes) -> Detection | None:
    gpus = probes.nvml()
    source = "NVML"
    if not gpus:
        gpus, source = (
            _nvidia_smi(probes.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"])),
            "nvidia-smi",
        )
    if gpus:
        return Detection("cuda", tuple(name for name, _ in gpus), max(mem for _, mem in gpus), evidence=(source,))
    devices = sorted(p for p in probes.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia\d+", p))
    if devices:
        hint = "no NVML or nvidia-smi, so the model is unknown"
        return Detection(
            "cuda", ("NVIDIA (unknown model)",) * len(devices), evidence=(f"{len(devices)} x /dev/nvidia*", hint)
        )
    return None


def _nvidia_smi(output: str | None) -> list[tuple[str, float]]:
    gpus = []
    for line in (output or "").splitlines():
        name, _, mib = line.rpartition(",")
        if name and mib.strip().isdigit():
            gpus.append((name.strip(), int(mib) / 1024))
    return gpus
