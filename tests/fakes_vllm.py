"""Fakes of vLLM's AsyncLLM, AsyncEngineArgs, SamplingParams and workers, for what vLLM's CPU build
cannot run here: engines of several workers (tensor parallel), GPU and NPU engine arguments, headless parts.
tests/runtime/rollout/test_vllm_real.py runs the engine on the real vLLM.

They stand in only for vLLM itself, and keep its boundary: `collective_rpc` arguments cross a msgpack
encoding without types, as in vLLM's multiprocess engine (a dataclass arrives as a dict, a tensor does not
encode), and weights load through the worker's `model_runner.reload_weights`. The engine actor, its
argument building, the worker extension (mixed into the fake worker as vLLM mixes it into its own), the
weight-sync group and torch are real.
"""

import asyncio
import os
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import msgspec
import torch

from trinity.runtime.rollout.vllm_worker import WeightSyncWorker
from trinity.runtime.sync import device_ipc


class FakeModel(torch.nn.Module):
    """A real torch module with vLLM's `load_weights(iterable of (name, tensor))` contract."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(4, 3)
        self.head = torch.nn.Linear(3, 4, bias=False)
        self.loaded: list[str] = []

    def load_weights(self, weights) -> set:
        params = dict(self.named_parameters())
        for name, tensor in weights:
            params[name].data.copy_(tensor)
            self.loaded.append(name)
        return set(params)


class FakeModelRunner:
    """vLLM's model runner as the extension uses it: `reload_weights(weights_iterator=...)` and `get_model()`."""

    def __init__(self):
        self.model = FakeModel()
        self.model.config = SimpleNamespace(tie_word_embeddings=False)
        self.loras: list = []  # the LoRARequests of add_lora, in order

    def reload_weights(self, weights_iterator=None) -> None:
        self.model.load_weights(weights_iterator)

    def add_lora(self, request) -> bool:
        self.loras.append(request)
        return True

    def get_model(self) -> FakeModel:
        return self.model


class FakeVllmWorker:
    """The attributes of a vLLM worker the extension uses: rank, device, parallel_config, model_runner.

    vLLM 0.23 and 0.31 say data_parallel_rank 0 in every replica of a dense engine; the replica is
    data_parallel_index."""

    def __init__(self, rank: int, world_size: int, data_parallel_index: int = 0):
        self.rank, self.device = rank, torch.device("cpu")
        self.parallel_config = SimpleNamespace(
            world_size=world_size, data_parallel_rank=0, data_parallel_index=data_parallel_index
        )
        self.model_runner = FakeModelRunner()

    def get_model(self) -> FakeModel:
        return self.model_runner.get_model()

    def reload_weights(self, *args, **kwargs) -> None:
        self.model_runner.reload_weights(*args, **kwargs)  # vLLM's Worker sets its config around the runner's reload


class Worker(FakeVllmWorker, WeightSyncWorker):
    """What `worker_extension_cls` makes: vLLM's worker class with our extension among its bases."""


@dataclass
class FakeSamplingParams:
    n: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    min_tokens: int
    logprobs: int | None
    output_kind: Any
    repetition_penalty: float = 1.0  # vLLM's default: none
    ignore_eos: bool = False  # vLLM's default: a reply ends at the end of sequence


@dataclass
class FakeEngineArgs:
    """Keeps the keyword arguments it was given (vLLM's would build a VllmConfig from them)."""

    kwargs: dict = field(default_factory=dict)

    def __init__(self, **kwargs):
        self.kwargs = kwargs


class FakeAsyncLLM:
    """A stand-in for vLLM's AsyncLLM: answers generate with scripted tokens; runs collective_rpc on its
    workers at once (each in a thread, as each vLLM worker is a process of its own); sleeps and wakes."""

    instances: list = []
    # vLLM's mark of a dead engine core (vllm_core_watch.py reads it): never set here. Without it each watch task died
    # of an AttributeError nobody awaited, reported when the garbage collector dropped the task: once inside a later
    # test (its captured log holds the report), during pytest's ast.parse of a module it imported, where CPython
    # 3.11.7 then raised "AST constructor recursion depth mismatch"
    errored = False

    def __init__(self, args: FakeEngineArgs):
        self.args = args.kwargs
        workers = self.args["tensor_parallel_size"] * self.args["pipeline_parallel_size"]
        self.workers = [Worker(r, workers) for r in range(workers)]
        self.calls: list = []
        self.gate: asyncio.Event | None = None  # when set by a test, generate waits for it
        # the node the engine's actor recorded for the workers vLLM starts now, which inherit its environment
        self.node_at_start = os.environ.get(device_ipc.NODE_ENV)
        FakeAsyncLLM.instances.append(self)

    @classmethod
    def from_engine_args(cls, args: FakeEngineArgs) -> "FakeAsyncLLM":
        return cls(args)

    async def generate(self, prompt, params, request_id, lora_request=None):
        self.calls.append(("generate", prompt["prompt_token_ids"], params))
        self.lora_request = lora_request
        if self.gate is not None:
            await self.gate.wait()
        outputs = [
            SimpleNamespace(
                token_ids=[7, 8, 2],
                logprobs=[
                    {7: SimpleNamespace(logprob=-0.5)},
                    {8: SimpleNamespace(logprob=-1.0)},
                    {2: SimpleNamespace(logprob=-0.25)},
                ],
                text=f"s{i}",
                finish_reason="stop",  # vLLM's CompletionOutput: the model ended it (2 is its end token here)
            )
            for i in range(params.n)
        ]
        yield SimpleNamespace(outputs=outputs, finished=True)

    async def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        args = tuple(msgspec.msgpack.decode(msgspec.msgpack.encode(list(args))))  # what vLLM's engine process receives
        self.calls.append(("collective_rpc", method, args))
        results: list = [None] * len(self.workers)

        def call(i, worker):
            try:
                results[i] = getattr(worker, method)(*args, **(kwargs or {}))
            except Exception as exc:  # vLLM raises a worker's error from collective_rpc
                failures.append(exc)

        failures: list[Exception] = []
        threads = [threading.Thread(target=call, args=(i, w)) for i, w in enumerate(self.workers)]
        await asyncio.to_thread(lambda: [t.start() for t in threads] and [t.join() for t in threads])
        if failures:
            raise failures[0]
        return results

    async def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))
        return True

    async def add_lora(self, request) -> bool:
        self.calls.append(("add_lora", request))
        return True

    async def remove_lora(self, lora_id: int) -> bool:
        self.calls.append(("remove_lora", lora_id))
        return True

    async def sleep(self, level=1):
        self.calls.append(("sleep", level))

    async def wake_up(self, tags=None):
        self.calls.append(("wake_up", tags))

    def shutdown(self):
        self.calls.append(("shutdown",))


class FakeDeviceIpc:
    """A stand-in for device IPC (CUDA's or torch_npu's), which needs a device: `export` registers a buffer and gives
    a handle naming it; `open_handle`, device_ipc.open_handle's interface, maps the handle back on a device index.
    The routing by device key, the pieces and the loads around it are real."""

    def __init__(self):
        self.buffers: dict[bytes, torch.Tensor] = {}
        self.opened: list[tuple[int, int]] = []  # (the buffer's number, the device index it was opened on)

    def export(self, buffer: torch.Tensor) -> bytes:
        handle = str(len(self.buffers)).encode()
        self.buffers[handle] = buffer.reshape(-1)
        return handle

    def open_handle(self, handles: dict, key: str, device_index: int) -> torch.Tensor:
        handle = handles[key]
        self.opened.append((int(handle), device_index))
        return self.buffers[handle]


def fake_vllm_api(env: dict) -> SimpleNamespace:
    """What `vllm_engine.vllm_api(env)` returns, with the fakes in vLLM's place."""
    return SimpleNamespace(
        AsyncEngineArgs=FakeEngineArgs,
        AsyncLLM=FakeAsyncLLM,
        SamplingParams=FakeSamplingParams,
        RequestOutputKind=SimpleNamespace(FINAL_ONLY="final_only"),
        MultiprocExecutor=None,
        LoRARequest=fake_lora_request,
    )


def fake_lora_request(name: str, lora_id: int, path: str, base_model_name: str | None = None) -> SimpleNamespace:
    """vLLM's LoRARequest, its fields trinity sets (`vllm_worker.lora_request` and the engine's `vllm.LoRARequest`)."""
    return SimpleNamespace(lora_name=name, lora_int_id=lora_id, lora_path=path, base_model_name=base_model_name)
