"""`engine_type: vllm`: vLLM's AsyncLLM behind the rollout engine interface, on NVIDIA GPUs, on Ascend NPUs
(through the vllm-ascend platform plugin, which vLLM loads by itself) and on CPUs (vLLM's CPU build).

vLLM batches concurrent requests itself (continuous batching), so `generate` hands each request
straight to it instead of the base class's batches. A weight update waits for the requests in
flight, holds new ones back, and resets the prefix cache, so every request sees one version
(`vllm_turns`, which also says how the weights and the KV cache sleep and wake apart in colocate).
How vLLM's workers map onto the plan's actors and onto the weight-sync group: see `vllm_args`;
how the parts of an engine meet: `vllm_parts`.
vLLM is imported in `setup`, after Ray has set the role's env; the engine arguments come from
the resolved config only.
"""

import asyncio
import os
import shutil
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ...config.schema import RunConfig
from ..weights import lora
from . import vllm_core_watch, vllm_parts
from .base import WEIGHTS, RolloutEngine, WeightSpec
from .samples import Sample, Sampling
from .vllm_args import ENGINE_ENV, Topology, engine_env, engine_kwargs, sleep_mode, topology
from .vllm_staging import launch_name, staged
from .vllm_turns import Turns
from .vllm_worker import piece_roots

HEAD_WAIT_S = 600  # how long a part waits for its head to publish its address


class VllmEngine(RolloutEngine):
    """One vLLM engine (its head part), or the headless workers of one of its parts."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.llm: Any = None  # vLLM's AsyncLLM (head only)
        self.head: Any = None  # the head's actor handle (other parts only)
        self.workers: Any = None  # vLLM's executor of this part's workers (other parts only)
        self.topology: Topology | None = None
        self.turns = Turns()
        self.adapter: Any = None  # the LoRARequest of the weight version's adapter (LoRA runs, after the first sync)
        self.base = ""
        self._adapters = 0  # ids handed out: vLLM caches an adapter by id, so every load takes a new one
        self._sync: AsyncExitStack | None = None  # a memory sync under way (head): its exclusive turn
        self._slot: dict | None = None  # the adapter slot the memory sync under way fills

    # --- starting -----------------------------------------------------------------------------------

    def restage(self, **kwargs: Any) -> bool:
        """Keep the running engine for the next stage when it would start alike (the same arguments but the model's
        path, one part, no adapter); that stage's setup then loads its weights into it."""
        if not self._starts_alike(kwargs["config"], kwargs["index"]):
            return False
        running = {"llm": self.llm, "vllm": self.vllm, "topology": self.topology, "turns": self.turns}
        super().restage(**kwargs)
        self.__dict__.update(running)
        return True

    def _starts_alike(self, config: RunConfig, index: int) -> bool:
        if self.llm is None or self.topology.parts > 1 or lora.moves_adapter(self.config) or lora.moves_adapter(config):
            return False
        topo = topology(config, index)
        return (engine_kwargs(self.config, "", self.topology), engine_env(self.config, self.topology)) == (
            engine_kwargs(config, "", topo),
            engine_env(config, topo),
        )

    async def setup(self, model_path: str, version: int) -> dict:
        """Start vLLM on this actor's devices: the engine on the head part, headless workers elsewhere. An engine kept
        from the stage before loads the stage's weights instead."""
        if self.llm is not None:
            return self._done(await self._reload(model_path, version))
        self.version = version
        self.topology = topo = topology(self.config, self.index)
        self.vllm = vllm_api(engine_env(self.config, topo))
        vllm_parts.announce_node()  # before vLLM starts this part's workers: they key the trainer's buffers by it
        start = lora.sources(model_path, self.config)
        self.base, base = start.base, start.base
        if start.adapter and lora.moves_adapter(self.config):
            self.adapter = self._request_for(self._next_adapter_id(), start.adapter)
        started = time.perf_counter()
        if topo.parts == 1:
            self.llm = self._start_engine(engine_kwargs(self.config, base, topo))
        elif topo.is_head:
            address = vllm_parts.head_address()
            vllm_parts.publish(self._key(model_path, version), (address, vllm_parts.current_actor()))
            self.llm = self._start_engine(engine_kwargs(self.config, base, topo, address))
        else:
            vllm_parts.announce_node_address()
            address, self.head = await asyncio.to_thread(
                vllm_parts.wait_for, self._key(model_path, version), HEAD_WAIT_S
            )
            kwargs = engine_kwargs(self.config, base, topo, address)
            self.workers = await asyncio.to_thread(self._start_workers, kwargs)
        if self.llm is not None:
            self._core_watch = asyncio.create_task(vllm_core_watch.watch(self))  # held: the loop keeps weak refs
        if (
            self.llm is not None and self.adapter is not None
        ):  # loaded now: an adapter that fails at generate kills vLLM
            await self.llm.add_lora(self.adapter)
        self.log.info(
            "vLLM %s part %d/%d ready in %.1f s", self.name, topo.part, topo.parts, time.perf_counter() - started
        )
        info = {
            "engine": self.name,
            "model_path": model_path,
            "weight_version": version,
            "part": topo.part,
            "parts": topo.parts,
        }
        return self._done(info | (await self._serve(model_path) if topo.is_head else {}))  # the head answers requests

    def _engine_number(self) -> int:
        return self.topology.engine

    async def _reload(self, model_path: str, version: int) -> dict:
        """The stage's weights (its model folder's safetensors files, all in one reload) into the kept engine."""
        files = sorted(str(f) for f in Path(model_path).glob("*.safetensors"))
        if not files:  # weights vLLM reads only at start (.bin, say): start it again, in this process
            self.close()
            return await self.setup(model_path, version)
        started = time.perf_counter()
        await self._rpc("trinity_leave")  # the last stage's weight-sync group: this stage forms its own
        await self._update("trinity_load", (files,), version)
        self.base = model_path
        self.log.info(
            "vLLM %s kept; %d weight file(s) of %s loaded in %.1f s",
            self.name,
            len(files),
            model_path,
            time.perf_counter() - started,
        )
        info = {"engine": self.name, "model_path": model_path, "weight_version": version, "part": 0, "parts": 1}
        return info | await self._serve(model_path)

    def _start_engine(self, kwargs: dict) -> Any:
        self.log.info("vLLM engine arguments: %s", kwargs)
        return self.vllm.AsyncLLM.from_engine_args(self.vllm.AsyncEngineArgs(**kwargs))

    def _start_workers(self, kwargs: dict) -> Any:
        """This part's workers; they take their orders from the head's engine."""
        self.log.info("vLLM headless worker arguments: %s", kwargs)
        config = self.vllm.AsyncEngineArgs(**kwargs).create_engine_config(headless=True)
        return self.vllm.MultiprocExecutor(config)

    def _key(self, model_path: str, version: int) -> str:
        """Where the head of this engine publishes itself, unique to this launch of this run."""
        return f"trinity/{self._launch()}/{model_path}/{version}"

    def _launch(self) -> Path:
        """This launch of this engine (every part of it): its run's Ray job on its cluster (`launch_name`), then the
        engine's name."""
        import ray

        context = ray.get_runtime_context()
        return Path(launch_name(context.gcs_address, context.get_job_id())) / self.name.rsplit(".part", 1)[0]

    # --- the OpenAI endpoint: the head serves it, for every part of its engine ---------------------------------

    async def openai_url(self) -> str | None:
        """The engine's endpoint, once set up: the head's, also for a headless part."""
        await self.set_up.wait()
        return await self.head.openai_url.remote() if self.head is not None else self.api_url

    async def history(self, session: str) -> list:
        """The calls of `session` at the engine's endpoint (the head's)."""
        return await self.head.history.remote(session) if self.head is not None else super().history(session)

    # --- generating ------------------------------------------------------------------------------------

    async def generate(self, prompt_ids: list[int], n: int, sampling: Sampling) -> tuple[int, list[Sample]]:
        """(weight version, `n` samples continuing `prompt_ids`); a headless part asks its head."""
        if self.llm is None:
            return await self.head.generate.remote(prompt_ids, n, sampling)
        self._log_request(prompt_ids, n, sampling)  # vLLM's own line (enable_log_requests) names no sampling
        await self._awake()
        self.turns.refuse_stale(self.name)
        async with self.turns.request():
            version, final = self.version, None
            async for output in self.llm.generate(
                {"prompt_token_ids": prompt_ids},
                self._params(n, sampling),
                request_id=uuid.uuid4().hex,
                lora_request=self.adapter,
            ):
                final = output
            return version, [_sample(c, sampling.logprobs) for c in final.outputs]

    def _params(self, n: int, sampling: Sampling) -> Any:
        return self.vllm.SamplingParams(
            n=n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=max(sampling.top_k, 0),  # vLLM: 0 turns top-k off
            max_tokens=sampling.max_tokens,
            min_tokens=sampling.min_tokens,
            repetition_penalty=sampling.repetition_penalty,
            logprobs=sampling.logprobs,  # the sampled token's own log-prob, and the k most likely beside it
            ignore_eos=self.config.explorer.rollout_model.ignore_eos,  # on to max_tokens past the end of sequence
            output_kind=self.vllm.RequestOutputKind.FINAL_ONLY,
        )

    # --- weights -----------------------------------------------------------------------------------------

    async def join_sync_group(
        self, backend: str, host: str, port: int, rank: int, world_size: int, timeout_s: float
    ) -> None:
        """Every worker of the engine joins as a rank of its own (the head asks them all; other parts' workers are among
        them)."""
        if self.llm is None:
            return
        first = self.topology.first_sync_rank(rank)
        ranks = await self.llm.collective_rpc(
            "trinity_join",
            timeout=timeout_s,
            args=(backend, host, port, first, world_size, timeout_s, self.config.synchronizer.group_name),
        )
        self.log.info("weight-sync ranks of %s: %s of %d", self.name, ranks, world_size)

    async def receive_weights(self, specs: list[WeightSpec], version: int) -> int:
        """Every worker receives the trainer's broadcast, piece by piece, into its shard of the model."""
        limit = self.config.synchronizer.bucket_bytes
        return await self._update("trinity_receive", ([spec.plain() for spec in specs], limit), version)

    async def load_weights(self, weights: str, version: int) -> int:
        """A safetensors file (checkpoint sync, published weights), loaded by every worker a tensor at a time."""
        return await self._update("trinity_load", (weights,), version)

    async def load_piece(self, piece: Any, specs: list[WeightSpec], index: int, count: int, version: int) -> int:
        """Piece `index` of `count` of a memory sync: a host tensor is written once to this node's shared memory, where
        the workers here map it; a device buffer's handles go to the workers as they are. The head drives one reload
        across the pieces, holding the engine's turn from the first to the last."""
        source = await asyncio.to_thread(staged, piece, self._pieces_folder(), version, index)
        if self.llm is None:  # a headless part: the head's call reaches its workers, which read the file written here
            if index == count - 1:
                self.version = version
            return version
        try:
            if index == 0:
                await self._begin_pieces()
            plain = [spec.plain() for spec in specs]
            await self._rpc("trinity_piece", source, plain, self.visible_devices_env)
            if index == count - 1:
                await self._rpc("trinity_end")
                await self._applied(self._slot, version)
        except BaseException:
            await self._end_pieces(aborted=True)
            raise
        if index == count - 1:
            await self._end_pieces()
        return version

    async def _begin_pieces(self) -> None:
        await self._awake([WEIGHTS])  # the KV cache stays asleep while the trainer holds the sync's buffers
        await self._end_pieces()  # a sync that never reached its last piece (its run ended) holds nothing more
        self._sync = AsyncExitStack()
        await self._sync.enter_async_context(self.turns.exclusive())
        self._slot = self._adapter_slot() if lora.moves_adapter(self.config) else None
        await self._rpc("trinity_begin", self._slot, self.config.synchronizer.sync_timeout)

    async def _end_pieces(self, aborted: bool = False) -> None:
        stack, self._sync, self._slot = self._sync, None, None
        try:
            if aborted:
                await self._rpc("trinity_abort")
        finally:
            if stack is not None:
                await stack.aclose()

    def _pieces_folder(self) -> Path:
        """This engine's folder of memory-sync pieces, under one of each node's piece roots (vllm_worker.piece_roots:
        every node chooses its own, and its workers look under each)."""
        return Path("trinity-sync") / self._launch()

    async def _rpc(self, method: str, *args: Any) -> list:
        return await self.llm.collective_rpc(method, timeout=self.config.synchronizer.sync_timeout, args=args)

    async def _update(self, method: str, args: tuple, version: int) -> int:
        if self.llm is None:  # the head's workers include this part's
            self.version = version
            return version
        await self._awake([WEIGHTS])
        slot = self._adapter_slot() if lora.moves_adapter(self.config) else None
        async with self.turns.exclusive():
            await self._rpc(method, *args, *(() if slot is None else (slot,)))
            await self._applied(slot, version)
        return version

    async def _applied(self, slot: dict | None, version: int) -> None:
        """New weights are in every worker: requests name the adapter they filled (the last one's is dropped), cached
        prefixes computed with the old weights go, and the engine holds `version` (every weight of it, without an
        adapter: what a sleep discarded is back)."""
        if slot is not None:
            previous, self.adapter = self.adapter, self._request_for(slot["id"], slot["folder"])
            if previous is not None:
                await self.llm.remove_lora(previous.lora_int_id)
        else:
            self.turns.discarded = False
        await self.llm.reset_prefix_cache()
        self.version = version

    def _adapter_slot(self) -> dict:
        """Where the workers put the next adapter, and the id they register it under (plain data, for collective_rpc).

        A new id and folder each time, never a weight version's: a re-sync of the same version (resuming) under an
        id vLLM has cached would serve the cached adapter."""
        adapter_id = self._next_adapter_id()
        return {
            "name": lora.adapter_of(self.config).name,
            "id": adapter_id,
            "folder": str(self._adapter_root() / f"a{adapter_id}"),
            "config": lora.peft_config(lora.adapter_of(self.config), self.base),
        }

    def _next_adapter_id(self) -> int:
        self._adapters += 1  # vLLM's adapter ids start at 1
        return self._adapters

    def _adapter_root(self) -> Path:
        """This engine's folder for its adapters on each of its workers' nodes, unique to this launch."""
        return Path(tempfile.gettempdir()) / "trinity-lora" / self._launch()

    def _request_for(self, adapter_id: int, folder: str) -> Any:
        """The LoRARequest naming the adapter registered as `adapter_id` from `folder` (and its base_model_name, which
        vLLM records, as Trinity-RFT hands it)."""
        adapter = lora.adapter_of(self.config)
        return self.vllm.LoRARequest(adapter.name, adapter_id, folder, base_model_name=adapter.base_model_name)

    def peak_device_mb(self) -> float | None:
        """None: vLLM's device memory is its worker processes', not this actor's."""
        return None

    # --- sharing the devices with the trainer (colocate) ------------------------------------------------------

    async def sleep(self, level: int = 1) -> bool:
        """Hand the device memory to the trainer: weights to pinned host memory (level 1) or discarded for a sync to
        refill (level 2), and the KV cache freed (vllm_turns.py)."""
        if self.llm is None or not sleep_mode(self.config):  # started without it: it cannot sleep
            return False
        if self.turns.partly_asleep():  # what a sync left asleep (its KV cache) wakes first: vLLM sleeps it whole
            await self._awake()
        async with self.turns.exclusive():
            if not self.turns.asleep:
                await self.llm.sleep(level)
                self.turns.slept(level)
        return True

    async def wake_up(self, tags: list[str] | None = None) -> bool:
        """Take back the device memory of `tags` (weights, kv_cache; None: all of it); returns whether some still
        sleeps. Generating wakes all of it, a weight update the weights."""
        await self._awake(tags)
        return bool(self.turns.asleep)

    async def _awake(self, tags: list[str] | None = None) -> None:
        if not self.turns.to_wake(tags):
            return
        async with self.turns.exclusive():
            wake = self.turns.to_wake(tags)
            if wake:
                await self.llm.wake_up(tags=wake)
                self.turns.asleep.difference_update(wake)

    def close(self) -> None:
        """Stop vLLM's engine and worker processes (before Ray kills this actor), and drop this node's adapters."""
        for part in (self.llm, self.workers):
            if part is not None:
                part.shutdown()
        self.llm = self.workers = None
        for root in piece_roots():  # a memory sync's pieces left on this node
            shutil.rmtree(root / self._pieces_folder(), ignore_errors=True)
        if lora.moves_adapter(self.config):  # the head's workers wrote them on this part's node too
            shutil.rmtree(self._adapter_root(), ignore_errors=True)


def vllm_api(env: dict[str, str]) -> SimpleNamespace:
    """The vLLM classes the engine uses, imported now, after `env` and ENGINE_ENV are set (a value the role's env has
    wins)."""
    for name, value in (ENGINE_ENV | env).items():
        os.environ.setdefault(name, value)
    from vllm import AsyncEngineArgs, SamplingParams
    from vllm.lora.request import LoRARequest
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.executor.multiproc_executor import MultiprocExecutor

    return SimpleNamespace(
        AsyncEngineArgs=AsyncEngineArgs,
        AsyncLLM=AsyncLLM,
        LoRARequest=LoRARequest,
        SamplingParams=SamplingParams,
        RequestOutputKind=RequestOutputKind,
        MultiprocExecutor=MultiprocExecutor,
    )


def _sample(completion: Any, k: int = 0) -> Sample:
    """A vLLM CompletionOutput as a Sample; its end-of-sequence token, when generated, is kept. vLLM says why it
    ended: at any of the model's end tokens (its generation config may name several) or at max_tokens. Each position's
    entry holds the sampled token and, asked for k, the k of rank 1..k (the sampled one among them or beside them)."""
    ids = list(completion.token_ids)
    logprobs = [entry[token].logprob for token, entry in zip(ids, completion.logprobs)]
    top = None
    if k > 0:
        ranked = (sorted((e.rank, t, e.logprob) for t, e in at.items() if e.rank <= k) for at in completion.logprobs)
        top = [{t: lp for _, t, lp in entry} for entry in ranked]
    return Sample(ids, logprobs, completion.text, completion.finish_reason == "stop", top)
