"""LoRA settings through `trinity config validate`, as a user writes them: one adapter, its modules checked against
the model folder's own weights (read from their safetensors headers), a pre-trained adapter's own settings used,
each engine given only the LoRA settings it honours, and a LoRA stage handing a full model to a full fine-tune."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.conftest import REFERENCE
from trinity.config import model_modules

LAYER = "model.layers.0"
WEIGHTS = {
    "model.embed_tokens.weight": (16, 8),
    f"{LAYER}.self_attn.q_proj.weight": (8, 8),
    f"{LAYER}.self_attn.q_proj.bias": (8,),
    f"{LAYER}.self_attn.v_proj.weight": (4, 8),
    f"{LAYER}.mlp.up_proj.weight": (12, 8),
    f"{LAYER}.input_layernorm.weight": (8,),
    "lm_head.weight": (16, 8),
}


@pytest.fixture
def model(tmp_path):
    """A model folder whose weights name q_proj, v_proj and up_proj (and the output head, norms, embeddings)."""
    folder = tmp_path / "model"
    folder.mkdir()
    save_file({k: np.zeros(s, dtype=np.float32) for k, s in WEIGHTS.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text("{}")
    return folder


def validate(cli, write, model, *overrides, text=""):
    path = write("run.yaml", f"model:\n  model_path: {model}\n{text}")
    return cli("config", "validate", "-c", str(path), "hardware=a100", *overrides)


def test_module_names_come_from_the_weights_headers(model):
    found = model_modules.read(model)
    assert found.linear == {"q_proj", "v_proj", "up_proj"}  # no embeddings, no output head, no norms
    assert found.every == {"embed_tokens", "q_proj", "v_proj", "up_proj", "input_layernorm", "lm_head"}


def test_a_folder_without_safetensors_is_not_read(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"x" * 16)
    assert model_modules.read(tmp_path) is None


def test_a_lora_config_with_modules_the_model_has_is_valid(cli, write, model):
    result = validate(cli, write, model, "+model.lora_configs=[{target_modules: 'q_proj, up_proj'}]")
    assert result.code == 0, result.err
    assert "valid for a100" in result.out


def test_a_target_module_the_model_lacks_is_named_with_the_ones_it_has(cli, write, model):
    text = "  lora_configs:\n    - lora_rank: 8\n      target_modules: q_proj,o_proj\n"
    result = validate(cli, write, model, text=text)
    assert result.code == 2 and "Traceback" not in result.err
    assert "run.yaml:5:7: model.lora_configs[0].target_modules: 'o_proj' is not among the model's linear modules" in (
        result.err
    )
    assert "allowed: q_proj, up_proj, v_proj, or all-linear" in result.err


def test_an_excluded_module_must_be_one_of_the_models(cli, write, model):
    result = validate(cli, write, model, "+model.lora_configs=[{exclude_modules: gate}]")
    assert result.code == 2
    assert "model.lora_configs[0].exclude_modules: 'gate' is not among the model's modules" in result.err


def test_trinity_trains_one_adapter(cli, write, model):
    result = validate(cli, write, model, "+model.lora_configs=[{},{lora_rank: 4}]")
    assert result.code == 2
    assert "model.lora_configs[1]: trinity trains one LoRA adapter; 2 are configured" in result.err


def test_a_pretrained_adapters_settings_are_used_and_a_conflicting_one_is_refused(cli, write, model, tmp_path):
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"r": 16, "lora_alpha": 8, "target_modules": ["v_proj"]}))
    rendered = cli(
        "config", "render", "-c", str(write("run.yaml", f"model:\n  model_path: {model}\n")), "hardware=a100",
        f"+model.lora_configs=[{{path: {folder}}}]", "--format", "json",
    )  # fmt: skip
    assert rendered.code == 0, rendered.err
    adapter = rendered.json()["model"]["lora_configs"][0]
    assert (adapter["lora_rank"], adapter["lora_alpha"], adapter["target_modules"], adapter["name"]) == (
        16, 8, "v_proj", "default",
    )  # fmt: skip
    result = validate(cli, write, model, f"+model.lora_configs=[{{path: {folder}, lora_rank: 4}}]")
    assert result.code == 2
    assert f"model.lora_configs[0].lora_rank: 4 differs from the adapter at '{folder}', which has r=16" in result.err


def test_a_path_that_is_not_an_adapter_is_refused(cli, write, model, tmp_path):
    result = validate(cli, write, model, f"+model.lora_configs=[{{path: {tmp_path}}}]")
    assert result.code == 2
    assert f"model.lora_configs[0].path: '{tmp_path}' is not a readable PEFT adapter folder" in result.err


@pytest.mark.parametrize(
    "override,why",
    [
        ("model.max_cpu_loras=2", "the run trains no LoRA adapter"),
        ("model.fully_sharded_loras=true", "the run trains no LoRA adapter"),
        ("synchronizer.lora_sync=merged", "the run trains no LoRA adapter"),
        ("trainer.save_merged_model=true", "the run trains no LoRA adapter"),
    ],
)
def test_a_lora_setting_without_an_adapter_is_refused(cli, write, model, override, why):
    result = validate(cli, write, model, override)
    assert result.code == 2
    assert f"{override.split('=')[0]}: is set, but {why}" in result.err


def test_vllms_adapter_settings_are_refused_on_the_transformers_engine_and_with_merged_weights(cli, write, model):
    lora = "+model.lora_configs=[{lora_dtype: bfloat16}]"
    transformers = validate(
        cli, write, model, lora, "model.max_cpu_loras=2", "explorer.rollout_model.engine_type=transformers"
    )
    assert transformers.code == 2
    assert "model.max_cpu_loras: is set, but the transformers engine does not take it" in transformers.err
    assert "lora_dtype" not in transformers.err  # the transformers engine casts its adapter
    merged = validate(cli, write, model, lora, "synchronizer.lora_sync=merged")
    assert merged.code == 2
    assert "model.lora_configs[0].lora_dtype: is set, but synchronizer.lora_sync is 'merged'" in merged.err
    assert validate(cli, write, model, lora, "model.max_cpu_loras=1", "model.fully_sharded_loras=true").code == 0
    slots = validate(cli, write, model, lora, "model.max_cpu_loras=4")
    assert slots.code == 2 and "model.max_cpu_loras: 4: the engines serve one adapter" in slots.err


def test_a_rank_above_what_vllm_serves_is_refused_unless_weights_are_merged(cli, write, model):
    result = validate(cli, write, model, "+model.lora_configs=[{lora_rank: 1024}]")
    assert result.code == 2
    assert "model.lora_configs[0].lora_rank: 1024 is above the highest rank vLLM serves adapters at (512)" in result.err
    merged = validate(cli, write, model, "+model.lora_configs=[{lora_rank: 1024}]", "synchronizer.lora_sync=merged")
    assert merged.code == 0, merged.err


def test_a_lora_stage_before_a_full_fine_tune_must_save_its_merged_model(cli):
    stages = ("-c", str(REFERENCE), "hardware=a100", "+stages=[{stage_name: a}, {stage_name: b}]")
    result = cli("config", "render", *stages, "+stages.0.model.lora_configs=[{}]")  # the data sets are not here
    assert result.code == 2
    assert "trainer.save_merged_model: stage 'a' trains a LoRA adapter and stage 'b' trains every weight" in result.err
    fixed = cli(
        "config", "validate", *stages, "+stages.0.model.lora_configs=[{}]", "stages.0.trainer.save_merged_model=true"
    )
    assert "save_merged_model" not in fixed.err


def test_a_lora_stage_goes_on_training_the_adapter_of_the_stage_before(cli, tmp_path):
    stages = ("-c", str(REFERENCE), "hardware=a100", "+stages=[{stage_name: a}, {stage_name: b}]")
    lora = ("+model.lora_configs=[{lora_rank: 8}]", "+stages.1.model.lora_configs=[{lora_rank: 16}]")
    result = cli("config", "render", *stages, *lora)
    assert result.code == 2
    assert "model.lora_configs[0].lora_rank: stage 'b' goes on training stage 'a''s adapter, which has lora_rank=8" in (
        result.err
    )
    assert "allowed: 8" in result.err
    same = cli("config", "render", *stages, "+model.lora_configs=[{lora_rank: 8}]", "algorithm.kl_loss_fn=low_var_kl")
    assert same.code == 0, same.err
    assert "stage 'b' goes on training an adapter: its KL reference is the base model" in same.err  # a warning
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 32, "lora_alpha": 32}))
    later = f"+stages.1.model.lora_configs=[{{path: {tmp_path}}}]"
    path = cli("config", "render", *stages, "+model.lora_configs=[{}]", later)
    assert path.code == 2
    assert "model.lora_configs[0].path: stage 'b' starts from the previous stage's checkpoint" in path.err


def test_a_pretrained_adapter_with_settings_trinity_does_not_apply_is_refused(cli, write, model, tmp_path):
    folder = tmp_path / "adapter"
    folder.mkdir()
    saved = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "use_rslora": True, "rank_pattern": {}}
    (folder / "adapter_config.json").write_text(json.dumps(saved))
    result = validate(cli, write, model, f"+model.lora_configs=[{{path: {folder}}}]")
    assert result.code == 2
    assert f"model.lora_configs[0].path: the adapter at '{folder}' has use_rslora=True" in result.err
    assert "rank_pattern" not in result.err  # empty: as a plain adapter has it


def test_adapters_on_embeddings_or_the_output_head_are_refused_without_reading_the_model(cli, write, tmp_path):
    result = validate(cli, write, tmp_path / "absent", "+model.lora_configs=[{target_modules: 'q_proj,lm_head'}]")
    assert result.code == 2
    assert "adapters on embeddings or the output head ('lm_head') are not supported" in result.err


def test_a_lora_checkpoint_as_the_model_is_checked_against_its_base(cli, write, model, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(model), "r": 8}))
    save_file(
        {"x.q_proj.lora_A.weight": np.zeros((8, 8), dtype=np.float32)}, str(checkpoint / "adapter_model.safetensors")
    )
    assert validate(cli, write, checkpoint, "+model.lora_configs=[{target_modules: q_proj}]").code == 0
    refused = validate(cli, write, checkpoint, "+model.lora_configs=[{target_modules: o_proj}]")
    assert refused.code == 2 and "allowed: q_proj, up_proj, v_proj, or all-linear" in refused.err


def test_fsdp1_is_refused_for_a_lora_run(cli, write, model):
    result = validate(cli, write, model, "+model.lora_configs=[{}]", "trainer.trainer_strategy=fsdp")
    assert result.code == 2
    assert "trainer.trainer_strategy: 'fsdp' (FSDP1) gathers the whole model on every rank" in result.err
    assert "allowed: fsdp2" in result.err


def test_a_pretrained_adapter_with_merged_weights_needs_a_trainer_to_merge_it(cli, write, model, tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 32, "lora_alpha": 32}))
    lora = f"+model.lora_configs=[{{path: {tmp_path}}}]"
    result = validate(cli, write, model, lora, "synchronizer.lora_sync=merged", "mode=explore")
    assert result.code == 2
    assert "model.lora_configs[0].path: holding merged weights (synchronizer.lora_sync: merged)" in result.err
    assert validate(cli, write, model, lora, "mode=explore").code == 0  # the engines apply it themselves


def test_a_lora_checkpoint_as_the_model_gives_its_own_rank_and_alpha(cli, write, model, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    saved = {"base_model_name_or_path": str(model), "r": 8, "lora_alpha": 4, "target_modules": ["q_proj"]}
    (checkpoint / "adapter_config.json").write_text(json.dumps(saved))
    path = write("run.yaml", f"model:\n  model_path: {checkpoint}\n")
    rendered = cli("config", "render", "-c", str(path), "hardware=a100", "+model.lora_configs=[{}]", "--format", "json")
    assert rendered.code == 0, rendered.err
    adapter = rendered.json()["model"]["lora_configs"][0]
    assert (adapter["lora_rank"], adapter["lora_alpha"], adapter["target_modules"]) == (8, 4, "q_proj")
    refused = validate(cli, write, checkpoint, "+model.lora_configs=[{lora_alpha: 16}]")
    assert refused.code == 2
    assert f"model.lora_configs[0].lora_alpha: 16 differs from the adapter at '{checkpoint}', which has" in refused.err


def test_vllm_keeps_adapters_in_its_own_dtypes(cli, write, model):
    result = validate(cli, write, model, "+model.lora_configs=[{lora_dtype: float32}]")
    assert result.code == 2
    assert "model.lora_configs[0].lora_dtype: 'float32' is not a dtype vLLM keeps adapters in" in result.err
    assert "allowed: auto, float16, bfloat16" in result.err
    transformers = validate(
        cli,
        write,
        model,
        "+model.lora_configs=[{lora_dtype: float32}]",
        "explorer.rollout_model.engine_type=transformers",
    )
    assert transformers.code == 0, transformers.err


def test_an_adapter_with_its_merged_model_needs_no_trainer(cli, write, model, tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 32, "lora_alpha": 32}))
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / "model.safetensors").write_bytes(b"")
    lora = f"+model.lora_configs=[{{path: {tmp_path}}}]"
    assert validate(cli, write, model, lora, "synchronizer.lora_sync=merged", "mode=explore").code == 0


@pytest.mark.parametrize(
    "setting,value", [("layers_to_transform", 0), ("lora_bias", True), ("target_parameters", ["w"])]
)
def test_every_peft_setting_trinity_does_not_apply_is_refused(cli, write, model, tmp_path, setting, value):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 32, "lora_alpha": 32, setting: value}))
    result = validate(cli, write, model, f"+model.lora_configs=[{{path: {tmp_path}}}]")
    assert result.code == 2 and f"has {setting}={value!r}" in result.err


def test_an_adapters_base_model_name_is_the_runs_model_or_a_warning_says_what_it_changes(cli, write, model):
    """Trinity-RFT hands base_model_name to vLLM's LoRARequest, which only records it: the adapter is trained on and
    applied to model.model_path either way."""
    same = validate(cli, write, model, f"+model.lora_configs=[{{lora_rank: 8, base_model_name: '{model}'}}]")
    assert same.code == 0 and "base_model_name" not in same.err
    other = validate(cli, write, model, "+model.lora_configs=[{lora_rank: 8, base_model_name: Qwen/Qwen2.5-7B}]")
    assert other.code == 0
    assert (
        f"warning: override '+model.lora_configs=[{{lora_rank: 8, base_model_name: Qwen/Qwen2.5-7B}}]': "
        f"model.lora_configs[0].base_model_name: 'Qwen/Qwen2.5-7B' is not model.model_path '{model}': the adapter is "
        "trained on and applied to" in other.err
    )
