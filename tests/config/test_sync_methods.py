"""The weight-sync methods table: what each method becomes in each mode, and the channel its weights take."""

import pytest

from trinity.config import modes, sync_methods


@pytest.mark.parametrize("mode", list(modes.MODES))
@pytest.mark.parametrize("name", list(sync_methods.METHODS))
def test_a_method_becomes_one_that_can_run_in_the_mode(mode, name):
    """A collective only where explorer and trainer run side by side on devices of their own; memory only where
    trainer and engines are in one run; files anywhere. What a method becomes is a fixed point (it stays itself)."""
    entry, asked = modes.mode(mode), sync_methods.method(name)
    became = asked.in_mode(entry)
    assert not became.collective or entry.splits_devices
    assert not became.needs_run_with_engines or entry.syncs
    assert became.in_mode(entry) is became
    runs_as_asked = (not asked.collective or entry.splits_devices) and (not asked.needs_run_with_engines or entry.syncs)
    assert (became is asked) is runs_as_asked  # what can run is never replaced


def test_a_collective_in_colocate_is_memory_and_anywhere_else_apart_is_files():
    colocate, train = modes.mode("colocate"), modes.mode("train")
    assert sync_methods.method("nccl").in_mode(colocate).name == "memory"
    assert sync_methods.method("hccl").in_mode(train).name == "checkpoint"
    assert sync_methods.method("memory").in_mode(train).name == "checkpoint"
    assert sync_methods.method("gloo").in_mode(modes.mode("both")).name == "gloo"


@pytest.mark.parametrize("ipc", [True, False])
def test_memory_maps_device_memory_only_where_the_roles_share_devices_that_have_it(ipc):
    memory = sync_methods.method("memory")
    assert sync_methods.channel(memory, modes.mode("colocate"), ipc) == ("device_ipc" if ipc else "object_store")
    assert sync_methods.channel(memory, modes.mode("both"), ipc) == "object_store"  # another device: host memory
    assert sync_methods.channel(sync_methods.method("gloo"), modes.mode("both"), ipc) == "process_group"


def test_every_channel_has_a_mover_and_every_method_a_channel():
    from trinity.runtime.sync.synchronizer import MOVERS

    assert set(MOVERS) == set(sync_methods.CHANNELS)
    assert {m.channel for m in sync_methods.METHODS.values()} <= set(sync_methods.CHANNELS)


def test_an_unknown_method_names_the_methods_there_are():
    with pytest.raises(
        ValueError, match=r"unknown sync method 'rdma' \(methods: nccl, hccl, gloo, checkpoint, memory\)"
    ):
        sync_methods.method("rdma")
