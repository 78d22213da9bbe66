"""Detection through injected probes, and `hardware=auto` for every shipped profile."""

import subprocess
import sys

import pytest

from tests.conftest import REFERENCE
from tests.fakes import fake_machine
from trinity import paths
from trinity.config.auto import auto_profile, choose_profile
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.errors import ConfigError
from trinity.platforms.detect import Detection, detect

MACHINES = {
    "ascend910b": fake_machine(npu_chip="Ascend 910B3"),
    "ascend910b4": fake_machine(npu_chip="Ascend 910B4"),
    "ascend910c": fake_machine(npu_chip="Ascend910_9391", npus=16),
    "a100": fake_machine(gpu="NVIDIA A100-SXM4-80GB"),
    "a100_40g": fake_machine(gpu="NVIDIA A100-SXM4-40GB", gpu_mib=40345, via="nvml"),
    "h100": fake_machine(gpu="NVIDIA H100 80GB HBM3", via="nvml"),
    "h200": fake_machine(gpu="NVIDIA H200", gpu_mib=143771),
    "cpu": fake_machine(),
}


@pytest.mark.parametrize("profile", list(MACHINES))
def test_auto_picks_each_shipped_profile(profile):
    name, how = auto_profile(paths.profile_dirs(), MACHINES[profile])
    assert name == profile and how.startswith("auto: ")


def test_npu_smi_rows_skip_the_mcu():
    found = detect(MACHINES["ascend910b"])
    assert (found.device_type, found.count, set(found.names)) == ("npu", 8, {"Ascend 910B3"})
    assert found.summary() == "8 x Ascend 910B3 from npu-smi info -m"


def test_nvidia_smi_and_nvml():
    h200 = detect(MACHINES["h200"])
    assert h200.device_type == "cuda" and h200.count == 8 and round(h200.memory_gb) == 140
    assert detect(MACHINES["h100"]).evidence == ("NVML",)


def test_device_files_without_tools():
    npu = detect(fake_machine(dev_files=("/dev/davinci0", "/dev/davinci1", "/dev/davinci_manager")))
    assert npu.device_type == "npu" and npu.count == 2 and "npu-smi is not on PATH" in npu.evidence[1]
    gpu = detect(fake_machine(dev_files=("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm")))
    assert gpu.device_type == "cuda" and gpu.count == 1


def test_a_cuda_folder_proves_nothing():
    machine = fake_machine(files=("/usr/local/cuda", "/usr/local/cuda/bin/nvcc"), dev_files=("/dev/nvidiactl",))
    assert detect(machine).device_type == "cpu"


def test_unknown_chip_is_an_error_that_lists_the_candidates():
    with pytest.raises(ConfigError) as err:
        auto_profile(paths.profile_dirs(), fake_machine(npu_chip="Ascend 910A"))
    issue = err.value.issues[0]
    assert "hardware=auto found 8 x Ascend 910A from npu-smi info -m, and no profile recognises it" in issue.message
    assert "ascend910b" in issue.allowed and "ascend910c" in issue.allowed


def test_a_site_profile_is_preferred_over_the_shipped_one(tmp_path):
    (tmp_path / "mya100.yaml").write_text(
        "extends: a100\nfacts:\n  memory_gb_per_device: 40\ndetect:\n  names: [A100]\n  max_memory_gb: 48\n"
    )
    dirs = paths.profile_dirs((str(tmp_path),))
    assert auto_profile(dirs, fake_machine(gpu="NVIDIA A100-SXM4-40GB", gpu_mib=40960))[0] == "mya100"
    assert auto_profile(dirs, fake_machine(gpu="NVIDIA A100-SXM4-80GB"))[0] == "a100"


# NVML and nvidia-smi report GiB: an 80 GB A100 ~79.2, a 40 GB one ~39.4
@pytest.mark.parametrize(
    "gpu,mib,via,profile",
    [
        ("NVIDIA A100-SXM4-40GB", 40345, "nvml", "a100_40g"),
        ("NVIDIA A100-PCIE-40GB", 40960, "nvidia-smi", "a100_40g"),
        ("NVIDIA A100", 40345, "nvml", "a100_40g"),  # the memory decides, whatever the name says
        ("NVIDIA A100-SXM4-80GB", 81154, "nvml", "a100"),
        ("NVIDIA A100 80GB PCIe", 81920, "nvidia-smi", "a100"),
        ("NVIDIA A100", 81154, "nvml", "a100"),
        # h100 and h200 extend a100 and detect as before
        ("NVIDIA H100 80GB HBM3", 81559, "nvml", "h100"),
        ("NVIDIA H100 PCIe", 81559, "nvidia-smi", "h100"),
        ("NVIDIA H100 NVL", 95830, "nvml", "h100"),
        ("NVIDIA H200", 143771, "nvml", "h200"),
        ("NVIDIA H200 NVL", 143771, "nvidia-smi", "h200"),
    ],
)
def test_an_a100_is_told_40_from_80_gb_by_its_memory(gpu, mib, via, profile):
    name, how = auto_profile(paths.profile_dirs(), fake_machine(gpu=gpu, gpu_mib=mib, via=via))
    assert name == profile and how == f"auto: 8 x {gpu} ({mib / 1024:.0f} GB) from {'NVML' if via == 'nvml' else via}"


@pytest.mark.parametrize(
    "gpu,profile,how",
    [
        ("A100-SXM4-40GB", "a100_40g", "; 40 GB from the device name"),
        ("NVIDIA A100-PCIE-40GB", "a100_40g", "; 40 GB from the device name"),
        ("NVIDIA A100 80GB PCIe", "a100", "; 80 GB from the device name"),
        ("NVIDIA A100-SXM4-80GB", "a100", "; 80 GB from the device name"),
        ("NVIDIA H100 80GB HBM3", "h100", "; 80 GB from the device name"),
        ("NVIDIA H200", "h200", ""),
    ],
)
def test_without_a_measured_memory_the_size_in_the_name_decides(gpu, profile, how):
    # No probe gives names without memory today (nvidia-smi rows without one are dropped), so detection's result is
    # presented as it would come.
    found = Detection("cuda", (gpu,) * 8, None, ("a probe without memory",))
    assert choose_profile(found, paths.profile_dirs()) == (profile, f"auto: 8 x {gpu} from a probe without memory{how}")


def test_auto_in_the_resolved_config_says_what_it_saw():
    cfg = resolve(Request(REFERENCE, ("hardware=auto",), probes=MACHINES["ascend910b"])).config
    assert cfg.hardware.name == "ascend910b" and cfg.synchronizer.sync_method == "hccl"
    assert cfg.hardware.selected_by == "auto: 8 x Ascend 910B3 from npu-smi info -m"


def test_auto_is_the_default(cli):
    cfg = cli("config", "render", "--format", "json").json()
    assert cfg["hardware"]["name"] == "cpu" and cfg["hardware"]["selected_by"].startswith("auto: no accelerator found")


def test_detection_imports_no_vendor_package():
    # A process of its own: other tests in this one may have imported torch already.
    probe = (
        "import sys; from trinity.platforms.detect import detect; detect(); print(sorted({'torch', 'torch_npu', "
        "'vllm'} & set(sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
