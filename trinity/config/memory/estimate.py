"""What an estimate is made of: labelled byte counts, some held throughout, some only during one phase."""

from typing import NamedTuple

GIB = 1 << 30
# Device memory the runtime takes before any tensor: the CUDA/CANN context, kernels, the
# NCCL/HCCL buffers of the process group. A round allowance, not a measurement: contexts are
# 0.3-0.6 GiB, collective buffers a few hundred MB.
DEVICE_RUNTIME = 1 * GIB
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


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
