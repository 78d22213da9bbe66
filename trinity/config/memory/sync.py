"""What a weight sync holds at once in the trainer and in an engine, per device.

A sync moves the weights in pieces (runtime/sync/pieces.py): consecutive weights of one dtype up to
synchronizer.sync_bucket_mib together, a larger weight alone. p is the largest piece (the bucket, or the largest weight
in the rollout dtype, never more than the sync sends in all), and "in flight" the largest piece and the one after it
(p + the bucket). By channel (synchronizer.sync_channel):

    process_group  engine: the piece it is copying into the model and the next one it receives: its receiver
                   allocates the next buffer while the last one is still referenced (runtime/sync/group.py): in flight.
                   trainer: the piece's weights cast to the rollout dtype and the flat buffer it broadcasts: 2p.
    object_store   (memory) nothing on an accelerator: a piece stays in host memory and each weight is copied from it
                   into its parameter. Where the devices' memory is the host's (the cpu profile), both roles map the
                   store's pages of the pieces in flight (the store places each piece anew until freed space is reused):
                   shared pages, in each role's resident memory from the first sync on; and Ray rebuilds a tensor
                   from the bytes torch pickles its storage as: in the engine those bytes and the tensor, in the
                   trainer the flat piece and its bytes, 2p each during the sync.
    device_ipc     (memory, colocate on devices that map memory between processes) a trainer rank beside an engine
                   worker: the piece's buffer in the rollout dtype, allocated first and filled a weight at a time, and
                   the one before it, which the engine may still map (vLLM's layer-by-layer reload holds a module's
                   weights until its last one came, maybe in the next piece): 2p; and one weight as FSDP gathers it,
                   in the trainer's fp32, cast as it is copied in. The engine maps the buffer and copies from it, with
                   no buffer of its own; its weights are awake, its KV cache still asleep (checks.py). A rank with no
                   engine worker beside it exports nothing.
    files          (checkpoint) nothing on an accelerator; where the devices' memory is the host's, the trainer gathers
                   every weight before writing the file, the engine reads one weight at a time.

Measured on the CPU with a 0.5B model (fp32, 256 MiB buckets: the embedding, 519 MiB, is the largest piece):
an engine's resident memory rose by 770 MiB while it received a gloo broadcast (in flight: 775 MiB); over a memory
sync the engine and the trainer mapped 770 MiB of the store each, and the engine rose by another 1012 MiB while loading
the embedding's piece (2p: 1039 MiB). benchmarks/scale.py. A device_ipc sync of the same model (bf16 rollout, 64 MiB
buckets) on two real trainer ranks, the export stood in for and the last buffer kept as an engine mapping it keeps
it: the ranks' peak rose by 1110 and 648 MiB, against 1039 MiB predicted (2p and the fp32 embedding as gathered; the
count before, 2p, said 519). benchmarks/device_ipc_sync.py.
"""

from typing import NamedTuple

from ..sync_methods import DEVICE_IPC, FILES, OBJECT_STORE, PROCESS_GROUP
from .estimate import Item

SYNC = "weight sync"


class SyncSetup(NamedTuple):
    """The weights one sync moves, in bytes of the rollout dtype, and how."""

    channel: str  # synchronizer.sync_channel
    bucket: int  # synchronizer.sync_bucket_mib, in bytes
    largest: int  # the largest weight it sends
    total: int  # every weight it sends (a tied lm_head is sent under both names)
    gathered: int = 0  # the largest weight as FSDP gathers it on a rank, in the trainer's fp32

    @property
    def piece(self) -> int:
        """The largest piece: the bucket, or a weight larger than it alone; at most everything."""
        return min(max(self.bucket, self.largest), self.total)

    @property
    def in_flight(self) -> int:
        """The largest piece and the one after it."""
        return min(self.piece + self.bucket, self.total)


def engine_sync_items(sync: SyncSetup, host: bool) -> list[Item]:
    """An engine's memory for the sync: `host` where its devices' memory is the host's."""
    if sync.channel == PROCESS_GROUP:
        return [Item("weight sync: the piece being loaded and the next one received", sync.in_flight, SYNC)]
    if not host:
        return []  # object_store and files stage in host memory; device_ipc maps the trainer's buffer
    if sync.channel == OBJECT_STORE:
        return [
            _store_pages(sync),
            Item("weight sync: a piece as Ray rebuilds it (bytes and tensor)", 2 * sync.piece, SYNC),
        ]
    if sync.channel == FILES:
        return [Item("weight sync: one weight read from the file", sync.largest, SYNC)]
    return []


def trainer_sync_items(sync: SyncSetup, host: bool) -> list[Item]:
    """Trainer rank 0's memory for the sync (device_ipc: a rank beside an engine worker's): `host` where its devices'
    memory is the host's."""
    if sync.channel == PROCESS_GROUP:
        return [Item("weight sync: a piece cast to the rollout dtype and flattened", 2 * sync.piece, SYNC)]
    if sync.channel == DEVICE_IPC:
        return [
            Item(
                "weight sync: the piece's buffer exported to the engines (device IPC) and the one before it, which "
                "they may still map",
                2 * sync.piece,
                SYNC,
            ),
            Item("weight sync: one weight as FSDP gathers it (fp32), cast into the buffer", sync.gathered, SYNC),
        ]
    if not host:
        return []
    if sync.channel == OBJECT_STORE:
        return [_store_pages(sync), Item("weight sync: the flat piece and its pickled bytes", 2 * sync.piece, SYNC)]
    if sync.channel == FILES:
        return [Item("weight sync: every weight gathered for the file", sync.total, SYNC)]
    return []


def _store_pages(sync: SyncSetup) -> Item:
    return Item("Ray object store pages of the pieces in flight (mapped from the first sync on)", sync.in_flight)
