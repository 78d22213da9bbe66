"""Real torch and transformers on CPU, in a worker process of their own.

Other tests check that the test process has not imported torch (the config path must not), so the
tests that compare our arithmetic with transformers ask this worker instead: one JSON request per
line in, one JSON answer per line out, one worker per test module.
"""

import importlib.util
import json
import subprocess
import sys
import tempfile

import pytest

WORKER = r"""
import json, sys
import torch, transformers
transformers.logging.set_verbosity_error()


def build(config, dtype):
    hf = transformers.AutoConfig.for_model(**config)
    hf._attn_implementation = "sdpa"
    return transformers.AutoModelForCausalLM.from_config(hf, dtype=dtype)


def count(config):
    # parameters() yields a tied embedding once
    return sum(p.numel() for p in build(config, torch.float32).parameters())


def saved(config, tokens, checkpointing):
    # What autograd keeps for backward after a bf16 forward, once per storage, parameters excluded.
    model = build(config, torch.bfloat16)
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    torch.manual_seed(0)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=torch.randint(0, config["vocab_size"], (1, tokens)), use_cache=False)
    return sum(seen.values())


for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps({"count": count, "saved": saved}[request.pop("op")](**request)), flush=True)
"""


class TorchWorker:
    """A process with torch and transformers that answers `count` and `saved` requests."""

    def __init__(self):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True
        )

    def ask(self, op: str, **arguments):
        """The worker's answer to one request."""
        self.proc.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            self.log.seek(0)
            raise RuntimeError(f"the torch worker died:\n{self.log.read()}")
        return json.loads(answer)

    def close(self) -> None:
        """Stop the worker and wait for it."""
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.log.close()


@pytest.fixture(scope="module")
def torch_cpu():
    """A TorchWorker for the module; skipped where torch or transformers is not installed."""
    if not all(importlib.util.find_spec(name) for name in ("torch", "transformers")):
        pytest.skip("torch and transformers are needed for this comparison")
    worker = TorchWorker()
    yield worker
    worker.close()
