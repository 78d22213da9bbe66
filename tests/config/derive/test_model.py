"""Rules of trinity/config/derive/model.py, each through `trinity config render/validate`:
the token budget, the response minimum, the critic and rollout models.
"""

import pytest


def test_prompt_budget_and_rollout_model_are_filled(render):
    cfg = render("model:\n  model_path: /m\n  max_model_len: 4096\n  max_response_tokens: 1024\n", "hardware=a100")[1]
    assert cfg["model"]["max_prompt_tokens"] == 3072
    assert (
        cfg["explorer"]["rollout_model"]["model_path"] == "/m"
        and cfg["explorer"]["rollout_model"]["max_model_len"] == 4096
    )
    assert cfg["model"]["critic_model_path"] == "/m"  # upstream's default


def test_a_prompt_budget_you_set_is_kept(render):
    result, cfg = render(
        "model:\n  model_path: /m\n  max_model_len: 4096\n  max_response_tokens: 1024\n  max_prompt_tokens: 100\n",
        "hardware=a100",
    )
    assert result.code == 0 and cfg["model"]["max_prompt_tokens"] == 100


def test_response_longer_than_context_is_an_error(render):
    result, _ = render("model:\n  model_path: /m\n  max_model_len: 1024\n  max_response_tokens: 1024\n")
    assert (
        result.code == 2
        and "error: run.yaml:4:3: model.max_response_tokens: 1024 leaves no room for a prompt in "
        "model.max_model_len=1024"
        in result.err
    )


@pytest.mark.parametrize(
    "written,want",
    [
        ("  max_model_len: 4096\n", (4096, 2048, 2048)),  # upstream halves the context
        ("  max_model_len: 4096\n  max_prompt_tokens: 1000\n", (4096, 1000, 3096)),
        ("  max_prompt_tokens: 1000\n  max_response_tokens: 500\n", (1500, 1000, 500)),
        ("  max_response_tokens: 500\n", (None, None, 500)),  # nothing to divide
    ],
)
def test_the_token_budget_fills_what_is_unset_as_upstream_does(render, written, want):
    model = render("model:\n  model_path: /m\n" + written, "hardware=a100")[1]["model"]
    assert (model["max_model_len"], model["max_prompt_tokens"], model["max_response_tokens"]) == want


def test_prompt_plus_response_longer_than_the_context_is_an_error(render):
    result, _ = render(
        "model:\n  model_path: /m\n  max_model_len: 1000\n  max_prompt_tokens: 600\n  max_response_tokens: 600\n"
    )
    assert (
        result.code == 2
        and "run.yaml:4:3: model.max_prompt_tokens: 600 + max_response_tokens 600 exceed model.max_model_len=1000"
        in result.err
    )


def test_min_response_tokens_is_lowered_below_the_maximum_with_a_warning(render):
    result, cfg = render(
        "model:\n  model_path: /m\n  max_model_len: 16\n  max_response_tokens: 4\n  min_response_tokens: 4\n",
        "hardware=a100",
    )
    assert cfg["model"]["min_response_tokens"] == 3
    assert (
        "warning: run.yaml:5:3: model.min_response_tokens: 4 is not below model.max_response_tokens=4; using 3"
        in result.err
    )


def test_the_token_budget_per_device_follows_sequence_parallelism(render):
    cfg = render(
        "model:\n  model_path: /m\n  max_model_len: 3000\ntrainer:\n  ulysses_sequence_parallel_size: 4\n",
        "hardware=a100",
    )[1]
    assert cfg["trainer"]["max_token_len_per_gpu"] == 1500  # ceil(2 x 3000 / 4), upstream's rule


def test_enable_thinking_reaches_the_rollout_model(render):
    cfg = render("model:\n  model_path: /m\n  enable_thinking: false\n", "hardware=a100")[1]
    assert cfg["explorer"]["rollout_model"]["enable_thinking"] is False


def test_prompt_settings_reach_the_rollout_model_unless_it_has_its_own(render):
    cfg = render(
        "model:\n  model_path: /m\n  repetition_penalty: 1.2\n  enable_prompt_truncation: false\n", "hardware=a100"
    )[1]
    assert (
        cfg["explorer"]["rollout_model"]["repetition_penalty"],
        cfg["explorer"]["rollout_model"]["enable_prompt_truncation"],
    ) == (1.2, False)
    own = render(
        "model:\n  model_path: /m\n  repetition_penalty: 1.2\nexplorer:\n  rollout_model:\n    repetition_penalty: "
        "1.05\n",
        "hardware=a100",
    )[1]
    assert (
        own["explorer"]["rollout_model"]["repetition_penalty"],
        own["explorer"]["rollout_model"]["enable_prompt_truncation"],
    ) == (1.05, True)


def test_a_repetition_penalty_must_be_positive(render):
    result, _ = render("model:\n  model_path: /m\n  repetition_penalty: 0\n", "hardware=a100")
    assert (
        result.code == 2
        and "error: run.yaml:3:3: model.repetition_penalty: input should be greater than 0 (got 0)\n    allowed: > "
        "0.0\n"
        in result.err
    )


def test_a_response_budget_without_a_context_length_derives_nothing(render):
    result, cfg = render("model:\n  model_path: /m\n  max_response_tokens: 512\n", "hardware=a100")
    assert (
        result.code == 0
        and cfg["model"]["max_prompt_tokens"] is None
        and cfg["explorer"]["rollout_model"]["max_model_len"] is None
    )


def test_a_rollout_model_path_you_set_is_kept(render):
    result, cfg = render("explorer:\n  rollout_model:\n    model_path: /models/served\n", "hardware=a100")
    assert (
        result.code == 0
        and cfg["explorer"]["rollout_model"]["model_path"] == "/models/served"
        and cfg["model"]["model_path"] == "/models/tiny"
    )
