"""Mask values whose key or variable name looks like a credential."""

import re
from typing import Any

MASK = "***"
_WORDS = {
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "AUTHORIZATION",
    "COOKIE",
    "APIKEY",
}
_KEY_PAIRS = {"API", "ACCESS", "PRIVATE", "SECRET", "AUTH", "SIGNING"}


def is_secret_name(name: str) -> bool:
    """HF_TOKEN, WANDB_API_KEY, db_password, AWS_SECRET_ACCESS_KEY: yes; prompt_key, max_token_len_per_gpu: no."""
    words = [w.upper() for w in re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", str(name)) if w]
    if words and words[-1] in _WORDS:  # the name ends in what it holds: a token, not a token count
        return True
    # "KEY" alone is common in config (prompt_key); it marks a secret after API/ACCESS/... or as an env var.
    if words and words[-1] == "KEY":
        return (len(words) > 1 and words[-2] in _KEY_PAIRS) or (str(name).isupper() and len(words) > 1)
    return False


def redact(tree: Any) -> Any:
    """A copy of `tree` with secret-looking values masked."""
    if isinstance(tree, dict):
        return {
            k: (MASK if is_secret_name(k) and v not in (None, "", {}) and not isinstance(v, dict) else redact(v))
            for k, v in tree.items()
        }
    if isinstance(tree, (list, tuple)):  # tuples: dataclasses.asdict keeps them (the launch plan)
        return [redact(item) for item in tree]
    return tree


def mask_override(text: str) -> str:
    """`env.common.HF_TOKEN=hf_x` -> `env.common.HF_TOKEN=***`; other overrides unchanged."""
    key, sep, value = text.partition("=")
    last = key.lstrip("+~").rsplit(".", 1)[-1]
    return f"{key}={MASK}" if sep and value and is_secret_name(last) else text
