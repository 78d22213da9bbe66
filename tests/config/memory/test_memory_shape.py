"""Model shapes: our parameter count against what transformers builds (torch on CPU, in a worker), and the shipped
table."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cpu_torch import torch_cpu  # noqa: F401 (fixture)
from trinity.config.memory.catalog import FoundShape, NoShape, find_shape, known_models, table_rows
from trinity.config.memory.shape import ARCHITECTURES, from_hf_config

TINY = dict(
    hidden_size=64,
    intermediate_size=176,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=512,
)
VARIANTS = {
    "qwen2 untied": dict(model_type="qwen2", tie_word_embeddings=False),
    "qwen2 tied": dict(model_type="qwen2", tie_word_embeddings=True),
    "qwen3 head_dim 32": dict(model_type="qwen3", head_dim=32, tie_word_embeddings=True),
    "qwen3 attention_bias": dict(model_type="qwen3", head_dim=16, attention_bias=True),
    "llama biases": dict(model_type="llama", attention_bias=True, mlp_bias=True),
    "llama plain, no kv heads given": dict(model_type="llama", num_key_value_heads=None),
    "mistral": dict(model_type="mistral", head_dim=8),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_parameter_count_matches_transformers_for_a_local_config_json(variant, cli, tmp_path, torch_cpu):
    config = {k: v for k, v in {**TINY, **VARIANTS[variant]}.items() if v is not None}
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    expected = torch_cpu.ask("count", config=config)
    result = cli("plan", "memory", f"model.model_path={folder}", "hardware=a100", "--format", "json")
    assert result.code == 0, result.err
    (model,) = result.json()["plans"][0]["models"]
    assert model["parameters"] == expected and model["source"] == str(folder / "config.json")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(ARCHITECTURES)),
    layers=st.integers(1, 3),
    kv_heads=st.sampled_from([1, 2, 4]),
    group=st.sampled_from([1, 2]),
    head_dim=st.sampled_from([8, 16]),
    hidden=st.sampled_from([32, 48, 64]),
    intermediate=st.integers(16, 200),
    vocab=st.integers(16, 300),
    tied=st.booleans(),
    bias=st.booleans(),
)
def test_parameter_count_matches_transformers_for_any_small_shape(
    torch_cpu, kind, layers, kv_heads, group, head_dim, hidden, intermediate, vocab, tied, bias
):
    config = dict(
        model_type=kind,
        num_hidden_layers=layers,
        num_attention_heads=kv_heads * group,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        hidden_size=hidden,
        intermediate_size=intermediate,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        attention_bias=bias,
        mlp_bias=bias,
    )
    assert from_hf_config(config).params == torch_cpu.ask("count", config=config)


@pytest.mark.parametrize("row", table_rows(), ids=lambda row: row["hub_ids"].split()[0])
def test_each_table_row_matches_its_model_card(row):
    """The count from the copied shape agrees with the card's count (rounded to the digits it shows, and cards
    round loosely: Qwen2.5-32B's says 32.5B for 32.76B): a mistyped layer count or width shows."""
    shape, source = known_models()[row["hub_ids"].split()[0]]
    written = row["published"].rstrip("B")
    published = float(written) * 1e9
    rounding = 0.5 * 10 ** -len(written.partition(".")[2]) * 1e9
    assert abs(shape.params - published) <= rounding + 0.01 * published, (shape.params, row["published"])
    assert source.startswith("https://huggingface.co/") and source.endswith("/config.json")


def test_table_ids_are_unique_and_cover_the_families_asked_for():
    ids = [hub_id for row in table_rows() for hub_id in row["hub_ids"].split()]
    assert len(ids) == len(set(ids)) == len(known_models())
    for family in (
        "Qwen/Qwen2.5-0.5B",
        "Qwen/Qwen2.5-72B",
        "Qwen/Qwen3-0.6B",
        "Qwen/Qwen3-32B",
        "meta-llama/Llama-3.2-1B",
        "meta-llama/Llama-3.1-70B",
    ):
        assert family in ids


def test_qwen25_7b_by_hand():
    shape = known_models()["Qwen/Qwen2.5-7B-Instruct"][0]
    # q and o 3584x3584, k and v 3584x512, biases on q/k/v, MLP 3x3584x18944, two norms
    assert (
        shape.layer_params
        == 2 * 3584 * 3584 + 2 * 3584 * 512 + (3584 + 2 * 512) + 3 * 3584 * 18944 + 2 * 3584
        == 233_057_792
    )
    assert shape.params == 2 * 152064 * 3584 + 3584 + 28 * 233_057_792 == 7_615_616_512


def test_local_folder_wins_and_broken_ones_say_why(tmp_path):
    folder = tmp_path / "Qwen" / "Qwen2.5-7B-Instruct"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({**TINY, "model_type": "qwen2"}))
    found = find_shape(str(folder))
    assert isinstance(found, FoundShape) and found.shape.hidden == 64
    (folder / "config.json").write_text(json.dumps({**TINY, "model_type": "qwen3_moe"}))
    unknown = find_shape(str(folder))
    assert (
        isinstance(unknown, NoShape)
        and "model_type 'qwen3_moe' is not a dense architecture the estimate knows (llama, mistral, qwen2, qwen3)"
        in unknown.reason
    )
    (folder / "config.json").write_text("{not json")
    assert "cannot read it" in find_shape(str(folder)).reason
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    assert (
        "config.json has no integer intermediate_size, num_hidden_layers, num_attention_heads, vocab_size"
        in find_shape(str(folder)).reason
    )
