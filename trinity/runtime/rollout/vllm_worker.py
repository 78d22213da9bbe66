"""Methods vLLM mixes into each of its workers (`worker_extension_cls`); the engine calls them with
`collective_rpc`, so every worker of an engine runs them at once, in its own process, on its device.

What crosses `collective_rpc` is plain data only: vLLM's multiprocess engine encodes the arguments
with msgspec and decodes them without types (a dataclass arrives as a dict, a tuple as a list, a
tensor as a list or not at all), and refuses bytes of 4 GiB or more. So tensor specs travel as
`[name, shape, dtype]` lists, and weights never: a collective sync's arrive over the weight-sync group,
a checkpoint's as a file path (read a tensor at a time, the OS sharing the file's pages between the
node's workers), a memory sync's a piece at a time (sync/pieces.py) as where to find the file the engine's
actor on this node wrote once (mapped, not copied), or as the trainer's device buffer's handle (sync/device_ipc.py).

A memory sync is one reload fed across calls: `trinity_begin` starts vLLM's reload on a thread of
the worker that takes each piece `trinity_piece` hands it, and `trinity_end` ends it (vLLM's
layer-by-layer reload processes a layer once all its weights came, so the pieces of one sync must
reach one reload).

Weights load through the worker's `reload_weights` (vLLM's layer-by-layer reload), which works
where the plain `load_weights` does not: vLLM's CPU build packs each linear weight for its kernels
at load time and leaves the parameter empty. Every reload runs in vLLM's config and on the worker's
device (`_trinity_context`): vLLM 0.31's Worker sets the config around its runner's reload, vLLM
0.23's does not, and vllm-ascend's NPUWorker has no reload of its own (its runner's, a
GPUModelRunner's, is called; vllm-ascend's own update path sets the worker's device around it). A
tied output head shares the embedding's weight but keeps a processed copy of its own, so it is
processed again after each load. With LoRA adapters, a sync's tensors are the adapter's: written as
a PEFT folder on the worker's node and added to vLLM's LoRA manager as a new adapter id per weight
version. Nothing here imports vLLM at module level.
"""

import contextlib
import queue
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Plain = list  # [name, shape, dtype]: a WeightSpec as it crosses collective_rpc


class WeightSyncWorker:
    """Weight-sync methods of a vLLM worker (`self` is the worker: `rank`, `device`, `parallel_config`, `model_runner`,
    and on vLLM's own workers `reload_weights`)."""

    def trinity_sync_rank(self, first_rank: int) -> int:
        """This worker's rank in the weight-sync group: the engine's first rank plus its worker index.

        A dense engine's data-parallel replicas all say data_parallel_rank 0; vLLM keeps the replica in
        data_parallel_index (vLLM 0.23 and 0.31)."""
        parallel = self.parallel_config
        replica = getattr(parallel, "data_parallel_index", None)
        replica = parallel.data_parallel_rank if replica is None else replica
        return first_rank + (replica or 0) * parallel.world_size + self.rank

    def trinity_join(
        self, backend: str, host: str, port: int, first_rank: int, world_size: int, timeout_s: float, group_name: str
    ) -> int:
        """Join the weight-sync group named `group_name` (synchronizer.group_name), leaving one it held (the group is
        formed anew after an engine was replaced); returns the rank taken."""
        from ..sync import group

        self.trinity_leave()
        rank = self.trinity_sync_rank(first_rank)
        self.trinity_group = group.join(backend, host, port, rank, world_size, timeout_s, group_name)
        return rank

    def trinity_receive(self, specs: list[Plain], limit: int, adapter: dict | None = None) -> int:
        """Receive each tensor of `specs` from the trainer's broadcast (pieces of up to `limit` bytes), in order, into
        the model (or, given `adapter`, as that LoRA adapter version); returns the count.

        Every broadcast is received even when loading fails part-way, so trainer rank 0 never waits for a
        receiver that gave up; the load's error is raised after the last tensor. The tensors arrive a piece
        ahead of the reload: the broadcast runs in bursts instead of waiting on each layer's."""
        from ..sync import group

        shapes = [(shape, dtype) for _, shape, dtype in specs]
        with group.receiving(self.trinity_group, shapes, self.device, limit) as tensors:
            named = zip((name for name, _, _ in specs), tensors, strict=True)
            if adapter is None:
                self._trinity_reload(named)
            else:
                self._trinity_adapter(dict(named), adapter)
        return len(specs)

    def trinity_leave(self) -> None:
        """Leave the weight-sync group (the engine's stage ended and the engine is kept for the next)."""
        from ..sync import group

        group.leave(getattr(self, "trinity_group", None))
        self.trinity_group = None

    def trinity_load(self, source: str | list[str], adapter: dict | None = None) -> int:
        """Load a safetensors file's path (checkpoint sync) or a model folder's files' paths (a new stage's weights)
        into the model, a tensor at a time, or given `adapter`, as that LoRA adapter version; returns the count."""
        paths = [source] if isinstance(source, str) else source
        if adapter is None:
            counted = _Counted(_file_tensors(paths))
            self._trinity_reload(iter(counted))
            return counted.count
        weights = dict(_file_tensors(paths))
        self._trinity_adapter(weights, adapter)
        return len(weights)

    # --- a memory sync: pieces fed to one reload --------------------------------------------------------------------

    def trinity_begin(self, adapter: dict | None, timeout_s: float) -> None:
        """A memory sync starts: its pieces follow."""
        self._trinity_pieces = _PieceLoad(self, adapter, timeout_s)

    def trinity_piece(self, source: str | dict, specs: list[Plain], visible_devices_env: str | None) -> int:
        """One piece: where its file is under this node's piece roots (`piece_roots`), or {device key: handle} of the
        trainer's device buffers (the key of this worker's device, built here: its node, which the engine's actor on
        it recorded before vLLM started this process, and its physical device); returns when the reload has taken its
        tensors (so the sender may drop it)."""
        from ..sync import pieces

        load, file = self._trinity_pieces, ""
        if isinstance(source, str):
            file = str(_found(source, load.timeout_s))
            flat = _mapped(Path(file), specs)
        else:
            from ..sync import device_ipc

            index = self.device.index or 0
            flat = device_ipc.open_handle(source, device_ipc.device_key(visible_devices_env, index), index)
        tensors = pieces.split(flat, [shape for _, shape, _ in specs])
        return load.take(list(zip((name for name, _, _ in specs), tensors)), file)

    def trinity_end(self) -> int:
        """The sync's last piece came: finish the reload (or register the adapter); returns the tensors loaded."""
        load, self._trinity_pieces = self._trinity_pieces, None
        return load.end()

    def trinity_abort(self) -> None:
        """A sync that failed part-way: stop its reload (the engine's weights are then mixed; the run ends)."""
        load, self._trinity_pieces = getattr(self, "_trinity_pieces", None), None
        if load is not None:
            load.abort()

    def _trinity_adapter(self, weights: dict, adapter: dict) -> None:
        """Write the adapter's version where this worker's node reads it, register it with vLLM's LoRA manager
        under its own id (requests then name it), and drop this engine's older versions' folders."""
        import shutil
        from pathlib import Path

        from ..weights.lora import publish_adapter

        folder = Path(adapter["folder"])
        folder.parent.mkdir(parents=True, exist_ok=True)
        publish_adapter(folder, weights, adapter["config"])
        self.model_runner.add_lora(lora_request(adapter["name"], adapter["id"], str(folder)))
        for old in folder.parent.iterdir():
            if old != folder and not old.name.startswith(f"{folder.name}.draft"):
                shutil.rmtree(old, ignore_errors=True)

    @contextmanager
    def _trinity_context(self) -> Iterator[None]:
        """vLLM's config and this worker's device around a reload, also on a thread of the worker's own (a memory
        sync's: the current device is per thread) and where the worker does not set them (vLLM 0.23, vllm-ascend)."""
        import torch

        device = torch.device(self.device)
        if device.type != "cpu":
            torch.get_device_module(device.type).set_device(device)
        config = getattr(self, "vllm_config", None)
        with _vllm_config(config), torch.device(device), torch.no_grad():
            yield

    def _trinity_reload(self, weights: Iterator[tuple[str, Any]]) -> None:
        # vllm-ascend's NPUWorker has no reload of its own; its runner (a GPUModelRunner) has it
        reload = getattr(self, "reload_weights", None) or self.model_runner.reload_weights
        with self._trinity_context():
            reload(weights_iterator=weights)
        model = self.model_runner.get_model()
        head = getattr(model, "lm_head", None)
        if head is not None and getattr(model.config, "tie_word_embeddings", False):
            method = getattr(head, "quant_method", None)
            if method is not None:
                method.process_weights_after_loading(head)


def lora_request(name: str, adapter_id: int, path: str) -> Any:
    """vLLM's LoRARequest for an adapter folder (vLLM imported here, in its worker process)."""
    from vllm.lora.request import LoRARequest

    return LoRARequest(name, adapter_id, path)


@contextmanager
def _vllm_config(config: Any) -> Iterator[None]:
    """vLLM's current config set to `config` for the block (nothing to set without one)."""
    if config is None:
        yield
        return
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(config):
        yield


def _file_tensors(paths: list[str]) -> Iterator[tuple[str, Any]]:
    """Each tensor of safetensors files, one at a time: the file is mapped, so the node's workers share its pages and
    none holds more than the tensor it loads."""
    from safetensors import safe_open

    for path in paths:
        with safe_open(path, framework="pt", device="cpu") as file:
            for name in file.keys():  # noqa: SIM118 (safe_open is no dict)
                yield name, file.get_tensor(name)


class _Counted:
    """Pairs passed on as they come, counted."""

    def __init__(self, pairs: Iterator[tuple[str, Any]]) -> None:
        self.pairs, self.count = pairs, 0

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        for pair in self.pairs:
            self.count += 1
            yield pair


def piece_roots() -> tuple[Path, ...]:
    """Where a memory sync's piece files may be on this node, in the order an engine's actor chooses: shared memory
    where it has room for the piece, else the temporary folder (whose pages the node's workers share as well)."""
    return Path("/dev/shm"), Path(tempfile.gettempdir())


def _found(relative: str, timeout_s: float) -> Path:
    """The piece file `relative` under one of this node's roots, once the engine's actor here has written it (maybe
    still under way as the head asks: the actors of an engine's parts write theirs concurrently)."""
    deadline = time.monotonic() + timeout_s
    while True:
        for root in piece_roots():
            if (root / relative).exists():
                return root / relative
        if time.monotonic() > deadline:
            raise TimeoutError(f"no engine actor on this node wrote {relative} within {timeout_s:g} s")
        time.sleep(0.005)


def _mapped(path: Path, specs: list[Plain]) -> Any:
    """A piece's file mapped as one flat tensor of its dtype: read from the page cache every worker of the node
    shares, not copied."""
    import math

    import torch

    from ..sync.pieces import DTYPE_BYTES

    dtype = specs[0][2]
    size = sum(math.prod(shape) for _, shape, _ in specs) * DTYPE_BYTES[dtype]
    return torch.from_file(str(path), shared=True, size=size, dtype=torch.uint8).view(getattr(torch, dtype))


class _PieceLoad:
    """One memory sync into this worker: vLLM's reload on a thread of its own, fed a piece at a time (an adapter's
    pieces are gathered, then registered at the end)."""

    def __init__(self, worker: WeightSyncWorker, adapter: dict | None, timeout_s: float) -> None:
        self.worker, self.adapter, self.timeout_s = worker, adapter, timeout_s
        self.inbox: queue.Queue = queue.Queue(maxsize=1)
        self.taken = threading.Event()  # the reload has taken every tensor of the piece in the inbox (or ended)
        self.error: BaseException | None = None
        self.count, self.fed, self.previous = 0, 0, ""
        self.gathered: dict = {}
        self.thread = None
        if adapter is None:
            self.thread = threading.Thread(target=self._reload, name="trinity-reload", daemon=True)
            self.thread.start()

    def _reload(self) -> None:
        try:
            self.worker._trinity_reload(self._feed())
        except BaseException as exc:  # noqa: BLE001 (raised to the engine by the next take or end)
            self.error = exc
        finally:
            self.taken.set()

    def _feed(self) -> Iterator[tuple[str, Any]]:
        while (piece := self.inbox.get()) is not None:
            yield from piece
            del piece  # nothing of a taken piece stays referenced here
            self.fed += 1
            self.taken.set()

    def take(self, named: list[tuple[str, Any]], file: str) -> int:
        """Hand one piece's tensors to the reload and wait until it took them; then its file is no longer needed on
        this node (the mapping stays valid while the reload holds a tensor of it)."""
        if self.adapter is not None:  # small: kept whole (a device buffer is the trainer's, so copied)
            self.gathered.update((name, tensor.clone()) for name, tensor in named)
        else:
            self.taken.clear()
            fed = self.fed
            self.inbox.put(named)
            del named
            if not self.taken.wait(self.timeout_s):
                raise TimeoutError(f"vLLM's reload did not take a piece within {self.timeout_s:g} s")
            self._raise_error()
            if self.fed == fed:
                raise RuntimeError("vLLM's reload ended before the sync's last piece")
        self.count += 1
        self._forget(file)
        return self.count

    def end(self) -> int:
        """Finish the reload (or register the adapter); returns the pieces loaded."""
        if self.adapter is not None:
            self.worker._trinity_adapter(self.gathered, self.adapter)
        else:
            self.inbox.put(None)
            self.thread.join(self.timeout_s)
            if self.thread.is_alive():
                raise TimeoutError(f"vLLM's reload did not finish within {self.timeout_s:g} s")
            self._raise_error()
        self._forget("")
        return self.count

    def abort(self) -> None:
        """Stop the reload where it is (its error, if any, was raised already)."""
        if self.thread is not None and self.thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self.inbox.get_nowait()  # a piece it never took: make room for the end
            self.inbox.put(None)
            self.thread.join(self.timeout_s)
        self._forget("")

    def _raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    def _forget(self, file: str) -> None:
        """Remove the previous piece's file on this node (every worker took it before this piece came)."""
        if self.previous:
            Path(self.previous).unlink(missing_ok=True)
        self.previous = file
