"""Device IPC's parts that need no device: the allocator's segments around an export (torch's real settings, which
its CPU build keeps too), and the key each process builds for its device."""

import pytest

torch = pytest.importorskip("torch")

from trinity.runtime.sync import device_ipc  # noqa: E402


@pytest.fixture
def allocator():
    """torch's allocator settings as this process started, restored after the test."""
    before = torch._C._accelerator_getAllocatorSettings()
    yield
    torch._C._accelerator_setAllocatorSettings(before or "expandable_segments:False")


@pytest.mark.parametrize("device_type", ["cuda", "cpu"])  # torch.cuda's call, and torch's own where none is
def test_a_sync_exports_from_ordinary_segments_and_gives_expandable_ones_back(allocator, device_type):
    torch._C._accelerator_setAllocatorSettings("expandable_segments:True")  # the GPU profiles' trainer setting
    restore = device_ipc.ordinary_segments(device_type, "PYTORCH_CUDA_ALLOC_CONF")
    assert torch._C._accelerator_getAllocatorSettings() == "expandable_segments:False"
    restore()
    assert torch._C._accelerator_getAllocatorSettings() == "expandable_segments:True"


def test_segments_that_were_ordinary_stay_so(allocator):
    torch._C._accelerator_setAllocatorSettings("expandable_segments:False")
    device_ipc.ordinary_segments("cuda", "PYTORCH_CUDA_ALLOC_CONF")()
    assert torch._C._accelerator_getAllocatorSettings() == "expandable_segments:False"


def test_the_platforms_own_variable_says_expandable_where_torchs_settings_do_not(allocator, monkeypatch):
    """torch_npu's allocator reads PYTORCH_NPU_ALLOC_CONF, which torch's accelerator settings do not show; where they
    name the setting (CUDA), they say it as it is now."""
    torch._C._accelerator_setAllocatorSettings("max_split_size_mb:512")
    monkeypatch.setenv("PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:512, expandable_segments:True")
    assert device_ipc.expandable_segments("PYTORCH_NPU_ALLOC_CONF")
    assert not device_ipc.expandable_segments(None) and not device_ipc.expandable_segments("PYTORCH_CUDA_ALLOC_CONF")
    torch._C._accelerator_setAllocatorSettings("expandable_segments:False")  # turned off since the start
    assert not device_ipc.expandable_segments("PYTORCH_NPU_ALLOC_CONF")


def test_each_process_keys_its_device_by_its_own_node_and_physical_device(monkeypatch):
    monkeypatch.setenv(device_ipc.NODE_ENV, "node-b")  # what the engine's actor on node b recorded for its workers
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,7")
    assert device_ipc.device_key("CUDA_VISIBLE_DEVICES", 1) == "node-b:7"
    assert device_ipc.device_key(None, 1) == "node-b:1"  # nothing made visible: the index is the device
    assert device_ipc.device_key("CUDA_VISIBLE_DEVICES", 0, node="node-a") == "node-a:6"
