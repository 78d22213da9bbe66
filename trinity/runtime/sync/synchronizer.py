"""The synchronizer: moves trainer weights to every rollout engine by the channel of `synchronizer.sync_method`
(config/sync_methods.py; `synchronizer.sync_channel` is derived):

- process_group (a collective: gloo, nccl, hccl): trainer rank 0 broadcasts each piece to a group of
  `weight_sync_world_size` (rank 0 plus every rollout device), on the backend the profile derived;
- files (`checkpoint`): rank 0 writes a safetensors file (atomically); the engines read it;
- object_store / device_ipc (`memory`): the weights go piece by piece (pieces.py, at most
  `synchronizer.sync_bucket_mib` each): rank 0 puts each piece into Ray's object store, from which every engine
  loads it; or, where trainer and engines share devices whose platform maps memory between processes, each rank
  beside an engine worker exports the piece's device buffer and the engine worker on its device maps it (the other
  ranks answer {}: device_ipc.py). One piece is in
  flight at a time: the next is gathered once every engine has loaded this one.
Every sync is versioned with the trainer step whose weights it carries.

It lives in the driver: it only starts calls on the trainer ranks and the engines, and the
weights go between them without passing through it (an object-store piece's reference is handed on, not its
bytes). As an actor of its own it cost a process (~135 MiB: Ray's worker) and a hop per sync.
"""

import time
from collections.abc import Callable
from pathlib import Path

from ...config import sync_methods
from ...config.schema import RunConfig
from ..driver.watcher import RoleFailed
from ..roles.protocols import SyncResult
from . import files, pieces

Wait = Callable[[list, float], list]  # the driver's watched wait on role calls, with a timeout in seconds


class SyncTimeout(RoleFailed):
    """A sync that did not finish within synchronizer.sync_timeout."""


class Synchronizer:
    """Owns the weight-sync group, the pieces a sync moves, and the version the engines hold; `wait` waits on the
    calls it makes."""

    def __init__(self, config: RunConfig, run_dir: Path, wait: Wait) -> None:
        sync = config.synchronizer
        self.config, self.run_dir, self.wait = config, run_dir, wait
        self.method, self.channel = sync_methods.method(sync.sync_method), sync.sync_channel
        self.timeout, self.limit = sync.sync_timeout, sync.bucket_bytes
        self.specs: list = []
        self.plan: list[list] = []  # the pieces of a memory sync, each a list of specs
        self.deadline: float | None = None  # a sync's: its calls share synchronizer.sync_timeout

    def setup(self, trainer_ranks: list, engines: list) -> dict:
        """For a collective: form the group (rank 0 is trainer rank 0); for a collective or memory: learn the tensors
        and their order."""
        self.ranks, self.engines = trainer_ranks, engines
        if self.method.collective:
            self._join()
        if self.channel == sync_methods.FILES:
            return {"method": self.method.name, "channel": self.channel}
        self.specs = self._wait([r.weight_specs.remote() for r in trainer_ranks], "listing the weights")[0]
        self.plan = pieces.plan(self.specs, self.limit)
        info = {"method": self.method.name, "channel": self.channel, "tensors": len(self.specs)}
        return info | {"pieces": len(self.plan)}

    def _join(self) -> None:
        host, port = self._wait([self.ranks[0].rendezvous.remote()], "finding the weight-sync group's address")[0]
        world = self.config.synchronizer.weight_sync_world_size
        joins = [self.ranks[0].join_sync_group.remote(self.method.name, host, port, world, self.timeout)]
        joins += [
            engine.join_sync_group.remote(self.method.name, host, port, i + 1, world, self.timeout)
            for i, engine in enumerate(self.engines)
        ]
        self._wait(joins, "forming the weight-sync group")

    def sync(self, version: int) -> SyncResult:
        """Move the trainer's current weights to every engine as `version`; returns method, seconds, weight_version."""
        started = time.perf_counter()
        self.deadline = time.monotonic() + self.timeout
        try:
            MOVERS[self.channel](self, version)
        finally:
            self.deadline = None
        return SyncResult(method=self.method.name, seconds=time.perf_counter() - started, weight_version=version)

    def _broadcast(self, version: int) -> None:
        calls = [r.broadcast_weights.remote() for r in self.ranks]
        calls += [e.receive_weights.remote(self.specs, version) for e in self.engines]
        self._wait(calls, f"broadcasting weights v{version}")

    def _files(self, version: int) -> None:
        path = files.checkpoint_file(self.run_dir, version)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._wait([r.write_weights.remote(str(path), version) for r in self.ranks], f"writing weights v{version}")
        self._wait([e.load_weights.remote(str(path), version) for e in self.engines], f"loading weights v{version}")
        files.remove(path)

    def _pieces(self, version: int) -> None:
        """Piece by piece: every rank gathers it; then every engine loads it, from rank 0's object or from the
        buffer each rank exported on its device."""
        count = len(self.plan)
        for index, specs in enumerate(self.plan):
            what = f"weights v{version}, piece {index + 1} of {count}"
            refs = [r.weight_piece.remote(index, len(specs)) for r in self.ranks]
            if self.channel == sync_methods.OBJECT_STORE:
                self._wait(refs[1:], f"gathering {what}")
                piece = refs[0]  # the engines take it from the object store: its bytes never reach the driver
            else:
                piece = {key: h for handles in self._wait(refs, f"exporting {what}") for key, h in handles.items()}
            loads = [e.load_piece.remote(piece, specs, index, count, version) for e in self.engines]
            self._wait(loads, f"loading {what}")
        self._wait([r.end_weight_pieces.remote() for r in self.ranks], f"releasing weights v{version}")

    def _wait(self, refs: list, what: str) -> list:
        left = self.timeout if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)
        try:
            return self.wait(refs, left)
        except TimeoutError:
            raise SyncTimeout(f"{what} took longer than synchronizer.sync_timeout={self.timeout} s") from None


# synchronizer.sync_channel -> how the weights move (every channel of config/sync_methods.py has one)
MOVERS: dict[str, Callable[[Synchronizer, int], None]] = {
    sync_methods.PROCESS_GROUP: Synchronizer._broadcast,
    sync_methods.FILES: Synchronizer._files,
    sync_methods.OBJECT_STORE: Synchronizer._pieces,
    sync_methods.DEVICE_IPC: Synchronizer._pieces,
}
