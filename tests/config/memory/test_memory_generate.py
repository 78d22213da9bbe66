"""The transformers engine's memory (Hugging Face generate) by hand, and the plan of benchmarks/scale.py's 0.5B run on
the cpu profile: trainer and engine, in modes both and colocate, every number worked out."""

import dataclasses

import pytest

from tests.conftest import REFERENCE
from trinity.config import engines
from trinity.config.compose import Request
from trinity.config.memory.catalog import known_models
from trinity.config.memory.estimate import GIB, MIB
from trinity.config.memory.generate import MAX_SEQUENCES, GenerateSetup, generate_estimate
from trinity.config.memory.plan import ESTIMATES, plan_memory
from trinity.config.memory.sync import SyncSetup
from trinity.config.resolve import resolve

QWEN05 = known_models()["Qwen/Qwen2.5-0.5B-Instruct"][0]  # L=24, h=896, i=4864, 14 heads, 2 KV heads of 64, tied
P05 = 494_032_768
V = 151936
EMBEDDING = V * 896 * 4  # fp32
BUCKET = 256 * MIB
# benchmarks/scale.py's run: 4 prompts x 4 samples, prompts of at most 6 tokens, 16 response tokens
S, CONTEXT, RESPONSE, TOKENS = 16, 22, 16, 352
KV = S * CONTEXT * 2 * 24 * 2 * 64 * 4  # fp32 keys and values of every layer
SCORES = S * V * RESPONSE * 4
LOGITS = S * V * (4 + 3 * 4)  # the step's logits, generate's fp32 copy, the processed scores, the probabilities
ENGINE_RUNTIME, TRAINER_RUNTIME = 500 * MIB, 600 * MIB  # estimate.py RUNTIMES["cpu"]
pytestmark = pytest.mark.usefixtures("local_gsm8k")  # the reference config reads its data from local disk


def engine(**changes) -> GenerateSetup:
    return GenerateSetup(QWEN05, "float32", CONTEXT, RESPONSE, S, device_type="cpu")._replace(**changes)


def test_generate_by_hand():
    estimate = generate_estimate(engine())
    assert P05 == QWEN05.params and estimate.resident == ENGINE_RUNTIME + 4 * P05
    assert estimate.phases == {"generate": KV + SCORES + LOGITS} and KV + SCORES + LOGITS == 203_128_832


def test_on_an_accelerator_the_runtime_is_the_devices_and_bf16_halves_weights_and_cache():
    gpu = generate_estimate(engine(dtype="bfloat16", device_type="cuda"))
    assert gpu.resident == GIB + 2 * P05
    assert gpu.phases["generate"] == KV // 2 + SCORES + S * V * (2 + 3 * 4)  # scores stay fp32


def test_one_generate_call_runs_at_most_max_sequences():
    assert engine(sequences=10_000).concurrent == MAX_SEQUENCES == 512


def test_a_sync_is_a_phase_of_its_own_and_an_adapter_is_held():
    sync = SyncSetup("process_group", BUCKET, EMBEDDING, 2 * GIB)
    assert generate_estimate(engine(sync=sync)).phases["weight sync"] == EMBEDDING + BUCKET
    adapted = generate_estimate(engine(adapter=(1_000_000, "bfloat16")))
    assert adapted.resident - generate_estimate(engine()).resident == 2_000_000


@pytest.fixture
def generate_entry(monkeypatch):
    """The transformers engine's registry entry naming the estimate (engines.py: memory="generate")."""
    entry = dataclasses.replace(engines.ENGINES["transformers"], memory="generate")
    monkeypatch.setitem(engines.ENGINES, "transformers", entry)


def scale_plan(mode: str) -> dict[str, int]:
    """Peak bytes per role of benchmarks/scale.py's 0.5B run on the cpu profile, with 24 GiB of host memory."""
    overrides = (
        "hardware=cpu",
        f"mode={mode}",
        "model.model_path=Qwen/Qwen2.5-0.5B-Instruct",
        f"model.max_model_len={CONTEXT}",
        f"model.max_response_tokens={RESPONSE}",
        "algorithm.repeat_times=4",
        "algorithm.kl_loss_fn=none",
        "buffer.batch_size=4",
        "explorer.runner_per_model=4",
        "explorer.rollout_model.engine_num=1",
        "explorer.rollout_model.dtype=float32",
        f"cluster.gpu_per_node={1 if mode == 'colocate' else 2}",
        f"trainer.max_token_len_per_gpu={TOKENS}",
    )
    config = resolve(Request(REFERENCE, overrides)).config
    config = config.model_copy(update={"hardware": config.hardware.model_copy(update={"memory_gb_per_device": 24})})
    need: dict[str, int] = {}
    for check in plan_memory(config).checks:
        need.setdefault(check.role, check.need)
    return need


# the trainer on the cpu profile: fp32 weights, Adam and gradients, unsharded (one rank computing in fp32: no FSDP
# working set, which would be the root's (the tied embedding's) and two layers' fp32 weights and gradients, 8 x UNIT05);
# fp32 activations without checkpointing; fp32 logits
LAYER05 = 2 * 896 * 896 + 2 * 896 * 128 + (896 + 256) + 3 * 896 * 4864 + 2 * 896
UNIT05 = V * 896 + 896 + 2 * LAYER05
ACTIVATIONS05 = TOKENS * (24 * (24 * 896 + 8 * (896 + 128) + 16 * 4864) + 12 * 896)
UPDATE05 = 4 * P05 + ACTIVATIONS05 + 16 * TOKENS * V
TRAINER05 = TRAINER_RUNTIME + 12 * P05 + UPDATE05
STORE = EMBEDDING + BUCKET  # the object store's pages of the pieces in flight, mapped by trainer and engine


def test_the_scale_benchmarks_run_in_mode_both(generate_entry):
    need = scale_plan("both")
    assert LAYER05 == 14_912_384 and UNIT05 == 165_960_320 and ACTIVATIONS05 == 912_113_664
    assert need["trainer"] == TRAINER05 == 10_301_487_104  # 9824 MiB; measured 10193
    # the gloo broadcast's two pieces in flight outweigh generate's batch
    assert need["explorer.rollout_model"] == ENGINE_RUNTIME + 4 * P05 + EMBEDDING + BUCKET == 3_313_393_152  # 3160 MiB


def test_the_scale_benchmarks_run_in_mode_colocate(generate_entry):
    need = scale_plan("colocate")
    assert need["trainer"] == TRAINER05 + STORE == 11_114_461_184  # 10599 MiB; measured 11570 (FSDP2)
    engine_peak = ENGINE_RUNTIME + 4 * P05 + STORE + 2 * EMBEDDING
    assert need["explorer.rollout_model"] == engine_peak == 4_402_470_400  # 4199 MiB; measured 4451
    # on one host: the engine at its peak beside the trainer's weights, Adam moments and runtime; no allocator cache
    assert need["colocate"] == engine_peak + TRAINER_RUNTIME + 12 * P05


def test_an_engine_whose_entry_names_no_estimate_is_not_checked():
    assert set(ESTIMATES) == {"budget", "generate"}
    if engines.ENGINES["transformers"].memory is None:  # until engines.py names it
        assert "explorer.rollout_model" not in scale_plan("both")
