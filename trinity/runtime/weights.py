"""Weights on disk: one safetensors file in the Hugging Face layout."""

from pathlib import Path


def save_safetensors(weights: dict, path: Path) -> None:
    """Write name -> tensor; tied tensors (embeddings and lm_head) are stored once, as Hugging Face does."""
    from safetensors.torch import save_file

    seen, unique = set(), {}
    for name, tensor in weights.items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            unique[name] = tensor
    save_file(unique, str(path), metadata={"format": "pt"})
