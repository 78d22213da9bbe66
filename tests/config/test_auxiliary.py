"""An auxiliary model's engines read the run's config seen from their model (trinity/config/auxiliary.py): every
setting of its section reaches the code the rollout engines run (explorer.rollout_model, model.model_path), each
value of which is held to its own test there; the policy's LoRA adapter and external API do not."""

import pytest

from tests.conftest import MINIMAL
from trinity.config.auxiliary import engine_view
from trinity.config.compose import Request
from trinity.config.resolve import resolve

# a value of each Literal setting an auxiliary model may take, other than its default (the engines read each)
VALUES = {
    "dtype": ["bfloat16", "float16", "float32"],
    "tool_call_parser": ["hermes", "brackets"],
    "reasoning_parser": ["deepseek_r1", "qwen3"],
    "use_v1": [True],
}
CASES = [(key, value) for key, values in VALUES.items() for value in values]


@pytest.mark.parametrize("key,value", CASES, ids=[f"{k}={v}" for k, v in CASES])
def test_each_setting_of_an_auxiliary_model_reaches_its_engines_as_the_rollout_models(tmp_path, key, value):
    path = tmp_path / "run.yaml"
    path.write_text(
        MINIMAL
        + "  lora_configs: [{lora_rank: 8}]\nexplorer:\n  auxiliary_models:\n"
        + f"    - {{model_path: /models/judge, engine_num: 2, {key}: {str(value).lower()}}}\n"
    )
    config = resolve(Request(path, ("hardware=a100",))).config
    view = engine_view(config, 0)
    assert getattr(view.explorer.rollout_model, key) == value
    assert view.explorer.rollout_model == config.explorer.auxiliary_models[0]
    assert view.model.model_path == "/models/judge" and view.explorer.rollout_model.engine_num == 2
    assert view.model.lora_configs is None and config.model.lora_configs  # the trainer's adapter is the policy's
    assert not view.model.external_model.enable
    assert (view.cluster, view.hardware) == (config.cluster, config.hardware)


def test_an_auxiliary_model_takes_the_models_lengths_but_not_its_path_template_or_thinking(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        MINIMAL
        + "  max_model_len: 512\n  max_response_tokens: 64\n  custom_chat_template: '{{ messages }}'\n"
        + "  enable_thinking: true\nexplorer:\n  auxiliary_models:\n"
        + "    - {model_path: /models/judge, engine_type: vllm}\n    - {model_path: /models/rm, max_model_len: 256}\n"
    )
    config = resolve(Request(path, ("hardware=cpu", "mode=explore"))).config
    judge, rm = config.explorer.auxiliary_models
    assert (judge.max_model_len, judge.max_response_tokens, rm.max_model_len) == (512, 64, 256)
    assert (judge.chat_template, judge.enable_thinking) == (None, None)  # as upstream: not model.*'s
    assert config.explorer.rollout_model.chat_template == "{{ messages }}"
    # a vLLM engine's KV cache takes the profile's size, as the rollout engines'; the other takes the rollout's type
    assert judge.kv_cache_mib == 512 and rm.engine_type == "transformers"  # profiles/cpu.yaml: rollout_kv_cache_mib
