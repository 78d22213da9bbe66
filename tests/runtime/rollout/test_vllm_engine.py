"""The vLLM engine actor through its interface, with fakes of vLLM's AsyncLLM for what vLLM's CPU build
cannot run here (GPU/NPU arguments, tensor-parallel workers, headless parts, sleep mode): what it hands
vLLM, requests and weight updates that never overlap, what crosses collective_rpc, checkpoint and
memory loads into every worker of a TP engine, sleep and wake-up. tests/runtime/rollout/test_vllm_real.py runs
the engine on the real vLLM."""

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import REFERENCE  # noqa: E402
from tests.fakes_vllm import FakeAsyncLLM, fake_vllm_api  # noqa: E402
from tests.runtime.syncs import memory_sync, specs_of  # noqa: E402
from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.runtime.rollout import (  # noqa: E402
    engine_class,
    vllm_args,
    vllm_engine,
    vllm_fields,
    vllm_parts,
    vllm_staging,
    vllm_worker,
)
from trinity.runtime.rollout.samples import Sampling  # noqa: E402
from trinity.runtime.rollout.vllm_engine import VllmEngine  # noqa: E402
from trinity.runtime.sync import device_ipc  # noqa: E402


def config(profile="a100", *extra):
    return resolve(Request(REFERENCE, (f"hardware={profile}", *extra))).config


def engine(cfg, slot=0, name="rollout.engine0"):
    return VllmEngine(name=name, role="rollout", config=cfg, index=slot)


@pytest.fixture(autouse=True)
def fake_vllm(monkeypatch, tmp_path):
    FakeAsyncLLM.instances.clear()
    monkeypatch.setattr(vllm_engine, "vllm_api", fake_vllm_api)
    # no Ray here: "this node" has its id, its piece roots (shared memory, the temporary folder) in tmp_path
    roots = (tmp_path / "shm", tmp_path / "tmp")
    roots[0].mkdir()
    monkeypatch.setattr(vllm_worker, "piece_roots", lambda: roots)
    monkeypatch.setattr(vllm_engine, "piece_roots", lambda: roots)
    monkeypatch.setattr(vllm_staging, "piece_roots", lambda: roots)
    # the engine's actor records its Ray node for its vLLM workers, which build their device keys from it
    monkeypatch.setattr(vllm_parts, "announce_node", lambda: monkeypatch.setenv(device_ipc.NODE_ENV, "node-a"))
    monkeypatch.setattr(VllmEngine, "_pieces_folder", lambda self: Path("pieces") / self.name.split(".part")[0])


def started(cfg, slot=0, version=3):
    e = engine(cfg, slot)
    asyncio.run(e.setup("/models/m", version))
    return e


def test_engine_type_vllm_is_this_class():
    assert engine_class("vllm") is VllmEngine


@pytest.mark.parametrize("profile", ["a100", "ascend910b"])
def test_vllm_gets_the_arguments_of_the_resolved_config(profile):
    cfg = config(profile, "explorer.rollout_model.tensor_parallel_size=2", "explorer.rollout_model.engine_num=2")
    e = started(cfg, slot=1)
    given = e.llm.args
    assert given == vllm_args.engine_kwargs(cfg, "/models/m", vllm_args.topology(cfg, 1))
    assert vllm_fields.snapshot().problems(given) == []
    assert (given["tensor_parallel_size"], given["distributed_executor_backend"], given["seed"]) == (2, "mp", 43)
    assert given["gpu_memory_utilization"] == 0.7 and given["enforce_eager"] is True and given["max_model_len"] == 2048


def test_generate_returns_samples_with_the_sampled_tokens_logprobs():
    e = started(config())
    version, samples = asyncio.run(
        e.generate([1, 2, 3], 2, Sampling(temperature=0.7, top_k=-1, max_tokens=5, repetition_penalty=1.3))
    )
    assert version == 3 and [s.text for s in samples] == ["s0", "s1"]
    assert samples[0].response_ids == [7, 8, 2] and samples[0].logprobs == [-0.5, -1.0, -0.25]
    assert all(s.stopped for s in samples)  # vLLM's finish_reason "stop"
    _, ids, params = e.llm.calls[0]
    assert ids == [1, 2, 3] and (
        params.n,
        params.top_k,
        params.logprobs,
        params.max_tokens,
        params.temperature,
        params.repetition_penalty,
    ) == (2, 0, 0, 5, 0.7, 1.3)
    assert params.output_kind == "final_only"


def test_a_weight_update_waits_for_requests_in_flight_and_holds_new_ones(tmp_path):
    from safetensors.torch import save_file

    e = started(config())
    save_file({"head.weight": torch.zeros(4, 3)}, str(tmp_path / "w.safetensors"))

    async def scenario():
        e.llm.gate = asyncio.Event()
        first = asyncio.create_task(e.generate([1], 1, Sampling()))
        await asyncio.sleep(0.05)
        update = asyncio.create_task(e.load_weights(str(tmp_path / "w.safetensors"), 9))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(e.generate([2], 1, Sampling()))
        await asyncio.sleep(0.05)
        # the second waits for the update
        assert not update.done() and len([c for c in e.llm.calls if c[0] == "generate"]) == 1
        e.llm.gate.set()
        return await first, await update, await second

    (v1, _), loaded, (v2, _) = asyncio.run(scenario())
    assert (v1, loaded, v2) == (3, 9, 9)
    kinds = [c[0] for c in e.llm.calls]
    assert kinds == ["generate", "collective_rpc", "reset_prefix_cache", "generate"]
    assert all(torch.equal(w.get_model().head.weight, torch.zeros(4, 3)) for w in e.llm.workers)


def test_a_memory_sync_holds_the_engines_turn_from_its_first_piece_to_its_last():
    """No request generates from half of a sync's pieces: one that arrives between two pieces waits for the last."""
    from trinity.runtime.sync import pieces

    e = started(config())
    weights = {"embed.weight": torch.full((4, 3), 2.0), "head.weight": torch.full((4, 3), 3.0)}
    specs = specs_of(weights)

    async def scenario():
        await e.load_piece(pieces.flatten([weights["embed.weight"]]), specs[:1], 0, 2, 7)
        request = asyncio.create_task(e.generate([2], 1, Sampling()))
        await asyncio.sleep(0.1)
        assert not request.done() and not [c for c in e.llm.calls if c[0] == "generate"]
        await e.load_piece(pieces.flatten([weights["head.weight"]]), specs[1:], 1, 2, 7)
        return await request

    version, _ = asyncio.run(scenario())
    assert version == 7 and e.weight_version() == 7


def test_a_checkpoint_file_is_loaded_by_every_worker(tmp_path):
    from safetensors.torch import save_file

    e = started(config("a100", "explorer.rollout_model.tensor_parallel_size=2", "explorer.rollout_model.engine_num=2"))
    save_file({"embed.weight": torch.ones(4, 3)}, str(tmp_path / "w.safetensors"))
    assert asyncio.run(e.load_weights(str(tmp_path / "w.safetensors"), 5)) == 5 and e.weight_version() == 5
    assert [w.get_model().loaded for w in e.llm.workers] == [["embed.weight"]] * 2


def test_a_memory_sync_goes_a_piece_at_a_time_through_one_file_per_node_into_one_reload_of_every_worker(tmp_path):
    """The weights never cross collective_rpc (vLLM's msgspec refuses bytes of 4 GiB or more; below that every worker
    would copy them): each piece is written once on the node, the TP workers map that file, and vLLM's reload of
    each worker takes all pieces (its layer-by-layer processing needs a layer's weights in one reload)."""
    import msgspec

    e = started(config("a100", "explorer.rollout_model.tensor_parallel_size=2", "explorer.rollout_model.engine_num=2"))
    reloads = []
    for w in e.llm.workers:
        runner = w.model_runner
        runner.reload_weights = lambda weights_iterator, r=runner: (
            reloads.append(r) or r.model.load_weights(weights_iterator)
        )
    weights = {"embed.weight": torch.full((4, 3), 2.0), "head.weight": torch.full((4, 3), 3.0)}
    assert memory_sync(e, weights, 4, limit=48) == [4, 4] and e.weight_version() == 4  # 48 bytes: one tensor each
    assert len(reloads) == 2  # one reload per worker for the whole sync
    assert [(w.get_model().head.weight.tolist(), w.get_model().loaded) for w in e.llm.workers] == [
        (weights["head.weight"].tolist(), list(weights))
    ] * 2
    rpcs = [c for c in e.llm.calls if c[0] == "collective_rpc"]
    assert [method for _, method, _ in rpcs] == ["trinity_begin", "trinity_piece", "trinity_piece", "trinity_end"]
    assert max(len(msgspec.msgpack.encode(list(args))) for *_, args in rpcs) < 400  # a path and specs, never weights
    assert not list((tmp_path / "shm" / "pieces" / "rollout.engine0").iterdir())  # each file removed once taken


def test_a_memory_sync_whose_reload_fails_raises_the_workers_error_and_frees_the_engine():
    e = started(config())
    weights = {"no.such.weight": torch.ones(4, 3), "head.weight": torch.ones(4, 3)}
    with pytest.raises(KeyError, match="no.such.weight"):
        memory_sync(e, weights, 5)
    assert e.weight_version() == 3 and not e.turns._updating  # the engine's turn is given back: requests go on
    assert ("collective_rpc", "trinity_abort", ()) in e.llm.calls


def test_a_piece_shared_memory_has_no_room_for_goes_to_the_temporary_folder_where_the_workers_find_it(
    tmp_path, monkeypatch
):
    """A container's /dev/shm may hold 64 MiB, and a piece may be larger than sync_bucket_mib (a weight alone): each
    node's actor chooses by the piece's own size, and the workers look under each of their node's roots."""
    from types import SimpleNamespace as Usage

    e = started(config())
    monkeypatch.setattr(vllm_staging.shutil, "disk_usage", lambda path: Usage(total=2**30, used=2**30, free=47))
    weights = {"embed.weight": torch.full((4, 3), 2.0), "head.weight": torch.full((4, 3), 3.0)}  # 48 bytes each
    seen = []
    monkeypatch.setattr(
        vllm_worker, "_mapped", lambda path, specs, real=vllm_worker._mapped: seen.append(path) or real(path, specs)
    )
    assert memory_sync(e, weights, 4, limit=48) == [4, 4]
    assert [p.parent.parent.parent for p in seen] == [tmp_path / "tmp"] * 2  # <root>/pieces/<engine>/<file>
    assert all(w.get_model().head.weight.eq(3).all() for w in e.llm.workers)


def test_a_sync_whose_start_fails_gives_the_engines_turn_back(monkeypatch):
    e = started(config())

    async def refuse(method, timeout=None, args=(), kwargs=None):
        raise RuntimeError(f"{method} refused")

    real = e.llm.collective_rpc
    e.llm.collective_rpc = lambda method, **kw: refuse(method) if method == "trinity_begin" else real(method, **kw)
    with pytest.raises(RuntimeError, match="trinity_begin refused"):
        memory_sync(e, {"head.weight": torch.ones(4, 3)}, 5)
    assert not e.turns._updating and e._sync is None  # requests go on
    version, _ = asyncio.run(e.generate([1], 1, Sampling()))
    assert version == 3


def test_a_device_buffer_piece_reaches_each_worker_by_its_own_devices_handle(monkeypatch):
    """device_ipc: every trainer rank exports its piece's buffer on its device; each TP worker maps the one exported
    on its own device (keyed by host and physical device). The mapping is CUDA's or torch_npu's: a fake here."""
    from tests.fakes_vllm import FakeDeviceIpc
    from trinity.runtime.sync import device_ipc

    fake = FakeDeviceIpc()
    monkeypatch.setattr(device_ipc, "open_handle", fake.open_handle)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    cfg = config("a100", "explorer.rollout_model.tensor_parallel_size=2", "explorer.rollout_model.engine_num=2")
    e = engine(cfg)
    e.visible_devices_env = "CUDA_VISIBLE_DEVICES"
    asyncio.run(e.setup("/models/m", 3))
    for index, w in enumerate(e.llm.workers):
        w.device = torch.device("cpu", index)  # the fake workers' devices 0 and 1: physical 4 and 5
    on_device = {4: torch.full((4, 3), 4.0), 5: torch.full((4, 3), 5.0)}  # what each rank's buffer holds
    handles = {
        device_ipc.device_key("CUDA_VISIBLE_DEVICES", i, node="node-a"): fake.export(on_device[4 + i]) for i in (0, 1)
    }
    spec = specs_of({"head.weight": on_device[4]})
    assert asyncio.run(e.load_piece(handles, spec, 0, 1, 6)) == 6
    assert [w.get_model().head.weight[0, 0].item() for w in e.llm.workers] == [4.0, 5.0]
    assert sorted(fake.opened) == [(0, 0), (1, 1)]  # each buffer mapped on the worker's own device index


def test_a_worker_on_another_node_than_its_heads_opens_the_buffer_exported_on_its_own_node(monkeypatch):
    """A colocated engine spanning nodes (TP 16 on 8-device nodes): each worker builds its device's key in its own
    process, from the node its part's actor recorded there before vLLM started it, not from the head's node. The
    fake workers share this process, so the head's setup runs on node-a and the workers then take node-b's record:
    what a worker of the part on node-b sees. The mapping is CUDA's or torch_npu's: a fake here."""
    from tests.fakes_vllm import FakeDeviceIpc

    fake = FakeDeviceIpc()
    monkeypatch.setattr(device_ipc, "open_handle", fake.open_handle)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    e = engine(config("a100", "mode=colocate"))
    e.visible_devices_env = "CUDA_VISIBLE_DEVICES"
    asyncio.run(e.setup("/models/m", 3))
    assert e.llm.node_at_start == "node-a"  # recorded before vLLM started its workers, which inherit it
    monkeypatch.setenv(device_ipc.NODE_ENV, "node-b")
    on_device = {node: torch.full((4, 3), value) for node, value in (("node-a", 1.0), ("node-b", 2.0))}
    handles = {device_ipc.device_key("CUDA_VISIBLE_DEVICES", 0, node=n): fake.export(t) for n, t in on_device.items()}
    asyncio.run(e.load_piece(handles, specs_of({"head.weight": on_device["node-b"]}), 0, 1, 4))
    assert e.llm.workers[0].get_model().head.weight[0, 0].item() == 2.0 and fake.opened == [(1, 0)]
    rpc = next(c for c in e.llm.calls if c[:2] == ("collective_rpc", "trinity_piece"))
    assert rpc[2][1:] == ([["head.weight", [4, 3], "float32"]], "CUDA_VISIBLE_DEVICES")  # and no node of the head


def test_weight_specs_cross_collective_rpc_as_plain_lists():
    from trinity.runtime.rollout.base import WeightSpec

    e = started(config())
    e.llm.workers = []  # nothing to receive into: what matters is what vLLM's engine process is given
    asyncio.run(e.receive_weights([WeightSpec("embed.weight", (4, 3), "bfloat16")], 2))
    limit = 256 * 2**20  # synchronizer.sync_bucket_mib's default
    assert e.llm.calls[0] == ("collective_rpc", "trinity_receive", ([["embed.weight", [4, 3], "bfloat16"]], limit))


def test_close_shuts_vllm_down():
    e = started(config())
    llm = e.llm
    e.close()
    assert llm.calls[-1] == ("shutdown",) and e.llm is None


def test_every_worker_of_a_tp_engine_joins_the_weight_sync_group_with_its_own_rank(monkeypatch):
    """Engine 1 of two TP-2 engines: its workers take ranks 3 and 4 of a world of 5 (trainer rank 0 sends).
    The group itself is real in tests/runtime/rollout/test_vllm_worker.py; here each worker's join is recorded."""
    from trinity.runtime.sync import group

    joined = []
    monkeypatch.setattr(
        group,
        "join",
        lambda backend, host, port, rank, world, timeout, name: joined.append((backend, rank, world, name)) or object(),
    )
    cfg = config(
        "a100",
        "explorer.rollout_model.tensor_parallel_size=2",
        "explorer.rollout_model.engine_num=2",
        "synchronizer.group_name=my_sync",
    )
    assert cfg.synchronizer.weight_sync_world_size == 5
    e = started(cfg, slot=1, version=0)
    # the synchronizer's rank for the actor at position 1
    asyncio.run(e.join_sync_group("nccl", "10.0.0.1", 1234, 2, 5, 60))
    assert e.llm.calls == [("collective_rpc", "trinity_join", ("nccl", "10.0.0.1", 1234, 3, 5, 60, "my_sync"))]
    assert sorted(joined) == [("nccl", 3, 5, "my_sync"), ("nccl", 4, 5, "my_sync")]  # synchronizer.group_name


def test_a_headless_part_passes_generate_to_its_head_and_leaves_weights_to_it(tmp_path):
    cfg = config(
        "ascend910b",
        "cluster.node_num=2",
        "cluster.gpu_per_node=8",
        "mode=explore",
        "explorer.rollout_model.tensor_parallel_size=16",
        "explorer.rollout_model.engine_num=1",
    )
    part = engine(cfg, slot=1, name="rollout.engine0.part1")
    part.topology = vllm_args.topology(cfg, 1)
    asked = []

    async def head_generate(*args):
        asked.append(args)
        return 7, []

    part.head = SimpleNamespace(generate=SimpleNamespace(remote=head_generate))
    assert asyncio.run(part.generate([1], 2, Sampling())) == (7, [])
    assert asked == [([1], 2, Sampling())]
    assert asyncio.run(part.join_sync_group("hccl", "h", 1, 2, 17, 5)) is None
    assert asyncio.run(part.receive_weights([], 6)) == 6 and part.weight_version() == 6
    # a memory sync's piece: written on this part's node, where the head's call has its workers read it
    weights = {"head.weight": torch.full((4, 3), 2.0)}
    assert memory_sync(part, weights, 8) == [8] and part.weight_version() == 8
    (written,) = list((tmp_path / "shm" / "pieces" / "rollout.engine0").iterdir())
    assert written.name == "v8-0" and torch.equal(
        torch.from_file(str(written), size=12, dtype=torch.float32).view(4, 3), weights["head.weight"]
    )


def test_the_engine_sets_its_env_before_vllm_is_imported(monkeypatch):
    """On cpu each engine is bound to its own cores: vllm_api receives engine_env's variables."""
    given = []
    monkeypatch.setattr(vllm_engine, "vllm_api", lambda env: given.append(env) or fake_vllm_api(env))
    cfg = config("cpu", "explorer.rollout_model.engine_type=vllm")
    started(cfg)
    assert given == [vllm_args.engine_env(cfg, vllm_args.topology(cfg, 0))] and given[0]["VLLM_CPU_OMP_THREADS_BIND"]


def test_a_follower_part_announces_the_node_address_ray_knows(monkeypatch):
    import ray

    cfg = config(
        "ascend910b",
        "cluster.node_num=2",
        "cluster.gpu_per_node=8",
        "mode=explore",
        "explorer.rollout_model.tensor_parallel_size=16",
        "explorer.rollout_model.engine_num=1",
    )
    monkeypatch.delenv("VLLM_HOST_IP", raising=False)
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "10.0.0.7")
    monkeypatch.setattr(vllm_parts, "wait_for", lambda key, timeout: (("10.0.0.1", 2345), "head-handle"))
    part = engine(cfg, slot=1, name="rollout.engine0.part1")
    monkeypatch.setattr(part, "_key", lambda path, version: "key")
    monkeypatch.setattr(part, "_start_workers", lambda kwargs: kwargs)
    asyncio.run(part.setup("/models/m", 0))
    assert __import__("os").environ["VLLM_HOST_IP"] == "10.0.0.7" and part.head == "head-handle"
    assert (part.workers["master_addr"], part.workers["master_port"], part.workers["node_rank"]) == (
        "10.0.0.1",
        2345,
        1,
    )


def test_every_adapter_load_takes_a_new_id_and_folder_which_requests_then_name(tmp_path, monkeypatch):
    """vLLM caches an adapter by id: a re-sync of one weight version (resuming) must not reuse one. The last
    adapter is removed from vLLM and its folder from the node."""
    from tests.fakes_vllm import fake_lora_request
    from trinity.runtime.rollout import vllm_worker

    monkeypatch.setattr(VllmEngine, "_adapter_root", lambda self: tmp_path)
    monkeypatch.setattr(vllm_worker, "lora_request", fake_lora_request)
    tp = ("explorer.rollout_model.tensor_parallel_size=2", "explorer.rollout_model.engine_num=2")
    e = started(config("a100", "+model.lora_configs=[{lora_rank: 8, base_model_name: org/base}]", *tp))
    adapter = {"m.q_proj.lora_A.weight": torch.ones(8, 3), "m.q_proj.lora_B.weight": torch.zeros(3, 8)}
    for version in (4, 4):  # the same version twice
        assert memory_sync(e, adapter, version) == [version]
        asyncio.run(e.generate([1, 2], 1, Sampling(max_tokens=2)))
    first, second = (e.llm.workers[0].model_runner.loras[i] for i in (0, 1))
    assert (first.lora_int_id, second.lora_int_id) == (1, 2) and first.lora_path != second.lora_path
    assert all([r.lora_int_id for r in w.model_runner.loras] == [1, 2] for w in e.llm.workers)  # every TP worker
    assert e.llm.lora_request.lora_int_id == 2 and e.llm.lora_request.lora_path == second.lora_path
    assert e.llm.lora_request.base_model_name == "org/base"  # what vLLM records as the adapter's base, as upstream
    assert ("remove_lora", 1) in e.llm.calls
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a2"]
    assert json.loads((tmp_path / "a2" / "adapter_config.json").read_text())["target_modules"] == ["q_proj"]
    e.close()
    assert not tmp_path.exists()  # close drops this node's adapters
