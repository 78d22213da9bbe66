"""Every node holds what the driver fetched: each node says what it lacks, the driver sends only that through Ray's
object store, and a file lands whole or not at all. On this machine every node shares one disk, so the copy itself is
sent to another folder of the second node: the same tasks, with the destination made different."""

import os

import pytest

from tests.conftest import ray_cluster
from trinity.launch import node_copies
from trinity.launch.node_copies import manifest, missing


def snapshot(folder):
    """A snapshot folder as huggingface_hub lays one out: symlinks into blobs, one file in a subfolder, one empty."""
    blobs = folder.parent / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    (blobs / "a").write_bytes(os.urandom(3000))
    (blobs / "b").write_bytes(b"")
    (folder / "sub").mkdir(parents=True)
    (folder / "weights.bin").symlink_to(blobs / "a")
    (folder / "empty.txt").symlink_to(blobs / "b")
    (folder / "sub" / "config.json").write_text("{}")
    return folder


def test_a_node_lacks_the_files_missing_or_of_another_size(tmp_path):
    folder = snapshot(tmp_path / "snap")
    files = manifest(folder)
    assert files == [("empty.txt", 0), ("sub/config.json", 2), ("weights.bin", 3000)]
    assert missing(str(folder), files) == []
    (folder / "sub" / "config.json").write_text("{ }")
    assert missing(str(folder), files) == [("sub/config.json", 2)]
    assert missing(str(tmp_path / "elsewhere"), files) == files


@pytest.mark.ray
def test_the_driver_sends_a_node_what_it_lacks_and_nothing_else(tmp_path, monkeypatch):
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    monkeypatch.setattr(node_copies, "CHUNK_BYTES", 1024)  # a file in several chunks
    folder = snapshot(tmp_path / "snap")
    with ray_cluster({"num_cpus": 1}, {"num_cpus": 1}) as cluster:
        ray.init(address=cluster.address)
        try:
            assert node_copies.spread([folder], quiet=True) == {}  # one disk: the other node lacks nothing
            here = ray.get_runtime_context().get_node_id()
            [other] = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeID"] != here]
            to_node = ray.remote(num_cpus=0)(node_copies.receive).options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(other, soft=False)
            )
            target = tmp_path / "on-the-other-node"
            sent = node_copies.send(to_node, str(target), manifest(folder), folder, timeout_s=60)
        finally:
            ray.shutdown()
    assert sent == 3002
    assert manifest(target) == manifest(folder)
    assert (target / "weights.bin").read_bytes() == (folder / "weights.bin").read_bytes()
    assert not [p for p in target.rglob("*") if p.name.endswith(".partial")]
