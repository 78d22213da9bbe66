"""Fake machines for detection: probes presenting NPUs or GPUs that cannot exist on this box.

They replace only the `Probes` (the same interface the real probes implement); detection,
profile matching and the device decision run for real on top of them.
"""

from trinity.platforms.detect import Probes

NPU_SMI_HEADER = (
    "        NPU ID                         Chip ID                        Chip Logic ID                  Chip Name\n"
)


def npu_smi_m(chip: str, count: int) -> str:
    """`npu-smi info -m` output: one row per chip plus the Mcu rows that have no logic id."""
    rows = [
        f"        {i}                              0                              {i}                              "
        f"{chip}"
        for i in range(count)
    ]
    rows += [
        f"        {i}                              1                              -                              Mcu"
        for i in range(count)
    ]
    return NPU_SMI_HEADER + "\n".join(rows) + "\n"


def fake_machine(
    *,
    npu_chip: str | None = None,
    npus: int = 8,
    gpu: str | None = None,
    gpus: int = 8,
    gpu_mib: int = 81920,
    via: str = "nvidia-smi",
    dev_files: tuple[str, ...] = (),
    env: dict | None = None,
    versions: dict | None = None,
    files: tuple[str, ...] = (),
    distributions: tuple[str, ...] = (),
    texts: dict[str, str] | None = None,
    machine: str = "x86_64",
    python: str = "3.11",
) -> Probes:
    """Probes of a machine with the given accelerators, env, packages, files (`texts`: those with a content), CPU
    architecture and Python."""

    def run(cmd):
        if cmd[0] == "npu-smi" and npu_chip:
            return npu_smi_m(npu_chip, npus)
        if cmd[0] == "nvidia-smi" and gpu and via == "nvidia-smi":
            return "".join(f"{gpu}, {gpu_mib}\n" for _ in range(gpus))
        return None

    def nvml():
        return [(gpu, gpu_mib / 1024)] * gpus if gpu and via == "nvml" else None

    return Probes(
        glob=lambda pattern: [f for f in dev_files if f.startswith(pattern.rstrip("*"))],
        run=run,
        env=env or {},
        version=lambda name: (versions or {}).get(name),
        nvml=nvml,
        exists=lambda path: path in files or path in (texts or {}),
        distributions=lambda: list(distributions),
        read=lambda path: (texts or {}).get(path),
        machine=lambda: machine,
        python=lambda: python,
    )


def ascend_driver(version: str, root: str = "/usr/local/Ascend", recorded: bool = True) -> dict:
    """A planted Ascend driver (HDK) as its installer leaves it, as `texts` of fake_machine: its version.info under
    `root`, and (`recorded`) /etc/ascend_install.info naming `root`."""
    files = {
        f"{root}/driver/version.info": f"Version={version}\nascendhal_version=7.35.23\npackage_version={version}\n"
    }
    if recorded:
        files["/etc/ascend_install.info"] = (
            f"UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Path_Param={root}\n"
        )
    return files


def cann_toolkit(version: str, arch: str = "x86_64", root: str = "/usr/local/Ascend/ascend-toolkit/latest") -> dict:
    """A planted CANN toolkit's version file (its ascend_toolkit_install.info), as `texts` of fake_machine."""
    info = (
        f"package_name=Ascend-cann-toolkit\nversion={version}\ninnerversion=V100R001C23\narch={arch}\nos=linux\n"
        f"path={root}/{arch}-linux\n"
    )
    return {f"{root}/{arch}-linux/ascend_toolkit_install.info": info}
