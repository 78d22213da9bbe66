"""What a trainer's caching allocator still keeps of a device after `empty_cache`, which the runtime calls before
colocated engines wake (they map their weights and KV cache beside whatever the trainer holds then).

Source: PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, the same design in
c10/core/CachingDeviceAllocator.h; torch_npu's NPUCachingAllocator mirrors it, with PYTORCH_NPU_ALLOC_CONF):
- Block rounding: a request is rounded up to 512 bytes; requests under 1 MiB are packed into 2 MiB segments
  (kSmallBuffer), requests of 1-10 MiB split 20 MiB segments (kLargeBuffer), larger ones get a segment of their
  own rounded up to 2 MiB.
- `empty_cache` (release_cached_blocks -> release_blocks) frees every cached block that is not split: a whole
  segment with nothing allocated in it. A segment that still holds one live block keeps all of its free blocks, and
  a large segment can be split to serve later requests, so without expandable segments nothing but the freed bytes
  themselves bounds what stays cached: the check then counts the whole of the last update's transient memory
  (gradients, FSDP working set, activations, logits) as still cached, the worst case.
- With expandable segments (`expandable_segments:True` in PYTORCH_CUDA_ALLOC_CONF or PYTORCH_NPU_ALLOC_CONF, which
  the NVIDIA and Ascend profiles set for the trainer), a stream's memory is one virtual range mapped in pages of
  20 MiB (large pool; 2 MiB small pool), and `empty_cache` unmaps every page that lies wholly inside a free block
  (ExpandableSegment::unmap rounds the block's start up and its end down to a page). What stays mapped of a freed
  range is at most its first and its last page, the parts shared with live blocks: under 2 x 20 MiB per range.
- The ranges an update leaves free between live blocks (the sharded weights and the Adam moments, allocated per
  parameter at the first step among the first update's freed blocks): FSDP2 reduce-scatters each unit's gradients
  into one buffer, so one range per FSDP unit (every decoder layer and the root: L + 1), and one for the
  activations and logits freed in the backward pass: L + 2 ranges, 2 x 20 MiB each.
Where the devices are host cores there is no caching allocator: freed memory goes back to the process heap.
"""

from typing import NamedTuple

from .estimate import MIB

PAGE = 20 * MIB  # kLargeBuffer: an expandable segment's page in the large pool
PAGES_PER_RANGE = 2  # the first and the last page of a freed range may be shared with live blocks
LABEL = "trainer allocator cache after empty_cache"


class Cache(NamedTuple):
    """What stays cached after empty_cache: a bound in bytes, or none (the freed bytes themselves bound it)."""

    label: str
    bytes: int
    bounded: bool


def cache_after_empty(units: int, expandable_segments: bool) -> Cache:
    """The allocator cache a trainer of `units` FSDP units (each decoder layer and the root, of the actor and a
    critic) keeps after empty_cache, which the runtime calls before the engines wake."""
    if not expandable_segments:
        label = f"{LABEL} (handed back before the engines wake; no expandable segments: the update's freed memory)"
        return Cache(label, 0, bounded=False)
    ranges = units + 1  # a gradient buffer per FSDP unit, and the activations
    label = f"{LABEL} (handed back before the engines wake; {PAGES_PER_RANGE} x {PAGE // MIB} MiB of {ranges} ranges)"
    return Cache(label, PAGES_PER_RANGE * PAGE * ranges, bounded=True)
