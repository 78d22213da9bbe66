"""Where a vLLM engine's memory-sync pieces wait for its workers on a node, and what names its launch's folders.

A piece from Ray's object store is written once per node, as a file its workers map (in shared memory where it has
room, else the temporary folder; vllm_worker.piece_roots); a piece of device buffers goes on as its handles. The
folders of an engine's pieces and adapters are its launch's (`launch_name`), so no other run on the machine shares them.
"""

import os
import re
import shutil
from pathlib import Path
from typing import Any

from .vllm_worker import piece_roots


def launch_name(gcs_address: str, job_id: str) -> str:
    """A run's launch, unique on a machine as a folder name: its Ray job on its cluster. Every new cluster numbers its
    jobs from 01000000 again, so two runs that each started a Ray of their own on one machine share a job id; no two
    clusters on one machine share their GCS's host:port."""
    return f"{re.sub(r'[^A-Za-z0-9.-]', '_', gcs_address)}-{job_id}"


def staged(piece: Any, folder: Path, version: int, index: int) -> str | dict:
    """Where this node's workers find a memory-sync piece: its file's path under the node's piece roots (written here
    once per node: an engine's parts on one node share it; in shared memory where it has room for this piece and the
    last), or the device buffers' handles as they came."""
    if isinstance(piece, dict):
        return piece
    prefix, name = f"v{version}-", f"v{version}-{index}"
    if index == 0:  # what an earlier sync that failed part-way left (not another part's draft of this one)
        for old in (f for root in piece_roots() if (root / folder).is_dir() for f in (root / folder).iterdir()):
            if not old.name.lstrip(".").startswith(prefix):
                old.unlink(missing_ok=True)
    if not any((root / folder / name).exists() for root in piece_roots()):
        _write_once(piece, _root_for(piece.numel() * piece.element_size()) / folder, name)
    return str(folder / name)


def _root_for(size: int) -> Path:
    """Shared memory where it has room for a piece of `size` and the one before it (a container's /dev/shm may hold
    64 MiB), else the temporary folder."""
    shm, tmp = piece_roots()
    return shm if shm.is_dir() and shutil.disk_usage(shm).free >= 2 * size else tmp


def _write_once(piece: Any, folder: Path, name: str) -> None:
    """The piece's bytes as `folder/name`, complete when it appears; another part on this node may link it first."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    draft = folder / f".{name}.{os.getpid()}"
    piece.contiguous().view(-1).view(torch.uint8).numpy().tofile(draft)
    try:
        os.link(draft, folder / name)
    except FileExistsError:
        pass
    finally:
        draft.unlink(missing_ok=True)
