"""What a weight sync holds at once in the trainer and in an engine, by channel, by hand; and the sync a resolved
config describes."""

import pytest

from tests.conftest import REFERENCE
from trinity.config.compose import Request
from trinity.config.memory.catalog import known_models
from trinity.config.memory.checks import sync_setup
from trinity.config.memory.estimate import MIB
from trinity.config.memory.sync import SYNC, SyncSetup, engine_sync_items, trainer_sync_items
from trinity.config.resolve import resolve

QWEN05 = known_models()["Qwen/Qwen2.5-0.5B-Instruct"][0]  # V=151936, h=896, tied
EMBEDDING = 151936 * 896 * 4  # fp32: 519 MiB, larger than a 256 MiB bucket
BUCKET = 256 * MIB
WEIGHTS = (QWEN05.params + 151936 * 896) * 4  # the tied lm_head is sent under both names
pytestmark = pytest.mark.usefixtures("local_gsm8k")  # the reference config reads its data from local disk


def sync(channel: str) -> SyncSetup:
    return SyncSetup(channel, BUCKET, EMBEDDING, WEIGHTS)


def test_the_largest_piece_and_the_one_after_it():
    assert sync("process_group").piece == EMBEDDING and sync("process_group").in_flight == EMBEDDING + BUCKET
    small = SyncSetup("process_group", BUCKET, largest=10 * MIB, total=100 * MIB)  # an adapter: less than a bucket
    assert small.piece == small.in_flight == 100 * MIB


def test_a_collective_holds_two_pieces_in_the_engine_on_any_device():
    for host in (False, True):
        (item,) = engine_sync_items(sync("process_group"), host)
        assert item.bytes == EMBEDDING + BUCKET == 812_974_080 and item.phase == SYNC
        assert trainer_sync_items(sync("process_group"), host)[0].bytes == 2 * EMBEDDING


def test_the_object_store_stays_in_host_memory_on_an_accelerator():
    assert engine_sync_items(sync("object_store"), host=False) == []
    assert trainer_sync_items(sync("object_store"), host=False) == []


def test_on_the_host_the_store_pages_stay_mapped_and_ray_rebuilds_each_piece():
    pages, rebuilt = engine_sync_items(sync("object_store"), host=True)
    assert (pages.bytes, pages.phase) == (EMBEDDING + BUCKET, "")  # held from the first sync on
    assert (rebuilt.bytes, rebuilt.phase) == (2 * EMBEDDING, SYNC)
    assert [i.bytes for i in trainer_sync_items(sync("object_store"), host=True)] == [EMBEDDING + BUCKET, 2 * EMBEDDING]


def test_device_ipc_and_files():
    assert engine_sync_items(sync("device_ipc"), host=False) == []  # the engine maps the trainer's buffer
    exported = SyncSetup("device_ipc", BUCKET, EMBEDDING // 2, WEIGHTS // 2, gathered=EMBEDDING)  # bf16 from fp32
    buffers, gathered = trainer_sync_items(exported, host=False)
    # the piece's buffer (the bf16 embedding, larger than a bucket) and the one before it the engine may still map;
    # one weight as FSDP gathers it, in fp32: nothing of the piece is held twice, in no rank's fp32
    assert (buffers.bytes, gathered.bytes) == (EMBEDDING, EMBEDDING) and {buffers.phase, gathered.phase} == {SYNC}
    assert engine_sync_items(sync("files"), host=False) == [] and trainer_sync_items(sync("files"), False) == []
    assert engine_sync_items(sync("files"), host=True)[0].bytes == EMBEDDING
    assert trainer_sync_items(sync("files"), host=True)[0].bytes == WEIGHTS


def config(*overrides: str):
    model = ("model.model_path=Qwen/Qwen2.5-0.5B-Instruct", "explorer.rollout_model.dtype=float32")
    return resolve(Request(REFERENCE, ("hardware=cpu", *model, *overrides))).config


def test_the_resolved_config_says_what_a_sync_moves_and_how():
    both = config("explorer.rollout_model.engine_num=1", "cluster.gpu_per_node=2")
    assert sync_setup(both, QWEN05) == SyncSetup("process_group", BUCKET, EMBEDDING, WEIGHTS, EMBEDDING)
    colocated = config("mode=colocate", "explorer.rollout_model.engine_num=1", "cluster.gpu_per_node=1")
    assert sync_setup(colocated, QWEN05).channel == "object_store"  # the cpu platform maps no device memory
    assert sync_setup(config("mode=train"), QWEN05) is None  # no engines of its own to sync
    smaller = config("synchronizer.sync_bucket_mib=64", "explorer.rollout_model.dtype=bfloat16")
    assert sync_setup(smaller, QWEN05) == SyncSetup("process_group", 64 * MIB, EMBEDDING // 2, WEIGHTS // 2, EMBEDDING)


def test_an_adapter_sync_moves_the_adapters_matrices_only():
    lora = config("model.lora_configs=[{lora_rank: 16}]", "explorer.rollout_model.dtype=bfloat16")
    moved = sync_setup(lora, QWEN05)
    adapter = 24 * 16 * (2 * (896 + 896) + 2 * (896 + 128) + 3 * (896 + 4864))  # all-linear, rank 16
    assert moved[:4] == ("process_group", BUCKET, 16 * 4864 * 2, adapter * 2)  # the widest: gate, up, down
    assert moved.piece == moved.in_flight == adapter * 2  # under one bucket: one piece
