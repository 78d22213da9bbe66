"""A rollout engine: batches concurrent generate calls, loads new weights between batches, and
joins the weight-sync group. Engine types plug in by implementing `_load`, `_generate` and `_params`."""

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config.auxiliary import engine_view
from ...config.schema import RunConfig
from ...launch.plan import ActorSpec, auxiliary_slot
from ...launch.roles import AUXILIARY
from ..roles.base import Role
from .samples import Sample, Sampling

GATHER_S = 0.002
# explorer.rollout_model.enable_log_requests -> the level of an engine's request log (its role log's child)
REQUEST_LOG_LEVEL = {True: logging.INFO, False: logging.WARNING}


# What of an engine's device memory sleeps and wakes apart (vLLM's tags): a weight sync wakes the weights alone.
WEIGHTS, KV_CACHE = "weights", "kv_cache"
MEMORY = (WEIGHTS, KV_CACHE)


@dataclass(frozen=True)
class WeightSpec:
    """Name, shape and dtype of one tensor the trainer sends, in the order it sends them."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def plain(self) -> list:
        """[name, shape, dtype]: the form that crosses vLLM's collective_rpc intact (a dataclass arrives as a dict)."""
        return [self.name, list(self.shape), self.dtype]


@dataclass
class _Request:
    prompt_ids: list[int]
    n: int
    sampling: Sampling
    future: asyncio.Future


class RolloutEngine(Role):
    """Base of every engine type: the contract the explorer, the synchronizer and the stage loop rely on.

    - Built from keyword arguments (`config`, the resolved RunConfig; `index`, its rollout slot: engine x parts +
      part; the Role's identity), lightly: nothing is loaded before `setup`.
    - `setup(model_path, version) -> dict` loads the model (a checkpoint's, when resuming) on the devices Ray gave
      the actor, as weight version `version`, and returns what it loaded (at least engine, model_path,
      weight_version).
    - `generate(prompt_ids, n, sampling) -> (version, samples)`: `n` samples continuing `prompt_ids`, each with the
      log-prob of every token under the distribution it was drawn from (after temperature, top-k, top-p and
      penalties) and, where `sampling.logprobs` is k > 0, that distribution's k most likely tokens and their
      log-probs at each position, cut after the end-of-sequence token (kept); all of them from weights `version`.
      Concurrent calls may be generated together; `generate_many(requests)` is `generate` of each request, in one call.
      `weight_version()` is the version it holds.
    - Weights arrive between batches, never during one, under their Hugging Face names (tied weights under both):
      `join_sync_group(...)` then `receive_weights(specs, version)` take a collective broadcast in `specs` order;
      `load_weights(path, version)` takes a safetensors file (a checkpoint sync, published weights);
      `load_piece(piece, specs, index, count, version)` takes piece `index` of `count` of a memory sync
      (sync/pieces.py): a flat host tensor from the object store, or {device key: handle} of the trainer's device
      buffers (sync/device_ipc.py), holding the weights of `specs`; a batch never sees a sync's pieces half-loaded.
      All return `version`.
    - `sleep(level) -> bool` frees the device memory for a trainer sharing the devices (colocate) and returns whether
      the engine now sleeps (False: it cannot, and keeps its memory); level 2 may discard the weights, for a weight
      sync to refill before the engine generates (vllm_turns.py). `wake_up(tags) -> bool` takes back the memory of
      `tags` (weights, kv_cache; None: all of it) and returns whether some still sleeps: a sync wakes the weights
      alone. An engine never generates asleep: it wakes itself first or refuses.
    - `close()` exists only on an engine that starts processes of its own (vLLM's); teardown calls it before Ray
      kills the actor.

    An engine type implements `_load`, `_generate` and `_params` (this class batches and loads weights), or
    overrides the public methods (vLLM batches itself). Its entry in trinity/config/engines.py tells the other
    layers its devices, sleep, memory estimate, preflight check and verl name.
    """

    @classmethod
    def plan_arguments(cls, config: RunConfig, spec: ActorSpec, run_dir: Path) -> dict[str, Any]:
        """Slot `spec.rank` of the run's engines (engine x parts + part); an auxiliary model's engine gets the run's
        config seen from its model (config/auxiliary.py) and its slot among that model's engines."""
        if spec.role == AUXILIARY:
            model, slot = auxiliary_slot(config, spec.rank)
            return {"config": engine_view(config, model), "index": slot}
        return {"config": config, "index": spec.rank}

    def __init__(self, *, config: RunConfig, index: int, **identity: Any) -> None:
        super().__init__(**identity)
        self.config, self.index = config, index
        self.version = 0
        self._pending: list[_Request] = []
        self._drainer: asyncio.Task | None = None
        self._weights_lock = asyncio.Lock()  # a batch never sees half-loaded weights
        self.set_up = asyncio.Event()  # setup is done: the endpoint's URL is known (the explorer asks as it sets up)
        self._group = None
        self._loading_pieces = False  # a memory sync's pieces are arriving: the weights lock is held until the last
        self.api: Any = None  # the OpenAI endpoint (openai_api.OpenAIServer), once started
        self.api_url: str | None = None
        # each request this engine and its endpoint take, into the engine's log where enable_log_requests asks
        self.requests = logging.getLogger(f"{self.log.name}.requests")
        self.requests.setLevel(REQUEST_LOG_LEVEL[config.explorer.rollout_model.enable_log_requests])

    def release(self) -> None:
        """Leave this stage's weight-sync group: the next stage forms its own."""
        from ..sync import group

        group.leave(self._group)
        self._group = None

    def restage(self, **kwargs: Any) -> bool:
        """As Role's, keeping the OpenAI endpoint: it goes on listening on its address for the next stage."""
        endpoint = {"api": self.api, "api_url": self.api_url}
        if not super().restage(**kwargs):
            return False
        self.__dict__.update(endpoint)
        return True

    async def setup(self, model_path: str, version: int) -> dict:
        """Load the model (a checkpoint's, when resuming); returns what was loaded."""
        self.version = version
        await asyncio.to_thread(self._load, model_path)
        info = {"engine": self.name, "model_path": model_path, "weight_version": version}
        return self._done(info | await self._serve(model_path))

    def _done(self, info: dict) -> dict:
        """`info`, this engine now set up (a call waiting on its endpoint goes on)."""
        self.set_up.set()
        return info

    async def _serve(self, model_path: str) -> dict:
        """Start the OpenAI endpoint when the config asks for one (a kept engine keeps its own); returns its URL as
        {"openai_url": ...}, or {} without one."""
        rollout = self.config.explorer.rollout_model
        if not rollout.enable_openai_api:
            if self.api is not None:  # kept from a stage that served one
                await self.api.stop()
                self.api = self.api_url = None
            return {}
        if self.api is None:
            import ray

            from .openai_api import OpenAIServer

            self.api = OpenAIServer(self, await asyncio.to_thread(self._tokenizer, model_path))
            port = rollout.base_port + self._engine_number() if rollout.base_port else 0
            self.api_url = await self.api.start(ray.util.get_node_ip_address(), port)
            self.log.info("%s serves the OpenAI API at %s", self.name, self.api_url)
        return {"openai_url": self.api_url}

    async def tokenizer_backend(self, model_path: str) -> dict | None:
        """The served model's tokenizer as the explorer encodes with it (`data.tokenizer.backend_of`), once set up."""
        from ..data.tokenizer import backend_of

        await self.set_up.wait()
        return backend_of(await asyncio.to_thread(self._tokenizer, model_path))

    async def openai_url(self) -> str | None:
        """The base URL (…/v1) of this engine's OpenAI endpoint, once set up; None when it serves none."""
        await self.set_up.wait()
        return self.api_url

    def take_experiences(self, final: bool = False) -> list:
        """Serve mode: the experiences /feedback made since the last call, forgotten here; `final`: the run stops,
        and /feedback refuses what would come after."""
        if self.api is None:
            return []
        self.api.accepting = not final
        made, self.api.rewarded = self.api.rewarded, []
        return made

    def history(self, session: str) -> list:
        """The calls made to the OpenAI endpoint in `session` (history.RecordedCall), forgotten here."""
        return self.api.history.take(session) if self.api is not None else []

    async def generate(self, prompt_ids: list[int], n: int, sampling: Sampling) -> tuple[int, list[Sample]]:
        """(weight version, `n` samples continuing `prompt_ids`); concurrent calls are generated together."""
        self._log_request(prompt_ids, n, sampling)
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Request(prompt_ids, n, sampling, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        return await future

    def _log_request(self, prompt_ids: list[int], n: int, sampling: Sampling) -> None:
        """A line in the engine's log for each request, where explorer.rollout_model.enable_log_requests asks."""
        self.requests.info("request: %d prompt tokens, n=%d, %s", len(prompt_ids), n, sampling)

    async def generate_many(self, requests: list[tuple[list[int], int, Sampling]]) -> list[tuple[int, list[Sample]]]:
        """`generate` of each (prompt_ids, n, sampling) in one call: the explorer's gathered requests, generated
        together."""
        return list(await asyncio.gather(*(self.generate(*request) for request in requests)))

    async def _drain(self) -> None:
        # the explorer sends a step's requests together: let them arrive, then generate once
        await asyncio.sleep(GATHER_S)
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                async with self._weights_lock:
                    results = await asyncio.to_thread(self._generate, [(r.prompt_ids, r.n, r.sampling) for r in batch])
                    version = self.version
            except Exception as exc:  # every waiting caller gets the engine's error
                for request in batch:
                    request.future.set_exception(exc)
                continue
            for request, samples in zip(batch, results):
                request.future.set_result((version, samples))

    def weight_version(self) -> int:
        """The trainer step whose weights this engine holds."""
        return self.version

    async def join_sync_group(
        self, backend: str, host: str, port: int, rank: int, world_size: int, timeout_s: float
    ) -> None:
        """Join the weight-sync group as `rank` (leaving one it held: the group is formed anew after an engine was
        replaced)."""
        from ..sync import group

        group.leave(self._group)
        self._group = None
        name = self.config.synchronizer.group_name
        self._group = await asyncio.to_thread(group.join, backend, host, port, rank, world_size, timeout_s, name)

    async def receive_weights(self, specs: list[WeightSpec], version: int) -> int:
        """Receive every tensor the trainer broadcasts, in `specs` order, into the model."""
        from ..sync import group

        async with self._weights_lock:
            await asyncio.to_thread(self._receive, specs, group)
            self.version = version
        return version

    async def load_weights(self, weights: str, version: int) -> int:
        """Load a safetensors file (checkpoint sync, published weights)."""
        from safetensors.torch import load_file

        async with self._weights_lock:
            await asyncio.to_thread(lambda: self._load_named(load_file(weights).items()))
            self.version = version
        return version

    async def load_piece(self, piece: Any, specs: list[WeightSpec], index: int, count: int, version: int) -> int:
        """Piece `index` of `count` of a memory sync into the model; the weights lock is held from the first piece to
        the last, so no batch generates from half of them."""
        if index == 0:
            await self._weights_lock.acquire()
            self._loading_pieces = True
        try:
            tensors = await asyncio.to_thread(self._piece_tensors, piece, specs)
            await asyncio.to_thread(self._load_named, zip((s.name for s in specs), tensors))
        except BaseException:
            self._end_pieces()
            raise
        if index == count - 1:
            self.version = version
            self._end_pieces()
        return version

    def _end_pieces(self) -> None:
        if self._loading_pieces:
            self._loading_pieces = False
            self._weights_lock.release()

    def _piece_tensors(self, piece: Any, specs: list) -> list:
        """The tensors of `specs` in one piece: split from the object store's flat tensor, or from the trainer's
        buffer on this device, mapped by its handle."""
        from ..sync import device_ipc, pieces

        if isinstance(piece, dict):
            import torch

            index = torch.accelerator.current_device_index()
            piece = device_ipc.open_handle(piece, device_ipc.device_key(self.visible_devices_env, index), index)
        return pieces.split(piece, [s.shape for s in specs])

    def _receive(self, specs: list[WeightSpec], group_module) -> None:
        params = self._params()
        limit = self.config.synchronizer.bucket_bytes
        with group_module.receiving(
            self._group, [(s.shape, s.dtype) for s in specs], self._device(), limit
        ) as received:
            for spec, tensor in zip(specs, received, strict=True):
                params[spec.name].data.copy_(tensor)

    def _load_named(self, weights: Iterable[tuple[str, Any]]) -> None:
        params = self._params()
        for name, tensor in weights:
            params[name].data.copy_(tensor)

    async def sleep(self, level: int = 1) -> bool:
        """Free device memory for a trainer sharing the devices (colocate); returns whether the engine now sleeps
        (one that cannot keeps its memory)."""
        return False

    async def wake_up(self, tags: list[str] | None = None) -> bool:
        """Take the device memory back after `sleep` (`tags`: only that of it, vllm_turns.MEMORY; None: all); returns
        whether some of it still sleeps (False)."""
        return False

    # --- what an engine type implements -----------------------------------------------------------

    def _load(self, model_path: str) -> None:
        raise NotImplementedError

    def _generate(self, requests: list[tuple[list[int], int, Sampling]]) -> list[list[Sample]]:
        raise NotImplementedError

    def _params(self) -> dict[str, Any]:
        """Name -> tensor of every weight the trainer may send (Hugging Face names)."""
        raise NotImplementedError

    def _device(self) -> str:
        return self.config.hardware.device_type

    def _tokenizer(self, model_path: str) -> Any:
        """The tokenizer of the model served (the OpenAI endpoint's)."""
        from transformers import AutoTokenizer

        from ..weights import lora

        base = lora.sources(model_path, self.config).base
        return AutoTokenizer.from_pretrained(base, trust_remote_code=self.config.model.trust_remote_code)

    def _engine_number(self) -> int:
        """Which engine this actor is (engine i's endpoint listens on base_port + i)."""
        return self.index
