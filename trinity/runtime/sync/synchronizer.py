"""The synchronizer: moves trainer weights to every rollout engine by `synchronizer.sync_method`.

- a collective (gloo, nccl, hccl): trainer rank 0 broadcasts each tensor to a group of
  `weight_sync_world_size` (rank 0 plus every rollout device), on the backend the profile derived;
- `checkpoint`: rank 0 writes a safetensors file (atomically); the engines load it;
- `memory`: rank 0 returns the weights into Ray's object store; the engines read them from there.
Every sync is versioned with the trainer step whose weights it carries.

It lives in the driver: it only starts calls on the trainer ranks and the engines, and the
weights go between them without passing through it. As an actor of its own it cost a process
(~135 MiB: Ray's worker) and a hop per sync.
"""

import time
from collections.abc import Callable
from pathlib import Path

from ...config.schema import RunConfig
from ...config.schema.synchronizer import COLLECTIVE_METHODS
from ..calls import RoleFailed
from ..protocols import SyncResult

Wait = Callable[[list, float], list]  # the driver's watched wait on role calls, with a timeout in seconds


class SyncTimeout(RoleFailed):
    """A sync that did not finish within synchronizer.sync_timeout."""


class Synchronizer:
    """Owns the weight-sync group and the version the engines hold; `wait` waits on the calls it makes."""

    def __init__(self, config: RunConfig, run_dir: Path, wait: Wait) -> None:
        self.config, self.run_dir, self.wait = config, run_dir, wait
        self.method = config.synchronizer.sync_method
        self.timeout = config.synchronizer.sync_timeout

    def setup(self, trainer_ranks: list, engines: list) -> dict:
        """For a collective: form the group (rank 0 is trainer rank 0) and learn the tensors' order."""
        self.ranks, self.engines = trainer_ranks, engines
        if self.method not in COLLECTIVE_METHODS:
            return {"method": self.method}
        host, port = self._wait([trainer_ranks[0].rendezvous.remote()], "finding the weight-sync group's address")[0]
        world = self.config.synchronizer.weight_sync_world_size
        joins = [trainer_ranks[0].join_sync_group.remote(self.method, host, port, world, self.timeout)]
        joins += [
            engine.join_sync_group.remote(self.method, host, port, i + 1, world, self.timeout)
            for i, engine in enumerate(engines)
        ]
        self._wait(joins, "forming the weight-sync group")
        self.specs = self._wait([r.weight_specs.remote() for r in trainer_ranks], "listing the weights")[0]
        return {"method": self.method, "world_size": world, "tensors": len(self.specs)}

    def sync(self, version: int) -> SyncResult:
        """Move the trainer's current weights to every engine as `version`; returns method, seconds, weight_version."""
        started = time.perf_counter()
        if self.method in COLLECTIVE_METHODS:
            calls = [r.broadcast_weights.remote() for r in self.ranks] + [
                e.receive_weights.remote(self.specs, version) for e in self.engines
            ]
            self._wait(calls, f"broadcasting weights v{version}")
        elif self.method == "memory":
            refs = [r.engine_weights.remote() for r in self.ranks]
            self._wait(refs[1:], f"gathering weights v{version}")
            self._wait([e.load_weights.remote(refs[0], version) for e in self.engines], f"loading weights v{version}")
        else:
            path = self._write(version)
            self._wait([e.load_weights.remote(str(path), version) for e in self.engines], f"loading weights v{version}")
            path.unlink(missing_ok=True)
            path.with_suffix(".json").unlink(missing_ok=True)
        return SyncResult(method=self.method, seconds=time.perf_counter() - started, weight_version=version)

    def _write(self, version: int) -> Path:
        folder = self.run_dir / "sync"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"weights_v{version}.safetensors"
        self._wait([r.write_weights.remote(str(path), version) for r in self.ranks], f"writing weights v{version}")
        return path

    def _wait(self, refs: list, what: str) -> list:
        try:
            return self.wait(refs, self.timeout)
        except TimeoutError:
            raise SyncTimeout(f"{what} took longer than synchronizer.sync_timeout={self.timeout} s") from None
