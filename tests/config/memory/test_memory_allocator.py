"""What the trainer's caching allocator keeps after empty_cache, and what a colocated engine finds on the device when it
wakes, by hand."""

from trinity.config.memory.allocator import PAGE, cache_after_empty
from trinity.config.memory.catalog import known_models
from trinity.config.memory.estimate import DEVICE_RUNTIME, MIB
from trinity.config.memory.sync import SyncSetup
from trinity.config.memory.trainer import UPDATE, TrainerSetup, idle_bytes, idle_items, trainer_estimate

QWEN15 = known_models()["Qwen/Qwen2.5-1.5B-Instruct"][0]  # 28 layers
HANDED_BACK = "handed back before the engines wake"


def test_expandable_segments_keep_at_most_two_pages_of_each_freed_range():
    # 28 layers and the root are 29 FSDP units, each unit's gradients one buffer, and the activations: 30 ranges
    cache = cache_after_empty(29, expandable_segments=True)
    assert PAGE == 20 * MIB and cache.bounded and cache.bytes == 2 * 20 * MIB * 30 == 1_258_291_200
    assert cache.label == f"trainer allocator cache after empty_cache ({HANDED_BACK}; 2 x 20 MiB of 30 ranges)"


def test_without_expandable_segments_nothing_but_the_freed_memory_bounds_it():
    cache = cache_after_empty(29, expandable_segments=False)
    assert not cache.bounded and HANDED_BACK in cache.label and "the update's freed memory" in cache.label


def test_what_the_trainer_holds_when_the_engines_wake():
    setup = TrainerSetup(QWEN15, devices=4, tokens=4096, expandable_segments=True)
    labels = [(i.label, i.bytes) for i in idle_items(setup)]
    assert labels == [
        ("trainer between updates (weights and Adam moments and runtime)", 12 * QWEN15.params // 4 + DEVICE_RUNTIME),
        (f"trainer allocator cache after empty_cache ({HANDED_BACK}; 2 x 20 MiB of 30 ranges)", 1_258_291_200),
    ]
    assert idle_items(setup)[0].bytes == idle_bytes(setup)


def test_a_critic_adds_its_units_and_the_classic_allocator_counts_the_whole_update():
    with_critic = TrainerSetup(QWEN15, devices=4, tokens=4096, critic=QWEN15, expandable_segments=True)
    assert idle_items(with_critic)[1].bytes == 2 * PAGE * (29 + 29 + 1)
    classic = with_critic._replace(expandable_segments=False)
    assert idle_items(classic)[1].bytes == trainer_estimate(classic).phases[UPDATE]


def test_a_device_ipc_syncs_buffers_are_gone_when_the_kv_cache_wakes_and_host_memory_has_no_cache():
    """The engines' KV cache wakes after the sync released its buffers (runtime/driver/device_handoff.py): what the
    trainer holds then is what it keeps and its allocator's cache; the buffers count beside the engines' weights
    (tests/config/memory/test_memory_fit.py)."""
    sync = SyncSetup("device_ipc", bucket=256 * MIB, largest=151936 * 1536 * 2, total=3 * 2**30)
    setup = TrainerSetup(QWEN15, devices=1, tokens=4096, expandable_segments=True, sync=sync)
    assert [i.label.split(" (")[0] for i in idle_items(setup)] == [
        "trainer between updates",
        "trainer allocator cache after empty_cache",
    ]
    on_host = setup._replace(device_type="cpu", sync=None)
    assert [i.label for i in idle_items(on_host)] == ["trainer between updates (weights and Adam moments and runtime)"]
