"""Weights on disk and in flight: safetensors in the Hugging Face layout."""

from pathlib import Path


def save_safetensors(weights: dict, path: Path) -> None:
    """Write name -> tensor; tied tensors (embeddings and lm_head) are stored once, as Hugging Face does."""
    from safetensors.torch import save_file

    save_file(_unique(weights), str(path), metadata={"format": "pt"})


def safetensors_bytes(weights: dict) -> bytes:
    """name -> tensor as safetensors bytes: what crosses a process boundary that mangles tensors (vLLM's
    collective_rpc)."""
    from safetensors.torch import save

    return save(_unique(weights))


def _unique(weights: dict) -> dict:
    seen, unique = set(), {}
    for name, tensor in weights.items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            unique[name] = tensor
    return unique
