"""Weights on disk: safetensors in the Hugging Face layout (checkpoints, a checkpoint sync's file, published
weights)."""

from pathlib import Path


def save_safetensors(weights: dict, path: Path) -> None:
    """Write name -> tensor; tied tensors (embeddings and lm_head) are stored once, as Hugging Face does."""
    from safetensors.torch import save_file

    save_file(_unique(weights), str(path), metadata={"format": "pt"})


def _unique(weights: dict) -> dict:
    seen, unique = set(), {}
    for name, tensor in weights.items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            unique[name] = tensor
    return unique
