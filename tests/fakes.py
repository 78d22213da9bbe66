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
) -> Probes:
    """Probes of a machine with the given accelerators, env, packages and files."""

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
        exists=lambda path: path in files,
        distributions=lambda: list(distributions),
    )
