"""The trainer and rollout formulas: hand-computed cases, invariants, and activations measured with torch on CPU."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cpu_torch import torch_cpu  # noqa: F401 (fixture)
from trinity.config.memory.catalog import known_models
from trinity.config.memory.estimate import ACCELERATOR, DEVICE_RUNTIME, GIB, MIB, runtime
from trinity.config.memory.lora import adapter
from trinity.config.memory.rollout import EngineSetup, engine_estimate, kv_cache_wanted, sequences_that_fit
from trinity.config.memory.shape import ModelShape
from trinity.config.memory.trainer import (
    TrainerSetup,
    activation_bytes,
    activation_bytes_per_layer_token,
    idle_bytes,
    trainer_estimate,
)

QWEN15 = known_models()["Qwen/Qwen2.5-1.5B-Instruct"][0]  # L=28, h=1536, i=8960, 12 heads, 2 KV heads of 128, tied
QWEN3_06 = known_models()["Qwen/Qwen3-0.6B"][0]


def engine(**changes) -> EngineSetup:
    return EngineSetup(QWEN15, "bfloat16", 1, 1, 2048, sequences=64, budget=int(0.7 * 64 * GIB))._replace(**changes)


def test_kv_cache_per_token_by_hand():
    assert engine().kv_bytes_per_token == 2 * 28 * 2 * 128 * 2 == 28_672
    assert engine(tensor_parallel=2).kv_bytes_per_token == 2 * 28 * 1 * 128 * 2  # 2 KV heads over 2 devices
    # fewer KV heads than devices: replicated
    assert engine(tensor_parallel=4).kv_bytes_per_token == 2 * 28 * 1 * 128 * 2
    assert engine(pipeline_parallel=2, dtype="float32").kv_bytes_per_token == 2 * 14 * 2 * 128 * 4


def test_rollout_budget_and_sequences_by_hand():
    setup = engine()
    weights = QWEN15.params * 2  # bf16, one device
    workspace = 8192 * 2 * (2 * 1536 + 1536 + 2 * 256 + 2 * 8960) + 8 * 256 * 151936
    one = 2048 * 28_672
    assert engine_estimate(setup).peak == weights + workspace + DEVICE_RUNTIME + one
    assert kv_cache_wanted(setup) == 64 * one
    assert sequences_that_fit(setup) == (setup.budget - weights - workspace - DEVICE_RUNTIME) // one
    assert kv_cache_wanted(engine(sequences=10_000)) == 256 * one  # vLLM runs at most max_num_seqs at once


def test_trainer_by_hand_without_reference_and_with_checkpointing_off():
    setup = TrainerSetup(QWEN15, devices=2, tokens=4096, checkpointing=False)
    p, h, layer = QWEN15.params, 1536, QWEN15.layer_params
    per_layer = 16 * h + 4 * (1536 + 256) + 8 * 8960
    update = 4 * p // 2 + 4 * (QWEN15.root_params + 2 * layer) + 4096 * (28 * per_layer + 8 * h) + 8 * 4096 * 151936
    assert trainer_estimate(setup).peak == 4 * p // 2 + 8 * p // 2 + DEVICE_RUNTIME + update
    assert trainer_estimate(setup).peak_phase == "actor update"


def test_offload_flags_change_what_is_kept_between_updates_not_the_peak():
    setup = TrainerSetup(QWEN15, devices=4, tokens=4096, reference=True)
    offloaded = setup._replace(param_offload=True, optimizer_offload=True)
    assert trainer_estimate(offloaded).peak == trainer_estimate(setup).peak  # verl reloads both for each update
    assert idle_bytes(setup) == 12 * QWEN15.params // 4 + DEVICE_RUNTIME
    assert idle_bytes(offloaded) == DEVICE_RUNTIME


def test_a_critic_adds_its_states_and_its_own_update_phase():
    setup = TrainerSetup(QWEN15, devices=2, tokens=2048)
    critic = trainer_estimate(setup._replace(critic=QWEN15))
    assert "critic update" in critic.phases
    # tied: the body is the whole model
    assert critic.resident - trainer_estimate(setup).resident == 12 * QWEN15.params // 2


def test_a_distillation_teacher_runs_forward_only_in_its_own_phase_with_its_own_shape():
    setup = TrainerSetup(QWEN15, devices=2, tokens=2048)
    small, big = (trainer_estimate(setup._replace(teacher=t)) for t in (QWEN15, known_models()["Qwen/Qwen2.5-7B"][0]))
    assert "teacher log-probs" in small.phases and small.resident == trainer_estimate(setup).resident  # host weights
    assert big.phases["teacher log-probs"] > small.phases["teacher log-probs"]  # its own layers, not the actor's


shapes = st.builds(
    ModelShape,
    model_type=st.just("qwen2"),
    layers=st.integers(1, 96),
    hidden=st.integers(64, 16384),
    intermediate=st.integers(64, 65536),
    heads=st.integers(1, 128),
    kv_heads=st.integers(1, 16),
    head_dim=st.sampled_from([64, 128, 256]),
    vocab=st.integers(1000, 300_000),
    tied=st.booleans(),
    qk_norm=st.booleans(),
)
setups = st.builds(
    TrainerSetup,
    actor=shapes,
    devices=st.integers(1, 512),
    tokens=st.integers(1, 65536),
    checkpointing=st.booleans(),
    reference=st.booleans(),
    critic=st.none(),
    teacher=st.none() | shapes,
    param_offload=st.booleans(),
    optimizer_offload=st.booleans(),
    lora=st.none() | st.builds(adapter, st.integers(1, 256), st.sampled_from(["all-linear", "q_proj,v_proj,lm_head"])),
    param_dtype=st.sampled_from(["bfloat16", "float16", "float32"]),
)


@settings(max_examples=100)
@given(setup=setups, more=st.integers(1, 64), critic=st.booleans())
def test_more_devices_or_fewer_tokens_never_need_more(setup, more, critic):
    setup = setup._replace(critic=setup.actor if critic else None)  # a critic is the actor's model
    need = trainer_estimate(setup).peak
    sharded = trainer_estimate(setup._replace(copies_only=False)).peak  # FSDP2 on the same devices
    assert need <= sharded  # one device unsharded (copies_only) never needs more than FSDP2 there
    # more devices shard; a 1-layer model gathers nearly all of itself, so compare with FSDP2's plan, not unsharded's
    assert trainer_estimate(setup._replace(devices=setup.devices + more)).peak <= sharded
    assert trainer_estimate(setup._replace(tokens=max(1, setup.tokens // 2))).peak <= need
    if setup.actor.layers > 1:  # one layer checkpointed keeps its input besides recomputing it
        assert trainer_estimate(setup._replace(checkpointing=True)).peak <= need
    assert need >= max(item.bytes for item in trainer_estimate(setup).items)


@settings(max_examples=100)
@given(shape=shapes, tp=st.sampled_from([1, 2, 4, 8]), length=st.integers(1, 131072))
def test_more_tensor_parallelism_never_needs_more_per_device(shape, tp, length):
    setup = EngineSetup(shape, "bfloat16", tp, 1, length, sequences=8, budget=GIB)
    assert engine_estimate(setup._replace(tensor_parallel=2 * tp)).peak <= engine_estimate(setup).peak


ACTIVATION_CONFIG = dict(  # small enough to build in a second, every part of a layer of its own size
    hidden_size=256,
    intermediate_size=704,
    num_hidden_layers=3,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=48,
    vocab_size=512,
)


@pytest.mark.parametrize("kind", ["qwen2", "qwen3", "llama"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_formula_matches_what_autograd_keeps(kind, checkpointing, torch_cpu):
    """Measured: what autograd keeps for backward after a bf16 forward with sdpa attention (tests/cpu_torch.py)."""
    config = dict(model_type=kind, **ACTIVATION_CONFIG)
    tokens = 256
    measured = torch_cpu.ask("saved", config=config, tokens=tokens, checkpointing=checkpointing)
    shape = ModelShape(kind, 3, 256, 704, 8, 2, 48, 512, False, qk_norm=kind == "qwen3")
    formula = activation_bytes(shape, tokens, checkpointing)
    if checkpointing:  # the forward keeps layer inputs only; the recomputed layer shows up in backward
        formula -= tokens * activation_bytes_per_layer_token(shape)
    assert abs(measured - formula) / measured < 0.03, (measured, formula)


def test_qwen3_q_and_k_norms_cost_more_per_layer():
    plain = activation_bytes_per_layer_token(QWEN3_06._replace(qk_norm=False))
    assert activation_bytes_per_layer_token(QWEN3_06) - plain == 6 * (QWEN3_06.q_dim + QWEN3_06.kv_dim)


@pytest.mark.parametrize("kind", ["qwen2", "qwen3", "llama"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_formula_matches_what_autograd_keeps_in_fp32(kind, checkpointing, torch_cpu):
    """In fp32 (the cpu profile's trainer) each RMSNorm's fp32 copy of its input is the input itself: 24h + 8(q + kv)
    + 16i, not twice bf16's."""
    config, tokens = dict(model_type=kind, **ACTIVATION_CONFIG), 256
    measured = torch_cpu.ask("saved", config=config, tokens=tokens, checkpointing=checkpointing, dtype="float32")
    shape = ModelShape(kind, 3, 256, 704, 8, 2, 48, 512, False, qk_norm=kind == "qwen3")
    formula = activation_bytes(shape, tokens, checkpointing, compute_bytes=4)
    if checkpointing:  # the forward keeps layer inputs only; the recomputed layer shows up in backward
        formula -= tokens * activation_bytes_per_layer_token(shape, compute_bytes=4)
    assert abs(measured - formula) / measured < 0.03, (measured, formula)


def test_activations_per_layer_in_fp32_by_hand():
    h, attention, i = QWEN15.hidden, QWEN15.q_dim + QWEN15.kv_dim, QWEN15.intermediate
    assert activation_bytes_per_layer_token(QWEN15, compute_bytes=4) == 24 * h + 8 * attention + 16 * i
    assert activation_bytes_per_layer_token(QWEN15) == 16 * h + 4 * attention + 8 * i  # bf16, as measured before
    qk = activation_bytes_per_layer_token(QWEN3_06, compute_bytes=4)
    assert qk - activation_bytes_per_layer_token(QWEN3_06._replace(qk_norm=False), compute_bytes=4) == 8 * (
        QWEN3_06.q_dim + QWEN3_06.kv_dim
    )


def test_the_trainer_computes_in_its_param_dtype():
    bf16 = trainer_estimate(TrainerSetup(QWEN15, devices=2, tokens=4096, checkpointing=False))
    fp32 = trainer_estimate(TrainerSetup(QWEN15, devices=2, tokens=4096, checkpointing=False, param_dtype="float32"))
    unit = QWEN15.root_params + 2 * QWEN15.layer_params
    grown = fp32.phases["actor update"] - bf16.phases["actor update"]
    activations = activation_bytes(QWEN15, 4096, False, compute_bytes=4) - activation_bytes(QWEN15, 4096, False)
    assert grown == 4 * unit + activations + 8 * 4096 * 151936  # working set, activations, logits: 2 bytes more each
    assert fp32.resident == bf16.resident  # fp32 weights and Adam moments either way


def test_a_process_on_host_cores_holds_its_own_runtime():
    cpu = runtime("cpu")
    assert cpu.host and (cpu.trainer, cpu.engine) == (600 * MIB, 500 * MIB)
    assert runtime("cuda") == runtime("npu") == ACCELERATOR and not ACCELERATOR.host
    assert (ACCELERATOR.trainer, ACCELERATOR.engine) == (DEVICE_RUNTIME, DEVICE_RUNTIME)
    on_host = TrainerSetup(QWEN15, devices=2, tokens=4096, device_type="cpu")
    assert trainer_estimate(on_host).resident == 12 * QWEN15.params // 2 + 600 * MIB
    assert idle_bytes(on_host) == 12 * QWEN15.params // 2 + 600 * MIB
