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


ENGINE_LIMITS = ("max_prompt_tokens", "max_response_tokens", "min_response_tokens")
BUDGET = "model:\n  model_path: /m\n  max_model_len: 4096\n  max_response_tokens: 1024\n  min_response_tokens: 8\n"


def test_the_engines_token_limits_are_the_models_unless_the_rollout_model_sets_its_own(render):
    """Trinity-RFT's rollout model overrides: each of explorer.rollout_model's token limits is model.*'s where unset
    (upstream's set_if_none); one it sets is what the engines apply, and the trainer keeps model.*."""
    _, cfg = render(BUDGET, "hardware=a100")
    assert [cfg["explorer"]["rollout_model"][k] for k in ENGINE_LIMITS] == [3072, 1024, 8]
    own = BUDGET + "explorer:\n  rollout_model:\n    max_prompt_tokens: 512\n    min_response_tokens: 0\n"
    _, cfg = render(own, "hardware=a100")
    assert [cfg["explorer"]["rollout_model"][k] for k in ENGINE_LIMITS] == [512, 1024, 0]
    assert [cfg["model"][k] for k in ENGINE_LIMITS] == [3072, 1024, 8]


@pytest.mark.parametrize(
    "rollout,key,message",
    [
        (
            "    max_response_tokens: 8\n",
            "run.yaml:8:5: explorer.rollout_model.max_response_tokens",
            "explorer.rollout_model.min_response_tokens=8 is not below explorer.rollout_model.max_response_tokens=8",
        ),
        (
            "    max_prompt_tokens: 3500\n",
            "run.yaml:8:5: explorer.rollout_model.max_prompt_tokens",
            "a prompt of 3500 and a reply of 1024 tokens exceed the engines' context, "
            "explorer.rollout_model.max_model_len=4096",
        ),
    ],
)
def test_engine_token_limits_that_do_not_fit_together_are_refused_where_written(render, rollout, key, message):
    result, _ = render(BUDGET + "explorer:\n  rollout_model:\n" + rollout, "hardware=a100")
    assert result.code == 2 and f"error: {key}: {message}" in result.err


def test_model_top_k_is_the_engines_default_and_a_note_names_the_tasksets_own_key(render):
    taskset = "buffer:\n  explorer_input:\n    default_workflow_type: math_workflow\n    taskset:\n      path: /d\n"
    result, cfg = render("model:\n  model_path: /m\n  top_k: 20\n" + taskset, "hardware=a100")
    assert cfg["model"]["top_k"] == 20 and cfg["buffer"]["explorer_input"]["taskset"]["rollout_args"]["top_k"] == -1
    assert (
        "note: run.yaml:3:3: model.top_k: 20 is the engines' default for requests outside a workflow (their OpenAI "
        "endpoint's), as in Trinity-RFT; buffer.explorer_input.taskset samples without top-k" in result.err
    )
    own = render(
        "model:\n  model_path: /m\n  top_k: 20\n" + taskset + "      rollout_args: {top_k: 5}\n", "hardware=a100"
    )[0]
    assert own.code == 0 and "model.top_k" not in own.err


@pytest.mark.parametrize(
    "scaling,problem",
    [
        ("{factor: 2.0}", "names no rope type (rope_type)"),
        ("{rope_type: stretchy, factor: 2.0}", "rope_type 'stretchy' is not a rope type transformers knows"),
        ("{rope_type: yarn}", "a yarn rope needs factor"),
        ("{type: llama3, factor: 8.0}", "a llama3 rope needs low_freq_factor, high_freq_factor"),
    ],
)
def test_a_rope_scaling_that_names_no_usable_rope_is_refused_where_written(render, scaling, problem):
    result, _ = render(f"model:\n  model_path: /m\n  rope_scaling: {scaling}\n")
    assert result.code == 2 and f"error: run.yaml:3:3: model.rope_scaling: {problem}" in result.err
    assert "allowed: rope_type: default, linear, dynamic, yarn, longrope, llama3, proportional" in result.err


def test_rope_settings_are_kept_as_written(render):
    result, cfg = render("model:\n  model_path: /m\n  rope_theta: 1.0e6\n  rope_scaling: {type: linear, factor: 2}\n")
    assert result.code == 0
    assert cfg["model"]["rope_theta"] == 1e6 and cfg["model"]["rope_scaling"] == {"type": "linear", "factor": 2}
