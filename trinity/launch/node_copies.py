"""Every node of the cluster holds the folders the driver fetched, at the same path, before any role starts.

Roles read a fetched model or data set at the folder the driver's config names (a snapshot in the driver's hub cache).
Each live node is asked, by a small Ray task pinned to it, which of those files it lacks at that path (a shared cache,
or a node that holds the same commit already, lacks none), and the driver sends it the files it lacks through Ray's
object store, in chunks; the node writes each under a temporary name and renames it whole, so a role never reads half
a file. No node talks to the hub: the driver fetched once, and every node gets that same commit.
"""

import os
import sys
import uuid
from pathlib import Path

CHUNK_BYTES = 64 << 20  # what one object in the object store carries of a file
Manifest = list[tuple[str, int]]  # (path relative to the folder, size in bytes) of each file


def manifest(folder: Path) -> Manifest:
    """The files of `folder` (symlinks into the cache's blobs followed), with their sizes."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            found.append((path.relative_to(folder).as_posix(), path.stat().st_size))
    return found


def missing(folder: str, files: Manifest) -> Manifest:
    """The files of `files` that are not at `folder` on this node with their size (run on the node)."""
    base = Path(folder)
    return [(name, size) for name, size in files if not _has(base / name, size)]


def _has(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


def receive(folder: str, name: str, chunks: list) -> int:
    """Write one file from its chunks (object refs, fetched one at a time) under a temporary name, then rename it
    into place (run on the node). Returns the bytes written."""
    import ray

    target = Path(folder) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.partial")
    written = 0
    try:
        with partial.open("wb") as out:
            for ref in chunks:
                data = ray.get(ref)
                out.write(data)
                written += len(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return written


def spread(folders: list[Path], quiet: bool = False, timeout_s: float = 600.0) -> dict[str, int]:
    """Make every live node hold each of `folders` at its path; returns {node id: bytes sent to it}."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if not folders:
        return {}
    wanted = {str(folder): manifest(folder) for folder in folders}
    here = ray.get_runtime_context().get_node_id()  # the driver's node fetched them: they are there
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["NodeID"] != here]
    check, write = ray.remote(num_cpus=0)(missing), ray.remote(num_cpus=0)(receive)
    sent: dict[str, int] = {}
    for node in nodes:
        on_node = check.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        lacking = {f: ray.get(on_node.remote(f, files), timeout=timeout_s) for f, files in wanted.items()}
        total = sum(size for files in lacking.values() for _, size in files)
        if not total and not any(lacking.values()):
            continue
        if not quiet:
            print(f"copying {total / 2**20:.1f} MiB of fetched files to node {node[:8]}", file=sys.stderr)
        to_node = write.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        sent[node] = sum(send(to_node, folder, files, Path(folder), timeout_s) for folder, files in lacking.items())
    return sent


def send(to_node, folder: str, files: Manifest, source: Path, timeout_s: float) -> int:
    """Send each of `files` of the local folder `source` to `folder` on the node `to_node` writes on."""
    import ray

    written = 0
    for name, _ in files:
        chunks = []
        with (source / name).open("rb") as handle:
            while data := handle.read(CHUNK_BYTES):
                chunks.append(ray.put(data))
        written += ray.get(to_node.remote(folder, name, chunks), timeout=timeout_s)
        del chunks  # the object store lets the chunks go once the node has written them
    return written
