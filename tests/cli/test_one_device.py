"""`trinity run` with no arguments on a machine with one GPU or NPU: the demo's two devices per node are lowered to
the one there is, and its GRPO stage takes turns on it (colocate); on two or eight devices it runs side by side.

The machine is presented by a stand-in `nvidia-smi` or `npu-smi` on PATH (what detection runs); the CLI, hardware=auto,
the derive rules and the launch plan are real. A dry run starts no Ray.
"""

import os
import subprocess
import sys
import tempfile

import pytest

H200_MIB = 143771


def stand_in(folder, tool: str, output: str) -> None:
    """An executable `tool` in `folder` that prints `output`."""
    path = folder / tool
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\n")
    path.chmod(0o755)


def nvidia(count: int) -> str:
    return "".join(f"NVIDIA H200, {H200_MIB}\n" for _ in range(count))


def npus(count: int) -> str:
    from tests.fakes import npu_smi_m

    return npu_smi_m("910B3", count)


@pytest.fixture
def trinity(tmp_path, demo_assets):
    def _run(tool: str, output: str, *args: str) -> tuple[subprocess.CompletedProcess, list]:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        stand_in(bin_dir, tool, output)
        ray_tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")  # stays empty: a dry run starts no Ray
        env = {
            **{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "RAY_TMPDIR": ray_tmp,
            "TRINITY_DEMO_DIR": str(demo_assets),
        }
        proc = subprocess.run(
            [sys.executable, "-m", "trinity", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        started = os.listdir(ray_tmp)
        subprocess.run(["rm", "-rf", ray_tmp])
        return proc, started

    return _run


@pytest.mark.parametrize("tool,output,key", [("nvidia-smi", nvidia(1), "GPU"), ("npu-smi", npus(1), "NPU")])
def test_the_demo_on_one_accelerator_colocates_on_it_and_says_why(trinity, tool, output, key):
    proc, started = trinity(tool, output, "run", "--dry-run")
    assert proc.returncode == 0 and started == [], proc.stderr
    assert "cluster.gpu_per_node: 2 devices per node, but a node offers 1 (auto: 1 x " in proc.stderr
    assert "using 1" in proc.stderr and proc.stderr.count("using 1") == 1  # said once, not again per stage
    assert "the run has one device, which an engine and a trainer rank can only share: mode 'colocate'" in proc.stderr
    grpo = proc.stdout[proc.stdout.index("stage grpo") :]
    assert f"1 x {{{key}: 1, CPU: 2}}" in grpo  # one device, trainer rank and engine on it
    assert "rollout.engine0      rollout   trainer_node0[0]" in grpo
    sft = proc.stdout[proc.stdout.index("stage sft_warmup") : proc.stdout.index("stage grpo")]
    assert f"1 x {{{key}: 1, CPU: 1}}" in sft and "rank1" not in sft  # one trainer rank: never two on one device


def test_explain_shows_the_mode_derived_from_the_devices_a_node_offers(trinity):
    proc, _ = trinity("nvidia-smi", nvidia(1), "config", "render", "--stage", "grpo", "--explain", "mode")
    assert proc.returncode == 0, proc.stderr
    assert "mode = 'colocate'" in proc.stdout and "rule shared_devices" in proc.stdout
    assert "cluster.gpu_per_node=1" in proc.stdout and "mode='both' (schema default)" in proc.stdout


@pytest.mark.parametrize("count", [2, 8])
def test_the_demo_on_two_or_eight_gpus_runs_an_engine_and_a_trainer_rank_side_by_side(trinity, count):
    proc, started = trinity("nvidia-smi", nvidia(count), "run", "--dry-run")
    assert proc.returncode == 0 and started == [], proc.stderr
    assert "gpu_per_node" not in proc.stderr and "colocate" not in proc.stderr
    grpo = proc.stdout[proc.stdout.index("stage grpo") :]
    assert "rollout.engine0" in grpo and "trainer_node0.rank0" in grpo and "num_gpus=1" in grpo


def test_mode_both_set_by_hand_on_one_gpu_is_refused_with_the_setting_that_works(trinity):
    proc, started = trinity("nvidia-smi", nvidia(1), "run", "--dry-run", "mode=both")
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert "no devices left for the trainer: 1 devices (1 node(s) x 1) minus 1 for rollout" in proc.stderr
    assert "set mode=colocate" in proc.stderr


def test_what_this_machine_has_says_nothing_of_a_cluster_named_by_its_address(trinity):
    """hardware=auto found one GPU here; a run on a Ray cluster elsewhere learns what its nodes offer from the cluster,
    not from this machine: nothing is lowered before Ray is asked."""
    args = ("config", "render", "--stage", "grpo", "cluster.ray_address=10.0.0.1:6379", "--explain", "mode")
    proc, _ = trinity("nvidia-smi", nvidia(1), *args)
    assert proc.returncode == 0, proc.stderr
    assert "mode = 'both'" in proc.stdout and "gpu_per_node" not in proc.stderr
