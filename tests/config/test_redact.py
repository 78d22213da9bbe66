"""Which names count as credentials."""

import pytest

from trinity.config.redact import MASK, is_secret_name, redact


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "WANDB_API_KEY",
        "db_password",
        "AWS_SECRET_ACCESS_KEY",
        "api_key",
        "MY_KEY",
        "apiKey",
        "authToken",
        "client_secret",
        "Authorization",  # the proxy's records: a request's header, or a field of its body
        "x-api-key",
        "set-cookie",
    ],
)
def test_credential_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "prompt_key",
        "ray_resource_key",
        "messages_key",
        "max_token_len_per_gpu",
        "max_response_tokens",
        "TOKENIZERS_PARALLELISM",
        "HCCL_EXEC_TIMEOUT",
    ],
)
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_redact_masks_values_not_sections():
    tree = {"env": {"common": {"HF_TOKEN": "hf_x", "A": "b"}}, "token": {"nested": 1}, "api_key": None}
    assert redact(tree) == {"env": {"common": {"HF_TOKEN": MASK, "A": "b"}}, "token": {"nested": 1}, "api_key": None}
