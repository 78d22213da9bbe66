"""What an estimate is made of: labelled byte counts, some held throughout, some only during one phase; and what a
role's process holds in its device's memory before its first tensor, by where its tensors live."""

from typing import NamedTuple

GIB = 1 << 30
MIB = 1 << 20
# Device memory the runtime takes before any tensor: the CUDA/CANN context, kernels, the
# NCCL/HCCL buffers of the process group. A round allowance, not a measurement: contexts are
# 0.3-0.6 GiB, collective buffers a few hundred MB.
DEVICE_RUNTIME = 1 * GIB
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


class Runtime(NamedTuple):
    """What a role's process holds in the memory its tensors live in, before its first tensor."""

    label: str
    trainer: int  # a trainer rank's
    engine: int  # a rollout engine's
    # Whether that memory is the host's own (the process's resident memory): then whatever a process stages in host
    # memory (a weight sync's pieces, Ray's object store pages it maps) is in it too.
    host: bool = False


ACCELERATOR = Runtime("device runtime (context, collective buffers)", DEVICE_RUNTIME, DEVICE_RUNTIME)
# hardware.device_type -> its Runtime; a device type not listed is an accelerator. The cpu profile's devices are host
# cores: a role's tensors live in its own resident memory, beside the interpreter, torch and what the role imports
# (verl, transformers), the Ray worker and the allocator's retained pages. Measured as the resident memory of a
# trainer rank and a transformers engine just before they load a model, and checked against whole runs of a 0.5B
# model (benchmarks/scale.py: docs/config.md has the table): torch 2.13 (CPU), verl 0.9.1, transformers 5.10,
# Ray 2.60, Python 3.11.
RUNTIMES: dict[str, Runtime] = {
    "cpu": Runtime(
        "process runtime (interpreter, torch, verl or transformers, Ray's worker)", 600 * MIB, 500 * MIB, host=True
    ),
}


def runtime(device_type: str) -> Runtime:
    """The Runtime of a device type (hardware.device_type)."""
    return RUNTIMES.get(device_type, ACCELERATOR)


class Item(NamedTuple):
    """One use of device memory; `phase` is empty for what is held throughout."""

    label: str
    bytes: int
    phase: str = ""


class Estimate(NamedTuple):
    """A device's memory: what it holds throughout plus its largest phase."""

    items: tuple[Item, ...]

    @property
    def resident(self) -> int:
        """Bytes held throughout."""
        return sum(item.bytes for item in self.items if not item.phase)

    @property
    def phases(self) -> dict[str, int]:
        """Bytes of each phase, in the order the phases first appear."""
        totals: dict[str, int] = {}
        for item in self.items:
            if item.phase:
                totals[item.phase] = totals.get(item.phase, 0) + item.bytes
        return totals

    @property
    def peak_phase(self) -> str:
        """The phase that needs the most memory ('' when there are no phases)."""
        phases = self.phases
        return max(phases, key=phases.__getitem__) if phases else ""

    @property
    def peak(self) -> int:
        """The most the device holds at once."""
        return self.resident + max(self.phases.values(), default=0)
