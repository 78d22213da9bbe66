"""LoRA in the memory plan: the adapter's parameters by hand and against peft, its activations against what autograd
keeps, the trainer's and vLLM's items by hand, and a 7B run on 32 GB devices through the CLI."""

import importlib.util

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.config.memory.test_memory_estimates import ACTIVATION_CONFIG, shapes
from tests.conftest import REFERENCE, REPO
from tests.cpu_torch import TorchWorker
from trinity.config.memory.catalog import known_models
from trinity.config.memory.estimate import DEVICE_RUNTIME, GIB
from trinity.config.memory.lora import adapter, adapter_params, unknown_modules
from trinity.config.memory.rollout import EngineSetup, LoRASlot, engine_estimate, lora_slot_bytes
from trinity.config.memory.shape import from_hf_config
from trinity.config.memory.trainer import (
    TrainerSetup,
    activation_bytes,
    activation_bytes_per_layer_token,
    idle_bytes,
    trainer_estimate,
)

QWEN05 = known_models()["Qwen/Qwen2.5-0.5B"][0]  # h=896, i=4864, 24 layers, 14 heads and 2 KV heads of 64
QWEN7 = known_models()["Qwen/Qwen2.5-7B-Instruct"][0]  # h=3584, i=18944, 28 layers, 28 heads and 4 KV heads of 128
P7, ROOT7, LAYER7 = 7_615_616_512, 1_089_998_336, 233_057_792  # test_memory_fit.py works them out
# Qwen2.5-7B, per layer and unit of rank: q and o (3584 + 3584) each, k and v (3584 + 512) each, gate and up
# (3584 + 18944) each, down (18944 + 3584)
LINEAR_FEATURES7 = 2 * (3584 + 3584) + 2 * (3584 + 512) + 3 * (3584 + 18944)
PA7 = 28 * 64 * LINEAR_FEATURES7  # rank 64, all-linear
A7 = 16 * 3584 + 4 * (3584 + 512) + 8 * 18944  # what a layer keeps per token in full fine-tuning
T = 8192  # the reference config's trainer.max_token_len_per_gpu
MODEL7 = "model.model_path=Qwen/Qwen2.5-7B-Instruct"
LORA64 = "model.lora_configs=[{lora_rank: 64}]"
EXAMPLE = REPO / "examples" / "lora" / "gsm8k_lora.yaml"

pytestmark = pytest.mark.usefixtures("local_gsm8k")  # the reference config reads its data from local disk


@pytest.fixture(scope="module")
def peft_cpu():
    """A TorchWorker (tests/cpu_torch.py) for the module, with peft; skipped where one of them is not installed."""
    if not all(importlib.util.find_spec(name) for name in ("torch", "transformers", "peft")):
        pytest.skip("torch, transformers and peft are needed for this comparison")
    worker = TorchWorker()
    yield worker
    worker.close()


# --- the adapter's parameters -------------------------------------------------------------------------------------


def test_adapter_parameters_of_a_qwen2_05b_shape_by_hand():
    r = 32
    layer = r * (896 + 896) + 2 * r * (896 + 128) + r * (896 + 896) + 2 * r * (896 + 4864) + r * (4864 + 896)
    assert adapter_params(QWEN05, adapter(r, "all-linear")) == 24 * layer == 17_596_416
    named = "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"
    assert adapter(r, named) == adapter(r, "all-linear")
    assert adapter_params(QWEN05, adapter(r, "q_proj,v_proj")) == 24 * r * ((896 + 896) + (896 + 128))
    assert adapter_params(QWEN05, adapter(r, "all-linear", "down_proj")) == 24 * (layer - r * (4864 + 896))
    assert adapter_params(QWEN05, adapter(r, "all-linear", "o_proj, up_proj")) == 24 * (
        layer - r * (896 + 896) - r * (896 + 4864)
    )


def test_all_linear_leaves_the_output_layer_out_and_a_named_one_is_counted():
    r, head = 8, 8 * (896 + 151936)
    plain = adapter_params(QWEN05, adapter(r, "all-linear"))
    assert "lm_head" not in adapter(r, "all-linear").modules
    assert adapter_params(QWEN05, adapter(r, "all-linear, lm_head")) == plain  # trinity passes all-linear alone
    assert adapter_params(QWEN05, adapter(r, "q_proj,lm_head")) == 24 * r * (896 + 896) + head
    assert adapter_params(QWEN05, adapter(r, "embed_tokens")) == r * (151936 + 896)
    assert adapter_params(QWEN05, adapter(r, "q_proj,lm_head", "lm_head")) == 24 * r * (896 + 896)


def test_names_the_estimate_does_not_know_count_nothing_and_are_listed():
    assert adapter(8, "self_attn, q_proj").modules == ("q_proj",)
    assert unknown_modules("self_attn, q_proj, all-linear, lm_head") == ["self_attn"]


TINY = dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4, vocab_size=512)
PEFT_CASES = {
    "qwen2 all-linear": (dict(model_type="qwen2", num_key_value_heads=2), 8, "all-linear", None),
    "qwen2 tied, q and v": (
        dict(model_type="qwen2", num_key_value_heads=4, tie_word_embeddings=True),
        4,
        "q_proj,v_proj",
        None,
    ),
    "qwen3 all-linear less o and down": (
        dict(model_type="qwen3", head_dim=32, num_key_value_heads=1),
        16,
        "all-linear",
        "o_proj,down_proj",
    ),
    "llama with biases, mlp and lm_head": (
        dict(model_type="llama", attention_bias=True, mlp_bias=True),
        8,
        "gate_proj,up_proj,down_proj,lm_head",
        None,
    ),
    "mistral k only": (dict(model_type="mistral", head_dim=8, num_key_value_heads=2), 2, "k_proj", None),
}


@pytest.mark.parametrize("case", list(PEFT_CASES))
def test_adapter_parameters_match_what_peft_trains(case, peft_cpu):
    changes, rank, targets, excluded = PEFT_CASES[case]
    config = {**TINY, **changes}
    names = "all-linear" if targets == "all-linear" else targets.split(",")
    lora = {"r": rank, "target_modules": names, "exclude_modules": excluded.split(",") if excluded else None}
    expected = peft_cpu.ask("trainable", config=config, lora=lora)
    assert adapter_params(from_hf_config(config), adapter(rank, targets, excluded)) == expected


# --- the trainer --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["qwen2", "qwen3", "llama"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_lora_activations_match_what_autograd_keeps(kind, checkpointing, peft_cpu):
    """Measured as tests/config/memory/test_memory_estimates.py measures full fine-tuning, with peft on top."""
    config, tokens = {**ACTIVATION_CONFIG, "model_type": kind}, 256
    lora = adapter(16, "all-linear")
    measured = peft_cpu.ask(
        "saved",
        config=config,
        lora={"r": 16, "target_modules": "all-linear"},
        tokens=tokens,
        checkpointing=checkpointing,
    )
    shape = from_hf_config(config)
    formula = activation_bytes(shape, tokens, checkpointing, lora)
    if checkpointing:  # the forward keeps layer inputs only; the recomputed layer shows up in backward
        formula -= tokens * activation_bytes_per_layer_token(shape, lora)
    assert abs(measured - formula) / measured < 0.03, (measured, formula)
    assert activation_bytes(shape, tokens, checkpointing) > formula  # the frozen base keeps less


def test_lora_activations_are_an_upper_bound_with_fewer_modules(peft_cpu):
    config, tokens = {**ACTIVATION_CONFIG, "model_type": "qwen2"}, 256
    lora = {"r": 16, "target_modules": ["q_proj", "v_proj", "lm_head"]}
    measured = peft_cpu.ask("saved", config=config, lora=lora, tokens=tokens, checkpointing=False)
    formula = activation_bytes(from_hf_config(config), tokens, False, adapter(16, "q_proj,v_proj,lm_head"))
    assert measured <= formula < 1.3 * measured


def test_activations_with_lora_by_hand():
    h, r = 3584, 64
    lora = adapter(r, "all-linear")
    assert activation_bytes_per_layer_token(QWEN7, lora) == A7 - 4 * h + 2 * r * 7
    assert activation_bytes(QWEN7, T, True, lora) == T * (28 * 2 * h + A7 - 4 * h + 2 * r * 7 + 4 * h)
    assert activation_bytes(QWEN7, T, False, lora) == T * (28 * (A7 - 4 * h + 2 * r * 7) + 4 * h)
    qwen3 = known_models()["Qwen/Qwen3-8B"][0]  # q/k norms: frozen, they keep no normalized q and k either
    attention = qwen3.q_dim + qwen3.kv_dim
    assert activation_bytes_per_layer_token(qwen3, lora) == (
        activation_bytes_per_layer_token(qwen3) - 4 * qwen3.hidden - 2 * attention + 2 * r * 7
    )
    head = adapter(r, "q_proj, lm_head")
    assert activation_bytes(QWEN7, T, True, head) == T * (28 * 2 * h + A7 - 4 * h + 2 * r + 4 * h + 2 * h + 2 * r)
    embeddings = adapter(r, "embed_tokens")
    assert activation_bytes(QWEN7, T, True, embeddings) == T * (28 * 2 * h + A7 - 4 * h + 4 * h + 2 * r)


def lora7(**changes) -> TrainerSetup:
    setup = TrainerSetup(QWEN7, devices=2, tokens=T, reference=True, lora=adapter(64, "all-linear"))
    return setup._replace(**changes)


def test_a_lora_trainer_by_hand():
    """Qwen2.5-7B, rank 64 on every linear, bf16, 2 devices: each item, then the peak."""
    estimate = trainer_estimate(lora7())
    adapter_unit = 2 * 64 * LINEAR_FEATURES7  # two layers' adapter; no root module is adapted
    activations = T * (28 * 2 * 3584 + A7 - 4 * 3584 + 2 * 64 * 7 + 4 * 3584)
    assert {(i.label, i.bytes, i.phase) for i in estimate.items} == {
        ("frozen base weights (bf16, 1/2 shard; no gradients, no Adam moments)", 2 * P7 // 2, ""),
        ("LoRA adapter weights (rank 64, 161.5 M parameters, fp32, 1/2 shard)", 4 * PA7 // 2, ""),
        ("LoRA adapter AdamW moments (fp32, 1/2 shard)", 8 * PA7 // 2, ""),
        ("device runtime (context, collective buffers)", DEVICE_RUNTIME, ""),
        ("LoRA adapter gradients (fp32, 1/2 shard)", 4 * PA7 // 2, "actor update"),
        (
            "FSDP working set (bf16 weights of embeddings + 2 layers; adapter grads)",
            2 * (ROOT7 + 2 * LAYER7 + adapter_unit) + 2 * adapter_unit,
            "actor update",
        ),
        ("activations (8192 tokens, checkpointed, rank-64 LoRA, bf16)", activations, "actor update"),
        ("logits (8192 tokens x 152064 vocabulary, bf16)", 8 * T * 152064, "actor update"),
        (
            "reference working set (the actor, adapter off; no reference weights)",
            2 * (ROOT7 + 2 * LAYER7 + adapter_unit),
            "reference log-probs",
        ),
        ("reference activations (8192 tokens, one layer at a time)", T * A7, "reference log-probs"),
        ("reference logits (8192 tokens)", 4 * T * 152064, "reference log-probs"),
    }
    assert estimate.peak_phase == "actor update"
    assert (
        estimate.peak
        == sum(i.bytes for i in estimate.items if i.phase in ("", "actor update"))
        == (
            25_956_313_600 + 2 * 2 * PA7 // 2 + 4 * PA7 // 2  # the fp32 adapter: weights, gradients and moments
        )
    )


def test_param_dtype_sets_the_frozen_base_and_the_adapter_stays_fp32():
    fp32 = trainer_estimate(lora7(param_dtype="float32"))
    items = {i.label: i.bytes for i in fp32.items}
    assert items["frozen base weights (fp32, 1/2 shard; no gradients, no Adam moments)"] == 4 * P7 // 2
    assert items["LoRA adapter AdamW moments (fp32, 1/2 shard)"] == 8 * PA7 // 2
    assert items["LoRA adapter gradients (fp32, 1/2 shard)"] == 4 * PA7 // 2
    fp16 = {i.label for i in trainer_estimate(lora7(param_dtype="float16")).items}
    assert "frozen base weights (fp16, 1/2 shard; no gradients, no Adam moments)" in fp16
    assert "LoRA adapter weights (rank 64, 161.5 M parameters, fp32, 1/2 shard)" in fp16


def test_a_lora_trainer_keeps_fp32_state_only_for_the_adapter():
    lora = {i.label for i in trainer_estimate(lora7()).items}
    full = {i.label for i in trainer_estimate(lora7(lora=None)).items}
    assert [label for label in lora if "fp32" in label] == [
        label for label in lora if label.startswith(("LoRA adapter weights", "LoRA adapter AdamW", "LoRA adapter grad"))
    ]
    assert (
        "actor weights (fp32, 1/2 shard)" in full
        and "reference working set (bf16; its weights stay in host memory)" in full
    )


def test_what_a_lora_trainer_keeps_between_updates():
    setup = lora7(critic=QWEN05)  # a critic (full fine-tuning) beside the adapter
    critic = QWEN05._replace(tied=True).params
    weights, moments = (2 * P7 + 4 * PA7) // 2 + 4 * critic // 2, 8 * PA7 // 2 + 8 * critic // 2
    assert idle_bytes(setup) == weights + moments + DEVICE_RUNTIME
    assert idle_bytes(setup._replace(param_offload=True)) == moments + DEVICE_RUNTIME
    assert idle_bytes(setup._replace(optimizer_offload=True)) == weights + DEVICE_RUNTIME
    assert idle_bytes(lora7(critic=QWEN05, lora=None)) == 12 * (P7 + critic) // 2 + DEVICE_RUNTIME


targets = st.sampled_from(["all-linear", "q_proj,v_proj", "q_proj,k_proj,v_proj,o_proj", "down_proj,lm_head"])


@settings(max_examples=100)
@given(
    shape=shapes,
    devices=st.integers(1, 512),
    tokens=st.integers(1, 65536),
    rank=st.sampled_from([1, 8, 16, 32, 64, 128]),
    target=targets,
    checkpointing=st.booleans(),
)
def test_lora_needs_less_with_more_devices_and_more_with_a_higher_rank(
    shape, devices, tokens, rank, target, checkpointing
):
    setup = TrainerSetup(shape, devices, tokens, checkpointing, reference=True, lora=adapter(rank, target))
    need = trainer_estimate(setup).peak
    assert trainer_estimate(setup._replace(devices=devices + 1)).peak <= need
    assert trainer_estimate(setup._replace(lora=adapter(2 * rank, target))).peak > need
    # a bf16 base (2P) and an fp32 adapter with its moments (12Pa) hold less than fp32 weights and moments (12P)
    if 12 * adapter_params(shape, setup.lora) < 10 * shape.params:
        assert trainer_estimate(setup).resident < trainer_estimate(setup._replace(lora=None)).resident


# --- the rollout engine -------------------------------------------------------------------------------------------


def engine7(**changes) -> EngineSetup:
    setup = EngineSetup(QWEN7, "bfloat16", 1, 1, 2048, sequences=64, budget=int(0.7 * 32 * GIB))
    return setup._replace(lora=LoRASlot(64, "bfloat16"))._replace(**changes)


def test_the_adapter_slot_by_hand():
    assert lora_slot_bytes(engine7()) == 2 * 28 * 64 * LINEAR_FEATURES7 == 322_961_408
    assert lora_slot_bytes(engine7(lora=LoRASlot(64, "float32"))) == 4 * 28 * 64 * LINEAR_FEATURES7
    assert lora_slot_bytes(engine7(pipeline_parallel=2)) == 2 * 14 * 64 * LINEAR_FEATURES7
    # TP 2: q, k, v, gate, up shard B's outputs; o and down shard A's inputs
    column = (3584 + 3584 // 2) + 2 * (3584 + 2 * 128) + 2 * (3584 + 18944 // 2)
    row = (3584 // 2 + 3584) + (18944 // 2 + 3584)
    assert lora_slot_bytes(engine7(tensor_parallel=2)) == 2 * 28 * 64 * (column + row)
    # 4 KV heads on 8 devices: each keeps one
    column8 = (3584 + 3584 // 8) + 2 * (3584 + 128) + 2 * (3584 + 18944 // 8)
    row8 = (3584 // 8 + 3584) + (18944 // 8 + 3584)
    assert lora_slot_bytes(engine7(tensor_parallel=8)) == 2 * 28 * 64 * (column8 + row8)
    sharded = engine7(tensor_parallel=2, lora=LoRASlot(64, "bfloat16", fully_sharded=True))
    halves = 2 * (3584 // 2 + 3584 // 2) + 2 * (3584 // 2 + 2 * 128) + 3 * (3584 // 2 + 18944 // 2)
    assert lora_slot_bytes(sharded) == 2 * 28 * 64 * halves


def test_the_slot_is_one_item_of_the_engine_and_none_without_an_adapter():
    with_slot, without = engine_estimate(engine7()), engine_estimate(engine7(lora=None))
    slot = "LoRA adapter slot (max_lora_rank 64, bfloat16, every linear of 28 layers)"
    assert {i.label: i.bytes for i in with_slot.items}[slot] == lora_slot_bytes(engine7())
    assert with_slot.peak - without.peak == lora_slot_bytes(engine7())
    assert not any("LoRA" in i.label for i in without.items)


# --- through the CLI ----------------------------------------------------------------------------------------------


def test_a_7b_model_does_not_fit_910b4_devices_in_full_and_fits_as_a_lora_adapter(cli):
    full = cli("plan", "memory", "-c", REFERENCE, "hardware=ascend910b4", MODEL7)
    assert full.code == 2 and "trinity: 1 problem in the config" in full.err
    assert (
        "trainer (Qwen/Qwen2.5-7B-Instruct, FSDP over 2 devices, 8192 tokens per micro-batch): 76.3 GiB of 32.0 GiB "
        "(238%): DOES NOT FIT" in full.out
    )
    lora = cli("plan", "memory", "-c", REFERENCE, "hardware=ascend910b4", MODEL7, LORA64)
    assert lora.code == 0, lora.err
    assert (
        "LoRA adapter on Qwen/Qwen2.5-7B-Instruct: rank 64 on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
        "down_proj, 161.5 M parameters (2.12% of the model), trained on a frozen base; the engines apply it "
        "(synchronizer.lora_sync: adapter)\n" in lora.out
    )
    assert (
        "trainer (Qwen/Qwen2.5-7B-Instruct, LoRA rank 64, FSDP over 2 devices, 8192 tokens per micro-batch): 24.8 GiB "
        "of 32.0 GiB (77%): fits\n" in lora.out
    )
    for line in (
        "    frozen base weights (bf16, 1/2 shard; no gradients, no Adam moments)        7.1 GiB\n",
        "    LoRA adapter AdamW moments (fp32, 1/2 shard)                                0.6 GiB\n",
        "    reference working set (the actor, adapter off; no reference weights)        2.9 GiB\n",
        "    LoRA adapter slot (max_lora_rank 64, bfloat16, every linear of 28 layers)    0.3 GiB\n",
    ):
        assert line in lora.out
    assert "vLLM engine (Qwen/Qwen2.5-7B-Instruct, 1 device per engine): 16.6 GiB of 22.4 GiB" in lora.out
    assert "does not fit" not in lora.err
    validated = cli("config", "validate", "-c", REFERENCE, "hardware=ascend910b4", MODEL7, LORA64)
    assert validated.code == 0 and "valid for ascend910b4 (npu)" in validated.out


def test_the_json_plan_names_the_adapter_and_its_items(cli):
    args = ("plan", "memory", "-c", REFERENCE, "hardware=ascend910b4", MODEL7, LORA64, "--format", "json")
    result = cli(*args)
    assert result.code == 0, result.err
    (plan,) = result.json()["plans"]
    assert plan["lora"] == {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "rank": 64,
        "modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        "parameters": PA7,
        "lora_sync": "adapter",
    }
    trainer, engine = (
        next(c for c in plan["checks"] if c["role"] == role) for role in ("trainer", "explorer.rollout_model")
    )
    assert trainer["need_bytes"] == trainer_estimate(lora7()).peak and trainer["capacity_bytes"] == 32 * GIB
    assert {i["phase"] for i in trainer["items"]} == {"", "actor update", "reference log-probs", "weight sync"}
    slot = [i for i in engine["items"] if i["label"].startswith("LoRA adapter slot")]
    assert slot == [
        {
            "label": "LoRA adapter slot (max_lora_rank 64, bfloat16, every linear of 28 layers)",
            "bytes": 322_961_408,
            "phase": "",
        }
    ]
    full = cli(*(a for a in args if a != LORA64))
    assert full.json()["plans"][0]["lora"] is None


def test_the_engine_slot_follows_lora_sync_rank_and_dtype(cli):
    def slots(*overrides):
        result = cli("plan", "memory", "-c", REFERENCE, "hardware=ascend910b4", MODEL7, *overrides, "--format", "json")
        assert result.code == (0 if overrides else 2), result.err  # in full, the 7B trainer does not fit
        (engine,) = [c for c in result.json()["plans"][0]["checks"] if c["role"] == "explorer.rollout_model"][:1]
        return [(i["label"], i["bytes"]) for i in engine["items"] if "LoRA" in i["label"]]

    assert slots("model.lora_configs=[{lora_rank: 40}]") == [
        ("LoRA adapter slot (max_lora_rank 64, bfloat16, every linear of 28 layers)", 322_961_408)
    ]
    assert slots("model.lora_configs=[{lora_rank: 8, lora_dtype: float16}]") == [
        ("LoRA adapter slot (max_lora_rank 8, float16, every linear of 28 layers)", 2 * 28 * 8 * LINEAR_FEATURES7)
    ]
    assert slots(LORA64, "explorer.rollout_model.dtype=float16") == [  # lora_dtype auto: the engine's dtype
        ("LoRA adapter slot (max_lora_rank 64, float16, every linear of 28 layers)", 322_961_408)
    ]
    tp2 = ("explorer.rollout_model.tensor_parallel_size=2", "explorer.rollout_model.engine_num=2")
    sharded = engine7(tensor_parallel=2, lora=LoRASlot(64, "bfloat16", fully_sharded=True))
    assert slots(LORA64, *tp2, "model.fully_sharded_loras=true") == [
        ("LoRA adapter slot (max_lora_rank 64, bfloat16, every linear of 28 layers)", lora_slot_bytes(sharded))
    ]
    assert slots(LORA64, *tp2)[0][1] == lora_slot_bytes(engine7(tensor_parallel=2)) > lora_slot_bytes(sharded)
    assert slots(LORA64, "synchronizer.lora_sync=merged") == []  # the engines hold plain full weights
    assert slots() == []


def test_trainer_param_dtype_reaches_a_lora_trainer(cli):
    result = cli(
        "plan", "memory", "-c", REFERENCE, "hardware=ascend910b4", MODEL7, LORA64, "trainer.param_dtype=float32"
    )
    assert result.code == 2  # an fp32 base no longer fits 32 GB devices
    assert "    frozen base weights (fp32, 1/2 shard; no gradients, no Adam moments)       14.2 GiB\n" in result.out
    # the trainer also computes in fp32: activations and logits twice bf16's (logits 18.6 GiB, not 9.3)
    assert "LoRA rank 64, FSDP over 2 devices, 8192 tokens per micro-batch): 47.0 GiB of 32.0 GiB (147%)" in result.out
    assert "    logits (8192 tokens x 152064 vocabulary, fp32)                             18.6 GiB\n" in result.out


def test_the_lora_example_fits_a_910b4_node_and_would_not_in_full(cli):
    result = cli("plan", "memory", "-c", EXAMPLE, "hardware=ascend910b4")
    assert result.code == 0, result.err
    assert "trainer (Qwen/Qwen2.5-7B-Instruct, LoRA rank 64, FSDP over 2 devices" in result.out
    validated = cli("config", "validate", "-c", EXAMPLE, "hardware=ascend910b4")
    assert validated.code == 0 and "valid for ascend910b4 (npu): 0 warning(s)" in validated.out
    full = cli("config", "validate", "-c", EXAMPLE, "hardware=ascend910b4", "model.lora_configs=null")
    assert full.code == 2 and "does not fit on ascend910b4: it needs 76.3 GiB per device" in full.err


def test_a_target_the_estimate_does_not_know_is_a_note(cli):
    result = cli(
        "config",
        "validate",
        "-c",
        REFERENCE,
        "hardware=ascend910b4",
        MODEL7,
        "model.lora_configs=[{target_modules: 'q_proj,attn'}]",
    )
    assert result.code == 0
    assert (
        "model.lora_configs[0].target_modules: memory fit counts no LoRA adapter for 'attn': the estimate knows "
        "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head, embed_tokens" in result.err
    )
