"""RoPE overrides (model.rope_scaling, model.rope_theta): what a rope type needs, and the model config they give.

Trinity-RFT hands them to vLLM as `hf_overrides={"rope_parameters": ...}` (common/models/vllm_model.py) and, in its
legacy verl trainer, sets them on the actor's and the critic's Hugging Face config (verl_legacy/fsdp_workers.py). Here
the trainer and the engines read one dict, `rope_parameters(...)`: the model's own rope parameters (transformers 5's
`rope_parameters`, or a config.json's older `rope_scaling` and `rope_theta`) with the run's over them, so that both
sides compute the same positions (runtime/weights/model_config.py applies it).
"""

from typing import Any

TYPE = "rope_type"
LEGACY_TYPE = "type"  # the name older config files (and Trinity-RFT's examples) give the rope type
THETA = "rope_theta"
# rope type (transformers' modeling_rope_utils) -> the keys a rope_scaling naming it must give; what a model's own
# config may hold (original_max_position_embeddings, rope_theta) is left to it
TYPES: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor",),
    "longrope": ("short_factor", "long_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
    "proportional": (),
}
# rope types that scale from the length the model was pre-trained for: transformers' standardize_rope_params takes it
# from the model's config where the parameters name none (a config's own, else its max_position_embeddings)
PRETRAINED_LENGTH = ("llama3", "yarn", "longrope")
LENGTH = "original_max_position_embeddings"


def rope_type(scaling: dict[str, Any]) -> Any:
    """The rope type a rope_scaling names (`rope_type`, or the older `type`); None when it names none."""
    return scaling.get(TYPE, scaling.get(LEGACY_TYPE))


def problem(scaling: dict[str, Any]) -> str | None:
    """Why a model.rope_scaling cannot configure a rope, or None."""
    kind = rope_type(scaling)
    if kind is None:
        return f"names no rope type ({TYPE})"
    if kind not in TYPES:
        return f"{TYPE} {kind!r} is not a rope type transformers knows"
    missing = [key for key in TYPES[kind] if key not in scaling]
    if missing:
        return f"a {kind} rope needs {', '.join(missing)}"
    return None


def model_rope(hf: dict[str, Any]) -> dict[str, Any]:
    """A model config's rope parameters (config.json's dict): transformers 5's `rope_parameters`, else the older
    `rope_scaling` with the top-level `rope_theta`."""
    if hf.get("rope_parameters"):
        return _typed(hf["rope_parameters"])
    theta = {THETA: hf[THETA]} if hf.get(THETA) is not None else {}
    return _typed(hf.get("rope_scaling") or {}) | theta


def rope_parameters(hf: dict[str, Any], scaling: dict[str, Any] | None, theta: float | None) -> dict[str, Any] | None:
    """The rope parameters a model with config `hf` runs with under the run's rope_scaling and rope_theta; None when
    the run overrides neither. A rope_scaling of another type than the model's replaces the model's (its theta kept)."""
    if scaling is None and theta is None:
        return None
    own, given = model_rope(hf), _typed(scaling or {})
    if TYPE in given and given[TYPE] != own.get(TYPE):
        own = {THETA: own[THETA]} if THETA in own else {}
    merged = own | given | ({THETA: theta} if theta is not None else {})
    merged.setdefault(TYPE, "default")
    length = hf.get(LENGTH, hf.get("max_position_embeddings"))
    if merged[TYPE] in PRETRAINED_LENGTH and length is not None:
        merged.setdefault(LENGTH, length)  # as transformers completes them when it reads a config
    return merged


def _typed(scaling: dict[str, Any]) -> dict[str, Any]:
    """`scaling` with its rope type under `rope_type` (the older `type` renamed)."""
    out = {k: v for k, v in scaling.items() if k != LEGACY_TYPE}
    if LEGACY_TYPE in scaling and TYPE not in scaling:
        out[TYPE] = scaling[LEGACY_TYPE]
    return out
