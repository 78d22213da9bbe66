"""The Ascend stacks (trinity/platforms/npu_stacks.py): the install steps per CPU architecture, the documentation that
shows them, and the pins checked by a resolver against the public index for x86_64 and aarch64 (tests marked
`index`: they ask PyPI, as CI does; uv's resolver, which takes the target platform's markers where pip evaluates
them for this machine).

What the check cannot ask here, it stands in for, by name: the vendor-only wheels (triton-ascend, arctic-inference:
Huawei's index), the `+cpu` torch of PyPI's CPU index on x86_64 (PyPI's torch of the same release), and vLLM built
from source without a device (`VLLM_TARGET_DEVICE=empty`: its wheel's torch pin and CUDA-only requirements left out).
"""

import shutil
import subprocess

import pytest

from tests.conftest import REPO
from trinity.platforms import npu_stacks
from trinity.platforms.npu_stacks import ARCHITECTURES, CURRENT, RFC

# The requirements vLLM's wheel adds for CUDA (requirements/cuda.txt of its source, beside its torch pin), which a
# build with VLLM_TARGET_DEVICE=empty leaves out; vllm-ascend pins torchaudio and torchvision for its torch.
CUDA_ONLY = {
    "0.23.0": (
        "numba flashinfer-python flashinfer-cubin apache-tvm-ffi tilelang nvidia-cudnn-frontend fastsafetensors "
        "nvidia-cutlass-dsl quack-kernels tokenspeed-mla humming-kernels"
    ).split(),
    "0.18.0": [],  # refused before these matter
}
VENDOR_ONLY_PINS = {"0.23.0": ("torchaudio==2.10.0", "torchvision==0.25.0"), "0.18.0": ()}
RUNTIME = ("verl==0.9.1", "ray==2.60.0", "transformers>=5.5.3,<5.11")  # trinity's runtime extra's pins that matter


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_install_takes_the_cpu_build_of_torch_that_torch_npu_needs_on_each_architecture(arch):
    commands = npu_stacks.install_commands(CURRENT, arch)
    cpu_index = "--index-url https://download.pytorch.org/whl/cpu"
    torch = next(c for c in commands if c.startswith("pip install torch=="))
    assert torch == (f"pip install torch==2.10.0+cpu {cpu_index}" if arch == "x86_64" else "pip install torch==2.10.0")
    assert "VLLM_TARGET_DEVICE=empty pip install /tmp/vllm-0.23.0" in " ".join(commands)  # no CUDA torch pin
    assert any(
        "vllm-ascend==0.23.0 --extra-index-url https://mirrors.huaweicloud.com/ascend/repos/pypi" in c for c in commands
    )
    assert commands[-1] == "trinity doctor"
    with pytest.raises(
        ValueError, match=r"no Ascend install for architecture 'ppc64le' \(architectures: x86_64, aarch64\)"
    ):
        npu_stacks.install_commands(CURRENT, "ppc64le")


def test_the_cluster_docs_show_the_install_of_every_architecture_from_the_record():
    docs = (REPO / "docs" / "clusters.md").read_text()
    for arch in ARCHITECTURES:
        assert "```bash\n" + "\n".join(npu_stacks.install_commands(CURRENT, arch)) + "\n```" in docs, arch
    assert CURRENT.summary() in docs and RFC.summary() in docs and RFC.refused in docs


@pytest.mark.parametrize(
    "release,stack",
    [("9.1.0", CURRENT), ("9.1.0.1", CURRENT), ("8.5.1", RFC), ("9.0.0-beta.1", None), ("8.3.RC2", None)],
)
def test_a_cann_release_belongs_to_its_stack_or_its_patches(release, stack):
    assert npu_stacks.by_cann(release) is stack


def test_python_and_matching_versions_are_checked_package_by_package():
    packages = {"torch": "2.10.0", "torch_npu": "2.10.0.post4", "vllm": "0.23.0+empty", "vllm-ascend": "0.23.0"}
    assert npu_stacks.node_problems("9.1.0", packages, "aarch64", "3.11") == []
    (python,) = npu_stacks.node_problems("9.1.0", packages, "aarch64", "3.13")
    assert python[1] == "Python 3.13: CANN 9.1.0's wheels are for Python >=3.10,<3.13"
    (npu,) = npu_stacks.node_problems("9.1.0", packages | {"torch_npu": "2.10.0.post2"}, "aarch64", "3.11")
    assert npu[1:] == (
        "torch_npu 2.10.0.post2 is installed: CANN 9.1.0's stack needs torch_npu 2.10.0.post4",
        "pip install torch_npu==2.10.0.post4",
    )


def resolve(stack: npu_stacks.NpuStack, arch: str, tmp_path) -> subprocess.CompletedProcess:
    """uv's resolver over the stack's pins for `arch`, PyPI only, with what PyPI cannot give stood in."""
    p, vllm = stack.packages, stack.packages["vllm"]
    wanted = [
        f"torch=={p['torch']}",
        f"torch-npu=={p['torch_npu']}",
        f"vllm=={vllm}",
        f"vllm-ascend=={p['vllm-ascend']}",
    ]
    never = [f'{name}; sys_platform == "never"' for name in (*stack.vendor_only, *CUDA_ONLY[vllm])]
    (tmp_path / "in.txt").write_text("\n".join([*wanted, *RUNTIME]) + "\n")
    (tmp_path / "overrides.txt").write_text("\n".join([f"torch=={p['torch']}", *VENDOR_ONLY_PINS[vllm], *never]) + "\n")
    command = [shutil.which("uv"), "pip", "compile", "--no-config", "--index-url", "https://pypi.org/simple"]
    # a node with the newest glibc any stack needs (2.34: Ubuntu 22.04, openEuler 22.03) takes the wheels of both
    glibc = max((s.glibc for s in npu_stacks.STACKS), key=lambda v: tuple(map(int, v.split("."))))
    command += ["--python-version", "3.11", "--python-platform", f"{arch}-manylinux_{glibc.replace('.', '_')}"]
    command += ["--only-binary", ":all:", "--override", str(tmp_path / "overrides.txt"), str(tmp_path / "in.txt")]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


@pytest.mark.index
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_stack_trinity_runs_resolves_against_the_public_index(arch, tmp_path):
    if shutil.which("uv") is None:
        pytest.fail("uv is not installed: pip install -e '.[test]' installs it")
    proc = resolve(CURRENT, arch, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pins = {
        line.split("==")[0]: line.split("==")[1]
        for line in proc.stdout.splitlines()
        if "==" in line and not line.startswith("#")
    }
    assert {name: pins[name] for name in ("torch", "torch-npu", "vllm", "vllm-ascend", "transformers", "verl")} == {
        "torch": "2.10.0",
        "torch-npu": "2.10.0.post4",
        "vllm": "0.23.0",
        "vllm-ascend": "0.23.0",
        "transformers": CURRENT.packages["transformers"],  # vllm-ascend's own pin, inside trinity's range
        "verl": "0.9.1",
    }


@pytest.mark.index
def test_the_rfcs_stack_cannot_install_beside_trinitys_trainer(tmp_path):
    """Why the RFC's stack is refused, asked of the resolver: vLLM 0.18.0's transformers<5 against verl 0.9.1's."""
    if shutil.which("uv") is None:
        pytest.fail("uv is not installed: pip install -e '.[test]' installs it")
    proc = resolve(RFC, "aarch64", tmp_path)
    assert proc.returncode != 0
    assert "vllm==0.18.0 depends on transformers>=4.56.0,<5" in proc.stderr and "unsatisfiable" in proc.stderr


@pytest.mark.parametrize(
    "layout",
    [
        (),
        ("mode=colocate", "explorer.rollout_model.engine_num=2", "explorer.rollout_model.tensor_parallel_size=2"),
        ("+model.lora_configs=[{lora_rank: 8}]",),
    ],
    ids=["reference", "colocate TP 2", "LoRA"],
)
def test_every_engine_argument_trinity_gives_exists_in_the_rfcs_vllm(layout):
    """The RFC's stack is refused for its pins, not its calls: each engine argument trinity builds on ascend910b is a
    field of vLLM 0.18.0's EngineArgs, of a type that takes its value (the snapshot read from vLLM 0.18.0's wheel)."""
    from tests.conftest import REFERENCE
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.launch.plan import build_plan
    from trinity.runtime.rollout import vllm_args, vllm_fields

    config = resolve(Request(REFERENCE, ("hardware=ascend910b", *layout))).config
    fields = vllm_fields.snapshot(vllm_fields.snapshot_path(RFC.packages["vllm"]))
    assert fields.version == "0.18.0"
    for spec in (a for a in build_plan(config).actors if a.role == "rollout"):
        topo = vllm_args.topology(config, spec.rank)
        head = ("10.0.0.1", 29600) if topo.parts > 1 else None
        assert fields.problems(vllm_args.engine_kwargs(config, "/models/m", topo, head)) == [], spec.name
