"""The model config a run changes (model.rope_scaling, model.rope_theta), as the trainer and each engine type read it:
the transformers engine's model computes with it, vLLM is handed it (on every profile's vLLM), and verl reads it from
the folder trinity writes for it: the same rope parameters everywhere."""

import asyncio
import json

import pytest

torch = pytest.importorskip("torch")

from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.runtime.rollout import vllm_args, vllm_fields  # noqa: E402
from trinity.runtime.rollout.samples import Sampling  # noqa: E402
from trinity.runtime.rollout.transformers_engine import TransformersEngine  # noqa: E402
from trinity.runtime.weights import model_config  # noqa: E402

ROPE = ("+model.rope_theta=100.0", "+model.rope_scaling={rope_type: linear, factor: 2.0}")
# the demo model's own rope (default, theta 10000) with the run's over it
CHANGED = {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 100.0}}


def demo(demo_assets, monkeypatch, *extra):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    return resolve(Request(None, ("hardware=cpu", *extra))).stage("grpo")


def test_the_run_changes_nothing_unless_it_sets_a_rope(demo_assets, monkeypatch):
    model = str(demo_assets / "model")
    assert model_config.overrides(demo(demo_assets, monkeypatch), model) == {}
    assert model_config.overrides(demo(demo_assets, monkeypatch, *ROPE), model) == CHANGED


def test_the_folder_verl_reads_is_the_models_config_with_the_change(demo_assets, tmp_path):
    model = demo_assets / "model"
    (tmp_path / "model").mkdir()
    own = json.loads((model / "config.json").read_text()) | {"rope_theta": 10000.0}  # an older config's key as well
    (tmp_path / "model" / "config.json").write_text(json.dumps(own))
    (tmp_path / "model" / "generation_config.json").write_text((model / "generation_config.json").read_text())
    (tmp_path / "model" / "modeling_demo.py").write_text("# a model's own code\n")
    folder = model_config.config_folder(str(tmp_path / "model"), CHANGED, tmp_path / "configured")
    written = json.loads((tmp_path / "configured" / "config.json").read_text())
    assert written == {k: v for k, v in own.items() if k != "rope_theta"} | CHANGED
    assert sorted(p.name for p in (tmp_path / "configured").iterdir()) == [
        "config.json",
        "generation_config.json",
        "modeling_demo.py",
    ]
    assert folder == str(tmp_path / "configured")


def test_the_transformers_engine_computes_with_the_changed_rope(demo_assets, monkeypatch):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = demo(demo_assets, monkeypatch, *ROPE)
    engine = TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)
    asyncio.run(engine.setup(str(demo_assets / "model"), 0))
    assert engine.model.config.rope_parameters == CHANGED["rope_parameters"]
    ids = engine.tokenizer("12+30=", add_special_tokens=False)["input_ids"]
    _, [sample] = asyncio.run(engine.generate(ids, 1, Sampling(temperature=1.0, max_tokens=4)))

    def logprobs(hf_config):
        model = AutoModelForCausalLM.from_pretrained(str(demo_assets / "model"), config=hf_config)
        with torch.no_grad():
            logits = model(torch.tensor([ids + sample.response_ids])).logits[0, len(ids) - 1 : -1]
        return torch.log_softmax(logits, -1).gather(1, torch.tensor(sample.response_ids)[:, None]).squeeze(1)

    own = AutoConfig.from_pretrained(str(demo_assets / "model"))
    changed = model_config.apply(AutoConfig.from_pretrained(str(demo_assets / "model")), CHANGED)
    assert torch.allclose(torch.tensor(sample.logprobs), logprobs(changed), atol=1e-5)
    assert not torch.allclose(torch.tensor(sample.logprobs), logprobs(own), atol=1e-3)  # the change changes them


@pytest.mark.parametrize("profile", ["a100", "ascend910b"])
def test_vllm_is_handed_the_same_change_and_its_release_takes_it(demo_assets, monkeypatch, profile):
    """vLLM 0.31 (GPUs) and vLLM 0.23 (vllm-ascend's, NPUs) both take hf_overrides and enable_log_requests."""
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    config = resolve(
        Request(None, (f"hardware={profile}", "explorer.rollout_model.enable_log_requests=true", *ROPE))
    ).stage("grpo")
    kwargs = vllm_args.engine_kwargs(config, str(demo_assets / "model"), vllm_args.topology(config, 0))
    assert kwargs["hf_overrides"] == CHANGED and kwargs["enable_log_requests"] is True
    assert vllm_fields.for_device(config.hardware.device_type).problems(kwargs) == []
    plain = demo(demo_assets, monkeypatch)
    assert "hf_overrides" not in vllm_args.engine_kwargs(
        plain, str(demo_assets / "model"), vllm_args.topology(plain, 0)
    )


def test_verl_reads_the_changed_config_for_the_actor_and_the_critic(demo_assets, monkeypatch, tmp_path):
    pytest.importorskip("verl")
    from verl.utils.config import omega_conf_to_dataclass

    from trinity.runtime.verl.config import build, build_critic

    config = demo(demo_assets, monkeypatch, *ROPE)
    model = str(demo_assets / "model")
    folder = model_config.config_folder(model, model_config.overrides(config, model), tmp_path / "configured")
    actor = omega_conf_to_dataclass(build(config, model, 10, hf_config=folder).model)
    critic = omega_conf_to_dataclass(build_critic(config, model, 10, hf_config=folder).model)
    for section in (actor, critic):
        assert section.path == model and section.hf_config.rope_parameters == CHANGED["rope_parameters"]
    untouched = omega_conf_to_dataclass(build(config, model, 10).model)
    assert untouched.hf_config.rope_parameters == {"rope_type": "default", "rope_theta": 10000.0}
