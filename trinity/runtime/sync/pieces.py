"""Cutting the weights into pieces: consecutive tensors of one dtype, up to synchronizer.sync_bucket_mib together.

A piece is what a sync moves at once: one broadcast of a collective, one object or one device buffer of a memory
sync. Sender and receivers cut the same pieces from the same list of shapes and dtypes (the trainer's weight specs),
so only the tensors' bytes travel, flattened into one buffer per piece. A tensor larger than the bound is a piece of
its own. Nothing here imports torch at module level: the driver plans pieces without it.
"""

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
MIB = 2**20
DTYPE_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "int64": 8, "int32": 4, "uint8": 1, "int8": 1}


def cut(items: Iterable[T], kind: Callable[[T], tuple[Any, int]], limit: int) -> Iterator[list[T]]:
    """Consecutive items of one dtype up to `limit` bytes together (a larger one alone); `kind` gives an item's
    (dtype, bytes)."""
    piece: list[T] = []
    dtype, size = None, 0
    for item in items:
        item_dtype, item_size = kind(item)
        if piece and (item_dtype != dtype or size + item_size > limit):
            yield piece
            piece, size = [], 0
        piece.append(item)
        dtype, size = item_dtype, size + item_size
    if piece:
        yield piece


def plan(specs: Sequence[Any], limit: int) -> list[list[Any]]:
    """The pieces of `specs` (WeightSpec, or [name, shape, dtype] lists), in order."""
    return list(cut(specs, lambda s: (_dtype(s), math.prod(_shape(s)) * DTYPE_BYTES[_dtype(s)]), limit))


def tensors(tensors: Iterable[Any], limit: int) -> Iterator[list[Any]]:
    """Tensors cut as `plan` cuts their specs."""
    return cut(tensors, lambda t: (t.dtype, t.numel() * t.element_size()), limit)


def flatten(piece: list[Any], device: Any = None, dtype: Any = None) -> Any:
    """One piece's tensors as one flat buffer (on `device`, in `dtype`; default: theirs), filled in place: one copy,
    no intermediate per tensor."""
    import torch

    total = sum(t.numel() for t in piece)
    flat = torch.empty(total, dtype=dtype or piece[0].dtype, device=device or piece[0].device)
    return _fill(flat, piece)


def filled(specs: Sequence[Any], tensors: Iterable[Any], device: Any) -> Any:
    """The flat buffer of one piece planned by `specs` (WeightSpec, or [name, shape, dtype] lists) on `device`, in
    their dtype, allocated first and then filled from `tensors` as they come: each is cast as it is copied in and
    dropped after, so the piece and one tensor are all it holds at once."""
    import torch

    total = sum(math.prod(_shape(s)) for s in specs)
    return _fill(torch.empty(total, dtype=getattr(torch, _dtype(specs[0])), device=device), tensors)


def _fill(flat: Any, tensors: Iterable[Any]) -> Any:
    import torch

    offset = 0
    with torch.no_grad():
        for tensor in tensors:
            flat[offset : offset + tensor.numel()].copy_(tensor.reshape(-1))
            offset += tensor.numel()
            del tensor
    if offset != flat.numel():
        raise ValueError(f"a piece of {flat.numel()} values was given {offset}")
    return flat


def split(flat: Any, shapes: Sequence[Sequence[int]]) -> list[Any]:
    """A flat buffer back into tensors of `shapes` (views of it)."""
    sizes = [math.prod(shape) for shape in shapes]
    return [part.view(tuple(shape)) for part, shape in zip(flat.split(sizes), shapes)]


def _shape(spec: Any) -> Sequence[int]:
    return spec.shape if hasattr(spec, "shape") else spec[1]


def _dtype(spec: Any) -> str:
    return spec.dtype if hasattr(spec, "dtype") else spec[2]
