"""The shape of a dense decoder-only model, and its parameter count, from its `config.json` fields.

No weights are read and neither torch nor transformers is imported: the count follows the module
layout of the Hugging Face implementations (transformers 5.x `modeling_llama.py`,
`modeling_mistral.py`, `modeling_qwen2.py`, `modeling_qwen3.py`), and a test compares it with what
transformers builds for the same `config.json`:

    embeddings    vocab x hidden                 (+ the same again for an untied lm_head)
    per layer     q: hidden x q + o: q x hidden, k and v: hidden x kv each   (q = heads x head_dim,
                  kv = kv_heads x head_dim); q/k/v biases (Qwen2 always, Llama/Qwen3 with
                  `attention_bias`, which also gives o a bias); q_norm and k_norm of head_dim (Qwen3)
                  gate, up, down: 3 x hidden x intermediate (+ biases with Llama's `mlp_bias`)
                  two RMSNorms of hidden
    final norm    hidden
"""

from typing import Any, NamedTuple

# model_type -> how its layers differ: True always, False never, a string names the config.json
# flag that switches it on (absent = off, as in the transformers config classes).
ARCHITECTURES: dict[str, dict[str, bool | str]] = {
    "llama": {"qkv_bias": "attention_bias", "o_bias": "attention_bias", "mlp_bias": "mlp_bias", "qk_norm": False},
    "mistral": {"qkv_bias": False, "o_bias": False, "mlp_bias": False, "qk_norm": False},
    "qwen2": {"qkv_bias": True, "o_bias": False, "mlp_bias": False, "qk_norm": False},
    "qwen3": {"qkv_bias": "attention_bias", "o_bias": "attention_bias", "mlp_bias": False, "qk_norm": True},
}
REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


class UnknownShape(ValueError):
    """A config.json the estimate cannot read a dense decoder shape from; the message says why."""


class ModelShape(NamedTuple):
    """What the memory estimate needs to know about a model."""

    model_type: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def layer_params(self) -> int:
        """Parameters of one decoder layer."""
        h, q, kv, inter = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        attention = (
            2 * h * q + 2 * h * kv + (q + 2 * kv) * self.qkv_bias + h * self.o_bias + 2 * self.head_dim * self.qk_norm
        )
        mlp = 3 * h * inter + (2 * inter + h) * self.mlp_bias
        return attention + mlp + 2 * h

    @property
    def root_params(self) -> int:
        """Parameters outside the decoder layers: embeddings, final norm, an untied lm_head."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    @property
    def params(self) -> int:
        """Every parameter, a tied lm_head counted once."""
        return self.root_params + self.layers * self.layer_params


def from_hf_config(data: dict[str, Any]) -> ModelShape:
    """The shape a Hugging Face `config.json` describes; UnknownShape says what is missing or unsupported."""
    kind = data.get("model_type")
    if kind not in ARCHITECTURES:
        known = ", ".join(sorted(ARCHITECTURES))
        raise UnknownShape(f"model_type {kind!r} is not a dense architecture the estimate knows ({known})")
    missing = [key for key in REQUIRED if not isinstance(data.get(key), int)]
    if missing:
        raise UnknownShape(f"config.json has no integer {', '.join(missing)}")
    heads = data["num_attention_heads"]
    flags = {name: _flag(rule, data) for name, rule in ARCHITECTURES[kind].items()}
    return ModelShape(
        model_type=kind,
        layers=data["num_hidden_layers"],
        hidden=data["hidden_size"],
        intermediate=data["intermediate_size"],
        heads=heads,
        kv_heads=data.get("num_key_value_heads") or heads,
        head_dim=data.get("head_dim") or data["hidden_size"] // heads,
        vocab=data["vocab_size"],
        tied=bool(data.get("tie_word_embeddings", False)),
        **flags,
    )


def _flag(rule: bool | str, data: dict[str, Any]) -> bool:
    return bool(data.get(rule, False)) if isinstance(rule, str) else rule
