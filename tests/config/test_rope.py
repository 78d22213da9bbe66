"""RoPE overrides (trinity/config/rope.py): the rope parameters a model runs with under model.rope_scaling and
model.rope_theta, over the model's own, in transformers 5's layout or a config.json's older one."""

import pytest

from trinity.config import rope

QWEN = {"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}  # transformers 5's config.json
LEGACY = {"rope_theta": 10000.0, "rope_scaling": None}  # transformers 4's
YARN = {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32, "rope_theta": 1e6}}


@pytest.mark.parametrize(
    "hf,scaling,theta,want",
    [
        (QWEN, None, None, None),  # nothing overridden: the model's own config, untouched
        (QWEN, None, 5e5, {"rope_type": "default", "rope_theta": 5e5}),
        (LEGACY, None, 5e5, {"rope_type": "default", "rope_theta": 5e5}),
        (
            LEGACY,
            {"rope_type": "linear", "factor": 2.0},
            None,
            {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4},
        ),
        # the older name of the type, as Trinity-RFT's users write it
        (QWEN, {"type": "dynamic", "factor": 2.0}, None, {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e6}),
        # the same type: the model's other parameters stay
        (YARN, {"rope_type": "yarn", "factor": 8.0}, None, {**YARN["rope_parameters"], "factor": 8.0}),
        # another type: the model's parameters of its own type go, its theta stays
        (YARN, {"rope_type": "linear", "factor": 2.0}, 3.0, {"rope_type": "linear", "factor": 2.0, "rope_theta": 3.0}),
        ({}, None, 5e5, {"rope_type": "default", "rope_theta": 5e5}),  # a model config not at hand
    ],
)
def test_the_run_overrides_the_models_rope_parameters(hf, scaling, theta, want):
    assert rope.rope_parameters(hf, scaling, theta) == want


def test_every_rope_type_is_one_transformers_implements():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    assert set(rope.TYPES) - {"default"} <= set(ROPE_INIT_FUNCTIONS)


@pytest.mark.parametrize("kind", sorted(rope.TYPES))
def test_a_rope_scaling_with_its_types_keys_is_one_transformers_validates(kind):
    """What `problem` asks of each type is what transformers' validate_rope needs beyond what the model's config holds
    (its max_position_embeddings, its rope_theta): so a scaling `problem` takes runs, and one it refuses would not."""
    from transformers import Qwen2Config

    values = {"factor": 2.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "short_factor": [1.0] * 4}
    scaling = {"rope_type": kind, **{k: values.get(k, [1.0] * 4) for k in rope.TYPES[kind]}}
    assert rope.problem(scaling) is None
    model = Qwen2Config(max_position_embeddings=2048, hidden_size=64, num_attention_heads=8)
    model.rope_parameters = rope.rope_parameters(model.to_dict(), scaling, None)
    model.validate_rope()  # raises on a missing or wrong key
    for key in rope.TYPES[kind]:
        assert rope.problem({k: v for k, v in scaling.items() if k != key}) == f"a {kind} rope needs {key}"


def test_a_scaling_named_by_the_older_type_key_is_checked_as_its_type():
    assert rope.problem({"type": "linear", "factor": 2.0}) is None
    assert rope.problem({"type": "linear"}) == "a linear rope needs factor"
