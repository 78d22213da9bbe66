"""LoRA adapters in the runtime: which state-dict keys make each tensor handed on, the merge against peft's own, PEFT's
folder layout, and where a role's base model and adapter come from."""

import json

import pytest

torch = pytest.importorskip("torch")

from tests.lora_adapters import adapter_tensors, peft_model  # noqa: E402
from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.runtime.weights import lora  # noqa: E402

KEYS = [
    "base_model.model.model.embed_tokens.weight",
    "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight",
    "base_model.model.model.layers.0.self_attn.q_proj.base_layer.bias",
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
    "base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight",
    "base_model.model.model.layers.0.self_attn.o_proj.weight",  # excluded: no adapter
    "base_model.model.lm_head.weight",
]


def config(demo_assets, monkeypatch, *extra):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    return resolve(Request(None, ("hardware=cpu", "+model.lora_configs=[{lora_rank: 8}]", *extra))).stage("grpo")


def test_the_adapter_is_its_matrices_under_peft_saved_names():
    assert lora.adapter_outputs(KEYS) == [
        lora.Output("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", (KEYS[3],)),
        lora.Output("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", (KEYS[4],)),
    ]


def test_the_merged_model_has_the_plain_names_and_merges_only_adapted_weights():
    assert lora.merged_outputs(KEYS) == [
        lora.Output("model.embed_tokens.weight", (KEYS[0],)),
        lora.Output("model.layers.0.self_attn.q_proj.weight", (KEYS[1], KEYS[3], KEYS[4])),
        lora.Output("model.layers.0.self_attn.q_proj.bias", (KEYS[2],)),
        lora.Output("model.layers.0.self_attn.o_proj.weight", (KEYS[5],)),
        lora.Output("lm_head.weight", (KEYS[6],)),
    ]


def test_combine_is_base_plus_scale_b_a():
    base, a, b = torch.ones(3, 2), torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0], [0.0], [-1.0]])
    assert torch.equal(lora.combine([base], 2.0), base)
    assert torch.equal(lora.combine([base, a, b], 2.0), torch.tensor([[3.0, 5.0], [1.0, 1.0], [-1.0, -3.0]]))


def test_merging_the_trainers_tensors_gives_peft_merge_and_unload(demo_assets):
    wrapped = peft_model(str(demo_assets / "model"), rank=8, alpha=16)
    state = wrapped.state_dict()
    outputs = lora.merged_outputs(list(state))
    ours = {o.name: lora.combine([state[k] for k in o.keys], 16 / 8) for o in outputs}
    theirs = wrapped.merge_and_unload().state_dict()
    assert sorted(ours) == sorted(theirs)
    assert max((ours[n] - theirs[n]).abs().max().item() for n in ours) < 1e-6


def test_an_adapter_folder_is_what_peft_loads(demo_assets, tmp_path, monkeypatch):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    wrapped = peft_model(str(demo_assets / "model"))
    settings = lora.peft_config(config(demo_assets, monkeypatch).model.lora_configs[0], str(demo_assets / "model"))
    lora.write_adapter(tmp_path, adapter_tensors(wrapped), settings | {"lora_alpha": 16})
    saved = json.loads((tmp_path / lora.ADAPTER_CONFIG).read_text())
    assert saved["target_modules"] == sorted(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(saved["base_model_name_or_path"]), tmp_path)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=ids).logits, wrapped(input_ids=ids).logits, atol=1e-5)


def test_a_lora_checkpoint_names_its_base_and_is_the_adapter(demo_assets, tmp_path, monkeypatch):
    cfg = config(demo_assets, monkeypatch)
    model = str(demo_assets / "model")
    assert lora.sources(model, cfg) == lora.Sources(model, None)
    lora.write_adapter(
        tmp_path, {"x.lora_A.weight": torch.zeros(1)}, lora.peft_config(cfg.model.lora_configs[0], model)
    )
    assert lora.sources(str(tmp_path), cfg) == lora.Sources(model, str(tmp_path))
    assert lora.engine_file(tmp_path, cfg) == tmp_path / lora.ADAPTER_WEIGHTS
    plain = resolve(Request(None, ("hardware=cpu",))).stage("grpo")  # a stage that trains every weight
    assert lora.sources(str(tmp_path), plain) == lora.Sources(str(tmp_path / lora.MERGED), None)
    assert lora.engine_file(tmp_path, plain) is None  # no merged model was saved
    merged = resolve(Request(None, ("hardware=cpu", "+model.lora_configs=[{}]", "synchronizer.lora_sync=merged")))
    assert lora.engine_file(tmp_path, merged.stage("grpo")) is None


def test_a_pretrained_adapter_starts_the_run_from_the_models_own_folder(demo_assets, tmp_path, monkeypatch):
    (tmp_path / lora.ADAPTER_CONFIG).write_text(json.dumps({"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]}))
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    lora_path = ("+model.lora_configs=[{lora_rank: 8}]", f"model.lora_configs.0.path={tmp_path}")
    cfg = resolve(Request(None, ("hardware=cpu", "~stages", *lora_path))).config  # a path starts the first stage
    model = cfg.model.model_path
    assert lora.sources(model, cfg) == lora.Sources(model, str(tmp_path))
    assert (cfg.model.lora_configs[0].lora_alpha, cfg.model.lora_configs[0].target_modules) == (16, "q_proj")


def test_the_adapters_names_are_peft_own(demo_assets):
    from peft import get_peft_model_state_dict

    wrapped = peft_model(str(demo_assets / "model"))
    names = [o.name for o in lora.adapter_outputs(list(wrapped.state_dict()))]
    assert sorted(names) == sorted(get_peft_model_state_dict(wrapped))


def test_a_second_writer_of_an_adapter_folder_keeps_the_first_ones(tmp_path):
    settings = {"target_modules": ["q_proj"], "r": 1}
    lora.publish_adapter(tmp_path / "a1", {"m.q_proj.lora_A.weight": torch.ones(1, 2)}, settings)
    lora.publish_adapter(tmp_path / "a1", {"m.q_proj.lora_A.weight": torch.zeros(1, 2)}, settings)
    from safetensors.torch import load_file

    assert sorted(p.name for p in tmp_path.iterdir()) == ["a1"]  # no draft left behind
    assert load_file(str(tmp_path / "a1" / lora.ADAPTER_WEIGHTS))["m.q_proj.lora_A.weight"].sum() == 2


def test_bench_names_checkpoints_its_engines_cannot_load(demo_assets, tmp_path, monkeypatch):
    adapter_run = config(demo_assets, monkeypatch)
    merged_run = config(demo_assets, monkeypatch, "synchronizer.lora_sync=merged")
    (tmp_path / "model.safetensors").write_text("w")  # a full fine-tune's checkpoint
    assert "it holds a full model, and these engines apply a LoRA adapter" in lora.mismatch(tmp_path, adapter_run)
    assert lora.mismatch(tmp_path, merged_run) is None
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / lora.ADAPTER_WEIGHTS).write_text("w")  # a LoRA checkpoint without merged/
    (tmp_path / lora.ADAPTER_CONFIG).write_text(json.dumps({"r": 8, "lora_alpha": 32}))
    assert lora.mismatch(tmp_path, adapter_run) is None
    other = config(demo_assets, monkeypatch, "model.lora_configs.0.lora_alpha=16")  # another scale
    assert "its adapter has r=8, lora_alpha=32, and this config's" in lora.mismatch(tmp_path, other)
    assert "a LoRA adapter without its merged model" in lora.mismatch(tmp_path, merged_run)
    (tmp_path / lora.MERGED).mkdir()
    (tmp_path / lora.MERGED / "model.safetensors").write_text("w")
    assert lora.mismatch(tmp_path, merged_run) is None


def test_a_fresh_adapter_is_peft_own_initialisation_in_float32(demo_assets, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    settings = config(demo_assets, monkeypatch).model.lora_configs[0]
    lora.initial_adapter(str(demo_assets / "model"), settings, tmp_path / "a", seed=0)
    lora.initial_adapter(str(demo_assets / "model"), settings, tmp_path / "b", seed=0)
    first, again = (load_file(str(tmp_path / f / lora.ADAPTER_WEIGHTS)) for f in ("a", "b"))
    reference = peft_model(str(demo_assets / "model"), rank=8)
    assert sorted(first) == sorted(adapter_tensors(reference))
    for name, tensor in first.items():
        assert tensor.dtype == torch.float32 and torch.equal(tensor, again[name])  # every rank builds the same
        if ".lora_B." in name:
            assert not tensor.any()
        else:  # kaiming_uniform_(a=sqrt(5)): uniform within 1/sqrt(fan_in)
            bound = 1 / tensor.shape[1] ** 0.5
            assert tensor.abs().max() <= bound and tensor.abs().max() > 0.9 * bound
