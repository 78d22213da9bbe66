"""The transformers rollout engine: batched sampling, log-probs that match the model, versioned weights."""

import asyncio

import pytest

torch = pytest.importorskip("torch")

from tests.lora_adapters import adapter_tensors, logprobs, peft_model  # noqa: E402
from tests.runtime.syncs import memory_sync  # noqa: E402
from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.runtime.rollout.samples import Sampling  # noqa: E402
from trinity.runtime.rollout.transformers_engine import TransformersEngine  # noqa: E402


@pytest.fixture
def engine(demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    config = resolve(Request(None, ("hardware=cpu",))).stage("grpo")
    engine = TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)
    asyncio.run(engine.setup(str(demo_assets / "model"), 3))
    return engine


def prompt(engine, text):
    return engine.tokenizer(text, add_special_tokens=False)["input_ids"]


def test_concurrent_requests_are_batched_and_answered_in_full(engine):
    async def both():
        return await asyncio.gather(
            engine.generate(prompt(engine, "12+30="), 4, Sampling(max_tokens=4)),
            engine.generate(prompt(engine, "1+1="), 2, Sampling(max_tokens=4)),
        )

    (v1, first), (v2, second) = asyncio.run(both())
    assert (v1, v2, len(first), len(second)) == (3, 3, 4, 2)
    for sample in first + second:
        assert 1 <= len(sample.response_ids) <= 4 and len(sample.logprobs) == len(sample.response_ids)
        assert all(lp <= 0 for lp in sample.logprobs)
        # it stopped itself where it ends with the end of sequence, else max_tokens cut it
        assert sample.stopped == (sample.response_ids[-1] == engine.tokenizer.eos_token_id)
        assert sample.stopped or len(sample.response_ids) == 4


def test_logprobs_are_the_models_own_at_the_sampling_temperature(engine):
    ids = prompt(engine, "12+30=")
    _, [sample] = asyncio.run(engine.generate(ids, 1, Sampling(temperature=0.7, max_tokens=4)))
    with torch.no_grad():
        logits = engine.model(torch.tensor([ids + sample.response_ids])).logits[0, len(ids) - 1 : -1]
    expected = torch.log_softmax(logits / 0.7, dim=-1).gather(1, torch.tensor(sample.response_ids)[:, None]).squeeze(1)
    assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=1e-4)


def test_top_logprobs_are_the_k_likeliest_tokens_of_the_distribution_each_token_was_drawn_from(engine):
    ids = prompt(engine, "12+30=")
    _, [sample] = asyncio.run(engine.generate(ids, 1, Sampling(temperature=0.7, max_tokens=4, logprobs=3)))
    with torch.no_grad():
        logits = engine.model(torch.tensor([ids + sample.response_ids])).logits[0, len(ids) - 1 : -1]
    values, tokens = torch.log_softmax(logits / 0.7, dim=-1).topk(3)
    assert len(sample.top_logprobs) == len(sample.response_ids)
    for at, (want, ranked) in enumerate(zip(values.tolist(), tokens.tolist())):
        got = sample.top_logprobs[at]
        assert list(got) == ranked and list(got.values()) == pytest.approx(want, abs=1e-4)  # most likely first
        token = sample.response_ids[at]
        assert got.get(token, sample.logprobs[at]) == pytest.approx(sample.logprobs[at], abs=1e-4)  # one distribution
    _, [plain] = asyncio.run(engine.generate(ids, 1, Sampling(temperature=0.7, max_tokens=4)))
    assert plain.top_logprobs is None  # none asked for


@pytest.mark.parametrize(
    "sampling",
    [
        Sampling(temperature=0, max_tokens=4),
        Sampling(temperature=1.0, max_tokens=4),
        Sampling(temperature=1.0, max_tokens=4, min_tokens=2, repetition_penalty=1.3),  # processors that read the ids
    ],
)
def test_a_prompt_sampled_n_times_is_prefilled_once_and_samples_as_if_each_row_were(engine, monkeypatch, sampling):
    prompts = [prompt(engine, "12+30=")] * 4 + [prompt(engine, "1+1=")] * 3 + [prompt(engine, "7+18=")]
    shapes, prefilled = [], TransformersEngine._prefilled

    def recorded(self, prompts, ids, mask):
        cache = prefilled(self, prompts, ids, mask)
        shapes.append(cache is not None and tuple(cache.layers[0].keys.shape[i] for i in (0, 2)))
        return cache

    monkeypatch.setattr(TransformersEngine, "_prefilled", recorded)
    torch.manual_seed(5)
    shared = engine._sample(prompts, sampling)
    # three distinct prompts (one left-padded) prefilled, copied to eight rows, their last token left to generate
    assert shapes == [(8, len(prompts[0]) - 1)]
    monkeypatch.setattr(TransformersEngine, "_prefilled", lambda self, prompts, ids, mask: None)
    torch.manual_seed(5)
    alone = engine._sample(prompts, sampling)
    assert [s.response_ids for s in shared] == [s.response_ids for s in alone]
    for a, b in zip(shared, alone):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)


def test_greedy_is_deterministic(engine):
    ids = prompt(engine, "7+8=")
    runs = [asyncio.run(engine.generate(ids, 2, Sampling(temperature=0, max_tokens=4)))[1] for _ in range(2)]
    assert runs[0][0].response_ids == runs[0][1].response_ids == runs[1][0].response_ids


def test_new_weights_change_answers_and_version(engine):
    """A memory sync's pieces (here of 64 KiB at most, so several) replace every weight."""
    zeros = {name: torch.zeros_like(t) for name, t in engine.model.state_dict().items()}
    done = memory_sync(engine, zeros, 9, limit=2**16)
    assert len(done) > 1 and done == [9] * len(done)
    version, samples = asyncio.run(engine.generate(prompt(engine, "7+8="), 1, Sampling(temperature=0, max_tokens=2)))
    assert version == 9 and engine.weight_version() == 9
    # zero weights: uniform
    assert samples[0].logprobs == pytest.approx(
        [-torch.log(torch.tensor(float(len(engine.tokenizer)))).item()] * len(samples[0].logprobs), abs=1e-5
    )


def penalised(logits, seen, penalty):
    """The repetition penalty by its definition (CTRL): a seen token's logit is divided by it when positive, multiplied
    when not."""
    out = logits.clone()
    index = torch.tensor(sorted(set(seen)))
    out[index] = torch.where(out[index] > 0, out[index] / penalty, out[index] * penalty)
    return out


@pytest.mark.parametrize("temperature", [0, 0.7])
def test_the_repetition_penalty_shapes_sampling_and_the_logprobs_report_it(engine, temperature):
    ids = prompt(engine, "99+99=")
    _, [sample] = asyncio.run(
        engine.generate(ids, 1, Sampling(temperature=temperature, max_tokens=4, repetition_penalty=3.0))
    )
    if temperature == 0:  # on this prompt the demo model's greedy answer changes with the penalty
        _, [plain] = asyncio.run(engine.generate(ids, 1, Sampling(temperature=0, max_tokens=4)))
        assert plain.response_ids != sample.response_ids
    with torch.no_grad():
        logits = engine.model(torch.tensor([ids + sample.response_ids])).logits[0, len(ids) - 1 : -1]
    for t, token in enumerate(sample.response_ids):
        scores = penalised(logits[t], ids + sample.response_ids[:t], 3.0) / (temperature or 1.0)
        if temperature == 0:
            assert token == int(scores.argmax()), f"step {t}: greedy did not pick the penalised argmax"
        assert sample.logprobs[t] == pytest.approx(torch.log_softmax(scores, dim=-1)[token].item(), abs=1e-4)


def test_a_model_with_its_own_code_loads_when_trusted(remote_code_model, monkeypatch, demo_assets):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    config = resolve(Request(None, ("hardware=cpu", "model.trust_remote_code=true"))).stage("grpo")
    trusted = TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)
    asyncio.run(trusted.setup(str(remote_code_model), 0))
    assert type(trusted.model).__name__ == "TinyForCausalLM"
    _, [sample] = asyncio.run(trusted.generate(prompt(trusted, "1+1="), 1, Sampling(max_tokens=2)))
    assert 1 <= len(sample.response_ids) <= 2


def test_a_penalised_prompt_answers_alike_alone_or_batched_with_a_longer_one(engine):
    short, long = prompt(engine, "9+9="), prompt(engine, "99+99=")
    greedy = Sampling(temperature=0, max_tokens=4, repetition_penalty=3.0)

    async def together():
        return await asyncio.gather(engine.generate(short, 1, greedy), engine.generate(long, 1, greedy))

    _, [alone] = asyncio.run(engine.generate(short, 1, greedy))
    # padding with a token the model says, as where the pad token is the end of sequence
    engine.pad_id = alone.response_ids[0]
    (_, [batched]), _ = asyncio.run(together())
    assert batched.response_ids == alone.response_ids and batched.logprobs == pytest.approx(alone.logprobs, abs=1e-5)


def test_logprobs_are_of_the_distribution_after_top_k(engine):
    _, samples = asyncio.run(
        engine.generate(prompt(engine, "12+30="), 4, Sampling(temperature=1.0, top_k=1, max_tokens=3))
    )
    # one token kept: probability 1
    assert all(lp == pytest.approx(0.0, abs=1e-6) for s in samples for lp in s.logprobs)


# --- LoRA: the engine applies the trainer's adapter (adapter syncs), or holds its merged weights --------------------


def lora_engine(demo_assets, monkeypatch, model_path, *extra):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    overrides = ("hardware=cpu", "+model.lora_configs=[{lora_rank: 8, lora_alpha: 16}]", *extra)
    config = resolve(Request(None, overrides)).stage("grpo")
    engine = TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)
    asyncio.run(engine.setup(str(model_path), 0))
    return engine


def assert_generates_like(engine, reference):
    """Sampled tokens' log-probs are the reference model's own (the engine's model computes in fp32 too)."""
    for text in ("12+30=", "7+8="):
        ids = prompt(engine, text)
        _, samples = asyncio.run(engine.generate(ids, 3, Sampling(temperature=1.0, max_tokens=4)))
        for sample in samples:
            expected = logprobs(reference, ids, sample.response_ids)
            chosen = expected.gather(1, torch.tensor(sample.response_ids)[:, None]).squeeze(1)
            assert torch.allclose(torch.tensor(sample.logprobs), chosen, atol=1e-4)


def test_an_adapter_sync_moves_only_the_adapter_and_the_engine_generates_base_plus_adapter(demo_assets, monkeypatch):
    engine = lora_engine(demo_assets, monkeypatch, demo_assets / "model")
    reference = peft_model(str(demo_assets / "model"), rank=8, alpha=16)
    adapter = adapter_tensors(reference)
    assert sorted(engine._params()) == sorted(adapter)  # what the trainer sends, and nothing else
    with reference.disable_adapter():
        assert_generates_like(engine, reference)  # before the first sync: the base model
    assert memory_sync(engine, adapter, 4) == [4]
    assert_generates_like(engine, reference)


def test_a_lora_checkpoint_starts_the_engine_with_its_adapter_or_its_merged_model(demo_assets, monkeypatch, tmp_path):
    from trinity.runtime.weights import lora

    reference = peft_model(str(demo_assets / "model"), rank=8, alpha=16, seed=3)
    config = resolve(Request(None, ("hardware=cpu", "+model.lora_configs=[{lora_rank: 8, lora_alpha: 16}]")))
    settings = lora.peft_config(config.stage("grpo").model.lora_configs[0], str(demo_assets / "model"))
    lora.write_adapter(tmp_path, adapter_tensors(reference), settings)
    assert_generates_like(lora_engine(demo_assets, monkeypatch, tmp_path), reference)
    merged = resolve(Request(None, ("hardware=cpu", "+model.lora_configs=[{}]", "synchronizer.lora_sync=merged")))
    # holding merged weights, the engines start on the base and wait for a sync, or take the merged model saved
    assert lora.engine_start(str(tmp_path), merged.stage("grpo")) == (str(demo_assets / "model"), True)
    reference.merge_and_unload().save_pretrained(tmp_path / lora.MERGED)
    for name in ("tokenizer.json", "tokenizer_config.json"):  # as the trainer writes merged/: with the tokenizer
        (tmp_path / lora.MERGED / name).write_bytes((demo_assets / "model" / name).read_bytes())
    assert lora.engine_start(str(tmp_path), merged.stage("grpo")) == (str(tmp_path / lora.MERGED), False)
    engine = lora_engine(demo_assets, monkeypatch, tmp_path / lora.MERGED, "synchronizer.lora_sync=merged")
    assert not any(lora.is_adapter_key(k) for k in engine._params())  # a plain model
    assert_generates_like(engine, peft_model(str(demo_assets / "model"), rank=8, alpha=16, seed=3))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_the_adapter_runs_in_the_lora_dtype_it_is_given(demo_assets, monkeypatch, dtype):
    engine = lora_engine(demo_assets, monkeypatch, demo_assets / "model", f"model.lora_configs.0.lora_dtype={dtype}")
    reference = peft_model(str(demo_assets / "model"), rank=8, alpha=16, seed=5)
    assert {t.dtype for t in engine._params().values()} == {getattr(torch, dtype)}
    memory_sync(engine, adapter_tensors(reference), 1)
    ids = prompt(engine, "12+30=")
    _, [sample] = asyncio.run(engine.generate(ids, 1, Sampling(temperature=1.0, max_tokens=4)))
    expected = logprobs(reference, ids, sample.response_ids)
    chosen = expected.gather(1, torch.tensor(sample.response_ids)[:, None]).squeeze(1)
    tol = {"float32": 1e-4, "bfloat16": 0.1, "float16": 0.02}[dtype]  # the adapter's matrices rounded to it
    assert (torch.tensor(sample.logprobs) - chosen).abs().max() < tol


def test_its_model_is_its_weights_it_wakes_for_a_sync_and_keeps_no_kv_cache_asleep(engine):
    """A colocated sync wakes the weights alone (device_handoff.py): that is the whole model here; a KV cache it
    keeps none of between requests, so waking that alone leaves the model where it sleeps."""
    asyncio.run(engine.sleep(2))
    assert asyncio.run(engine.wake_up(["kv_cache"])) is True and engine.asleep
    assert asyncio.run(engine.wake_up(["weights"])) is False and not engine.asleep


def test_with_ignore_eos_every_reply_runs_past_the_end_of_sequence_to_max_tokens(demo_assets, monkeypatch):
    """explorer.rollout_model.ignore_eos, as vLLM's SamplingParams.ignore_eos: the end of sequence is sampled like any
    token and generation goes on; without it, a reply ends at its first one."""
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    samples = {}
    for ignore in (False, True):
        config = resolve(Request(None, ("hardware=cpu", f"explorer.rollout_model.ignore_eos={ignore}"))).stage("grpo")
        engine = TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)
        asyncio.run(engine.setup(str(demo_assets / "model"), 0))
        _, samples[ignore] = asyncio.run(engine.generate(prompt(engine, "12+30="), 64, Sampling(max_tokens=8)))
    eos = engine.tokenizer.eos_token_id
    ended = [s for s in samples[False] if s.stopped]
    assert ended and all(s.response_ids.index(eos) == len(s.response_ids) - 1 for s in ended)
    assert all(len(s.response_ids) == len(s.logprobs) == 8 and not s.stopped for s in samples[True])
    assert any(eos in s.response_ids[:-1] for s in samples[True])  # generated on past an end of sequence
