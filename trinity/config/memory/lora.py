"""A LoRA adapter's shape: which modules of a dense decoder it adapts, and how many parameters that adds.

peft 0.21 (`tuners/lora/layer.py`) gives an adapted linear of in x out features two matrices,
A (r x in) and B (out x r): r x (in + out) parameters, no bias (`bias: none`, what verl and trinity pass);
an adapted embedding of V rows and h columns has A (r x V) and B (h x r), the same r x (V + h).
A list of target names matches a module whose name ends with `.name` (`tuners/tuners_utils.py`,
`check_target_module_exists`); `all-linear` is every nn.Linear but the output layer
(`_maybe_include_all_linear_layers`), which for the architectures shape.py knows is the seven
projections of each decoder layer. exclude_modules removes names from either.

    per layer   r x (h + q) for q_proj, r x (h + kv) for k_proj and v_proj, r x (q + h) for o_proj,
                r x (h + i) for gate_proj and up_proj, r x (i + h) for down_proj (those adapted)
    once        r x (h + V) for lm_head, r x (V + h) for embed_tokens (only when named)
"""

from typing import NamedTuple

from ..schema.model import ALL_LINEAR, module_names
from .shape import ModelShape

LAYER_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ROOT_MODULES = ("lm_head", "embed_tokens")  # adapted only when named: all-linear leaves the output layer out
ROW_PARALLEL = ("o_proj", "down_proj")  # vLLM shards their input; the others (column-parallel) their output


class Adapter(NamedTuple):
    """A LoRA adapter: its rank and the leaf names of the modules it adapts."""

    rank: int
    modules: tuple[str, ...]


def adapter(rank: int, target_modules: str, exclude_modules: str | None = None) -> Adapter:
    """The adapter that `target_modules` minus `exclude_modules` describe (names the estimate knows, in order)."""
    wanted = module_names(target_modules)
    # as the trainer passes it to peft (runtime/weights/lora.py target_modules): all-linear stands alone
    targets = LAYER_LINEARS if ALL_LINEAR in wanted else wanted
    excluded = set(module_names(exclude_modules))
    known = (*LAYER_LINEARS, *ROOT_MODULES)
    return Adapter(rank, tuple(n for n in known if n in targets and n not in excluded))


def unknown_modules(target_modules: str) -> list[str]:
    """Target names that are none of the modules the estimate counts (it counts nothing for them)."""
    known = {ALL_LINEAR, *LAYER_LINEARS, *ROOT_MODULES}
    return [n for n in module_names(target_modules) if n not in known]


def linear_features(shape: ModelShape) -> dict[str, tuple[int, int]]:
    """(in, out) features of each linear of one decoder layer."""
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }


def layer_adapter_params(shape: ModelShape, lora: Adapter) -> int:
    """The adapter's parameters in one decoder layer."""
    features = linear_features(shape)
    return sum(lora.rank * sum(features[m]) for m in lora.modules if m in features)


def root_adapter_params(shape: ModelShape, lora: Adapter) -> int:
    """The adapter's parameters outside the decoder layers (an adapted lm_head or embed_tokens)."""
    return sum(lora.rank * (shape.hidden + shape.vocab) for m in lora.modules if m in ROOT_MODULES)


def adapter_params(shape: ModelShape, lora: Adapter) -> int:
    """Pa: every parameter the adapter adds to the model."""
    return root_adapter_params(shape, lora) + shape.layers * layer_adapter_params(shape, lora)
