"""The vLLM engine applying the trainer's LoRA adapter, on a real vLLM (the CPU build, multiprocess mode, in a Ray
actor): after each sync method it generates what peft's forward pass of base + that adapter gives, each weight
version's adapter a new one (a stale adapter or the base model fails), and it starts from a checkpoint's adapter."""

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from tests.lora_adapters import adapter_tensors, logprobs, peft_model  # noqa: E402
from tests.runtime.rollout.test_vllm_real import NO_VLLM, PROMPTS, Trainer, memory_sync, specs  # noqa: E402

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.ray,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason=NO_VLLM),
]
TOL = 1e-3  # fp32: measured ~1e-6 against peft (vLLM's CPU LoRA kernels are plain torch)
# base_model_name: vLLM's own LoRARequest takes it (what the engine requests with), and records it only
LORA = "+model.lora_configs=[{lora_rank: 8, lora_alpha: 16, base_model_name: trinity-demo}]"


@pytest.fixture(scope="module")
def lora_config(demo_assets):
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve

    os.environ["TRINITY_DEMO_DIR"] = str(demo_assets)
    overrides = ("hardware=cpu", "explorer.rollout_model.engine_type=vllm", LORA)
    return resolve(Request(None, overrides)).stage("grpo")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=tmp_path_factory.mktemp("ray").as_posix(),
    )
    yield
    ray.shutdown()


def start(config, model_path: str, version: int, logs) -> object:
    from trinity.runtime.rollout.vllm_engine import VllmEngine

    actor = (
        ray.remote(VllmEngine)
        .options(num_cpus=1)
        .remote(name="rollout.engine0", role="rollout", log_dir=str(logs), config=config, index=0)
    )
    ray.get(actor.setup.remote(model_path, version), timeout=300)
    return actor


@pytest.fixture(scope="module")
def engine(cluster, lora_config, demo_assets, tmp_path_factory):
    actor = start(lora_config, str(demo_assets / "model"), 0, tmp_path_factory.mktemp("logs"))
    yield actor
    ray.get(actor.close.remote(), timeout=60)


@pytest.fixture(scope="module")
def tokenizer(demo_assets):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(demo_assets / "model"))


def assert_generates_like(engine, reference, tokenizer, version: int):
    """Greedy tokens are the reference's argmax; sampled tokens' log-probs are its own."""
    from trinity.runtime.rollout.samples import Sampling

    for text in PROMPTS:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        got, [greedy] = ray.get(engine.generate.remote(ids, 1, Sampling(temperature=0, max_tokens=4)), timeout=60)
        assert got == version
        expected = logprobs(reference, ids, greedy.response_ids)
        chosen = expected.gather(1, torch.tensor(greedy.response_ids)[:, None]).squeeze(1)
        assert (chosen >= expected.max(-1).values - TOL).all()
        _, sampled = ray.get(engine.generate.remote(ids, 4, Sampling(temperature=1.0, max_tokens=4)), timeout=60)
        for sample in sampled:
            expected = logprobs(reference, ids, sample.response_ids)
            chosen = expected.gather(1, torch.tensor(sample.response_ids)[:, None]).squeeze(1)
            assert (torch.tensor(sample.logprobs) - chosen).abs().max() < TOL


def test_before_the_first_sync_the_engine_is_the_base_model(engine, demo_assets, tokenizer):
    reference = peft_model(str(demo_assets / "model"))
    with reference.disable_adapter():
        assert_generates_like(engine, reference, tokenizer, 0)


def test_memory_sync_hands_the_engine_the_adapter(engine, demo_assets, tokenizer):
    """In pieces of 4 KiB (several): the workers gather them and register the adapter once, at the last."""
    reference = peft_model(str(demo_assets / "model"), seed=1)
    assert memory_sync(engine, adapter_tensors(reference), 1, 2**12) > 1
    assert_generates_like(engine, reference, tokenizer, 1)


def test_checkpoint_sync_loads_the_adapter_file(engine, demo_assets, tokenizer, tmp_path):
    from trinity.runtime.weights.safetensors import save_safetensors

    reference = peft_model(str(demo_assets / "model"), seed=2)
    save_safetensors(adapter_tensors(reference), tmp_path / "weights_v2.safetensors")
    assert ray.get(engine.load_weights.remote(str(tmp_path / "weights_v2.safetensors"), 2), timeout=60) == 2
    assert_generates_like(engine, reference, tokenizer, 2)


def test_collective_sync_receives_the_adapter_broadcast(engine, demo_assets, tokenizer):
    reference = peft_model(str(demo_assets / "model"), seed=3)
    adapter = adapter_tensors(reference)
    trainer = Trainer(engine)
    sender = trainer.send(adapter)
    assert ray.get(engine.receive_weights.remote(specs(adapter), 3), timeout=60) == 3
    sender.join(60)
    assert not sender.is_alive()
    assert_generates_like(engine, reference, tokenizer, 3)


def test_an_engine_started_from_a_lora_checkpoint_applies_its_adapter(
    cluster, engine, lora_config, demo_assets, tokenizer, tmp_path
):
    from trinity.runtime.weights import lora

    ray.get(engine.close.remote(), timeout=60)  # one vLLM at a time on two cores
    reference = peft_model(str(demo_assets / "model"), seed=4)
    settings = lora.peft_config(lora_config.model.lora_configs[0], str(demo_assets / "model"))
    lora.write_adapter(tmp_path, adapter_tensors(reference), settings)
    second = start(lora_config, str(tmp_path), 7, tmp_path / "logs")
    try:
        assert_generates_like(second, reference, tokenizer, 7)
    finally:
        ray.get(second.close.remote(), timeout=60)
