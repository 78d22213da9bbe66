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


def build(config, dtype, lora=None):
    hf = transformers.AutoConfig.for_model(**config)
    hf._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(hf, dtype=dtype)
    if lora is None:
        return model
    import peft  # wrapped as verl's peft path wraps it

    model.enable_input_require_grads()
    wrapped = peft.get_peft_model(model, peft.LoraConfig(task_type="CAUSAL_LM", bias="none", **lora))
    for p in wrapped.parameters():  # FSDP2's mixed precision computes the fp32 adapter in the base's dtype
        if p.requires_grad:
            p.data = p.data.to(dtype)
    return wrapped


def count(config):
    # parameters() yields a tied embedding once
    return sum(p.numel() for p in build(config, torch.float32).parameters())


def trainable(config, lora):
    return sum(p.numel() for p in build(config, torch.float32, lora).parameters() if p.requires_grad)


def saved(config, tokens, checkpointing, lora=None, dtype="bfloat16"):
    # What autograd keeps for backward after a forward in `dtype`, once per storage, parameters excluded.
    model = build(config, getattr(torch, dtype), lora)
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
    answer = {"count": count, "trainable": trainable, "saved": saved}[request.pop("op")](**request)
    print(json.dumps(answer), flush=True)
"""


class TorchWorker:
    """A process with torch and transformers (and peft, for a `lora`) that answers `count`, `trainable` and `saved`
    requests."""

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
