"""A model folder's module names, read from its safetensors headers (the tensors' names and shapes), no weights
loaded and no torch imported: what LoRA's target_modules are checked against."""

import json
import struct
from dataclasses import dataclass
from pathlib import Path

HEADER_LIMIT = 100 * 2**20  # a safetensors header this large is not one
OUTPUT_HEADS = ("lm_head", "embed_out", "output")  # peft's all-linear leaves the output layer out


@dataclass(frozen=True)
class Modules:
    """The leaf names of a model's modules: those holding a matrix (linear layers and embeddings), and all."""

    linear: frozenset[str]  # what a LoRA adapter can adapt: 2-D weights, embeddings and the output head left out
    every: frozenset[str]


def read(folder: Path) -> Modules | None:
    """The module names of the model in `folder`; None when it has no safetensors weights to read them from."""
    shapes = _shapes(folder)
    if not shapes:
        return None
    linear, every = set(), set()
    for name, shape in shapes.items():
        module, _, _ = name.rpartition(".")
        leaf = module.rpartition(".")[2]
        every.add(leaf)
        if name.endswith(".weight") and len(shape) == 2 and "embed" not in leaf and leaf not in OUTPUT_HEADS:
            linear.add(leaf)
    return Modules(frozenset(linear), frozenset(every))


def _shapes(folder: Path) -> dict[str, list[int]]:
    """name -> shape of every tensor in the folder's safetensors files."""
    files = sorted(folder.glob("*.safetensors"))
    shapes: dict[str, list[int]] = {}
    for file in files:
        shapes.update(_header(file))
    return shapes


def _header(file: Path) -> dict[str, list[int]]:
    try:
        with open(file, "rb") as stream:
            (length,) = struct.unpack("<Q", stream.read(8))
            if length > HEADER_LIMIT:
                return {}
            header = json.loads(stream.read(length))
    except (OSError, struct.error, ValueError):
        return {}
    return {name: entry["shape"] for name, entry in header.items() if name != "__metadata__"}
