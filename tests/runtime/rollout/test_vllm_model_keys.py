"""Trinity-RFT's rollout-model keys on a real vLLM (the CPU build, in a Ray actor), as they reach it: the run's rope
(model.rope_scaling, model.rope_theta) through hf_overrides, ignore_eos in every request's SamplingParams, and
enable_log_requests in vLLM's own request log and the engine's."""

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
ray = pytest.importorskip("ray")

from tests.lora_adapters import logprobs  # noqa: E402
from tests.runtime.rollout.test_vllm_lora_real import cluster, start  # noqa: E402, F401
from tests.runtime.rollout.test_vllm_real import NO_VLLM, PROMPTS  # noqa: E402

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.ray,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason=NO_VLLM),
]
TOL = 1e-3  # fp32, as test_vllm_real measures
KEYS = (
    "+model.rope_theta=2.0",  # far from the demo model's 10000: the positions differ plainly
    "+model.rope_scaling={rope_type: linear, factor: 2.0}",
    "explorer.rollout_model.ignore_eos=true",
    "explorer.rollout_model.enable_log_requests=true",
)


@pytest.fixture(scope="module")
def keyed(cluster, demo_assets, tmp_path_factory):  # noqa: F811
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve

    os.environ["TRINITY_DEMO_DIR"] = str(demo_assets)
    config = resolve(Request(None, ("hardware=cpu", "explorer.rollout_model.engine_type=vllm", *KEYS))).stage("grpo")
    logs = tmp_path_factory.mktemp("logs")
    actor = start(config, str(demo_assets / "model"), 0, logs)
    yield actor, config, logs
    ray.get(actor.close.remote(), timeout=60)


def test_vllm_runs_the_changed_rope_and_every_reply_runs_to_max_tokens(keyed, demo_assets):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from trinity.runtime.rollout.samples import Sampling
    from trinity.runtime.weights import model_config

    actor, config, _ = keyed
    model = str(demo_assets / "model")
    tokenizer = AutoTokenizer.from_pretrained(model)
    changed = model_config.apply(AutoConfig.from_pretrained(model), model_config.overrides(config, model))
    reference = AutoModelForCausalLM.from_pretrained(model, config=changed)
    plain = AutoModelForCausalLM.from_pretrained(model)
    farthest = 0.0  # from the unchanged model: the rope must matter for this test to say anything
    for text in PROMPTS:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        _, sampled = ray.get(actor.generate.remote(ids, 8, Sampling(temperature=1.0, max_tokens=6)), timeout=60)
        for sample in sampled:
            assert len(sample.response_ids) == 6 and not sample.stopped  # ignore_eos
            chosen = torch.tensor(sample.response_ids)[:, None]
            expected = logprobs(reference, ids, sample.response_ids).gather(1, chosen).squeeze(1)
            assert (torch.tensor(sample.logprobs) - expected).abs().max() < TOL
            unchanged = logprobs(plain, ids, sample.response_ids).gather(1, chosen).squeeze(1)
            farthest = max(farthest, (torch.tensor(sample.logprobs) - unchanged).abs().max().item())
    assert farthest > 10 * TOL


def test_vllm_and_the_engine_log_each_request(keyed):
    from trinity.runtime.rollout.samples import Sampling

    actor, _, logs = keyed
    ray.get(actor.generate.remote([3, 4, 5], 1, Sampling(max_tokens=2)), timeout=60)
    assert "request: 3 prompt tokens, n=1, Sampling(" in (logs / "rollout.engine0.log").read_text()  # with sampling
    # vLLM's own "Added request" lines, on its logger (the actor's stdout, in Ray's worker log)
    assert ray.get(actor.__ray_call__.remote(lambda engine: engine.llm.log_requests), timeout=60) is True
