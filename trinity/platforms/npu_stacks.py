"""The Ascend software stacks: the releases that go together, as records, and how each installs per CPU architecture.

One source of truth for the `npu` extra's documentation (docs/clusters.md shows `install_commands` of every
architecture; a test keeps them in step), `trinity doctor` (which stack a node has, what is missing or does not
match, and the commands for its architecture), the check `trinity run` makes before Ray on an NPU profile, and the
resolver check CI runs against the public index (tests/platforms/test_npu_stacks.py).

Sources (read 2026-12-04): vllm-ascend's installation guide and Dockerfile of v0.23.0 (CANN 9.1.0, torch_npu
2.10.0.post4; vLLM built from source with VLLM_TARGET_DEVICE=empty, since the vLLM 0.23.0 wheel pins torch 2.11.0;
triton-ascend 3.2.2 and arctic-inference wheels from Huawei's index) and of v0.18.0rc1 (CANN 8.5.1, torch_npu 2.9.0);
torch_npu's README (x86_64: the CPU build of torch from download.pytorch.org/whl/cpu, whose `+cpu` its wheel
requires; aarch64: PyPI's torch, a CPU build there); the wheels' metadata on PyPI (vllm-ascend 0.23.0: manylinux_2_34
wheels for both architectures, cp310-cp312, transformers==5.5.4; 0.23.0.post1: a source archive only).
"""

from dataclasses import dataclass, field

from .npu import NPU

DEVICE_TYPE = NPU.device_type  # the platform whose vendor stacks these are
ARCHITECTURES = ("x86_64", "aarch64")
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
ASCEND_INDEX = "https://mirrors.huaweicloud.com/ascend/repos/pypi"  # triton-ascend, arctic-inference wheels


@dataclass(frozen=True)
class NpuStack:
    """One set of Ascend releases that go together (the versions a node must have, exactly)."""

    cann: str  # the CANN toolkit, 910b ops and NNAL release
    packages: dict[str, str]  # distribution -> the version this stack pins
    python: tuple[str, str]  # the Pythons it has wheels for: (lowest, first one not)
    refused: str = ""  # why trinity cannot run on it ("" where it can)
    source: str = ""  # where the pins come from
    glibc: str = "2.34"  # vllm-ascend's wheels are manylinux_2_34
    vendor_only: tuple[str, ...] = field(default=())  # distributions only the vendor's index has (not PyPI)

    @property
    def name(self) -> str:
        return f"CANN {self.cann}"

    def summary(self) -> str:
        """'CANN 9.1.0: torch 2.10.0, torch_npu 2.10.0.post4, ...'."""
        return f"{self.name}: " + ", ".join(f"{name} {version}" for name, version in self.packages.items())


CURRENT = NpuStack(
    cann="9.1.0",
    packages={
        "torch": "2.10.0",
        "torch_npu": "2.10.0.post4",
        "vllm": "0.23.0",
        "vllm-ascend": "0.23.0",
        "triton-ascend": "3.2.2",
        "transformers": "5.5.4",
    },
    python=("3.10", "3.13"),
    source="vllm-ascend v0.23.0 (installation guide, Dockerfile, wheel metadata); torch_npu v26.1.0-pytorch2.10.0",
    vendor_only=("triton-ascend", "arctic-inference"),
)
# The RFC's own stack (its PR was validated on it with verl 0.7.1): every vLLM call and engine argument trinity uses
# exists in vLLM 0.18.0 (trinity/runtime/rollout/vllm_engine_args-0.18.0.json), but its pins cannot be installed
# beside verl 0.9.1, trinity's trainer (pip's resolver, tests/platforms/test_npu_stacks.py).
RFC = NpuStack(
    cann="8.5.1",
    packages={
        "torch": "2.9.0",
        "torch_npu": "2.9.0",
        "vllm": "0.18.0",
        "vllm-ascend": "0.18.0rc1",
        "triton-ascend": "3.2.0",
    },
    python=("3.10", "3.12"),
    refused="vLLM 0.18.0 requires transformers<5 and vllm-ascend 0.18.0rc1 numpy<2, while verl 0.9.1, trinity's "
    "trainer, requires transformers>=5.5.3,<5.11 and numpy>=2: no set of packages satisfies both (trinity's calls "
    "into vLLM itself all exist in 0.18.0)",
    source="vllm-ascend v0.18.0rc1 (installation guide, Dockerfile, wheel metadata); the RFC's PR environment",
    glibc="2.24",
    vendor_only=("arctic-inference",),  # its torch_npu 2.9.0.post1 and triton-ascend dev builds: vllm-ascend's bucket
)
STACKS = (CURRENT, RFC)


@dataclass(frozen=True)
class Step:
    """One install command, and the distribution it installs ("" for the environment's own steps)."""

    command: str
    installs: str = ""


def install_steps(stack: NpuStack, arch: str) -> list[Step]:
    """What to run, in order, on a node of `arch` with the stack's CANN installed (the vendor's .run packages:
    toolkit, 910b ops, NNAL), in a checkout of trinity: the torch its torch_npu is built for, torch_npu, vLLM from
    source without its own torch pin, vllm-ascend with the vendor's index, then trinity."""
    if arch not in ARCHITECTURES:
        raise ValueError(f"no Ascend install for architecture {arch!r} (architectures: {', '.join(ARCHITECTURES)})")
    p = stack.packages
    torch = (
        f"pip install torch=={p['torch']}+cpu --index-url {PYTORCH_CPU_INDEX}"
        if arch == "x86_64"  # PyPI's x86_64 torch is the CUDA build; torch_npu's wheel requires the +cpu one
        else f"pip install torch=={p['torch']}"
    )
    extra = f" --extra-index-url {PYTORCH_CPU_INDEX}" if arch == "x86_64" else ""
    vllm = f"/tmp/vllm-{p['vllm']}"
    return [
        Step("source /usr/local/Ascend/ascend-toolkit/set_env.sh"),
        Step("source /usr/local/Ascend/nnal/atb/set_env.sh"),
        Step(torch, "torch"),
        Step(f"pip install torch_npu=={p['torch_npu']}{extra}", "torch_npu"),
        Step(
            f"git clone --depth 1 --branch v{p['vllm']} https://github.com/vllm-project/vllm {vllm} && "
            f"VLLM_TARGET_DEVICE=empty pip install {vllm}{extra}",
            "vllm",
        ),
        Step(f"pip install vllm-ascend=={p['vllm-ascend']} --extra-index-url {ASCEND_INDEX}{extra}", "vllm-ascend"),
        Step(f"pip install -e '.[npu]'{extra}", "trinity"),
        Step("trinity doctor"),
    ]


def install_commands(stack: NpuStack, arch: str) -> list[str]:
    """The commands of `install_steps`."""
    return [step.command for step in install_steps(stack, arch)]


def by_cann(release: str) -> NpuStack | None:
    """The stack of a CANN release: its own, or a patch of it ('9.1.0.1'); None for any other ('9.0.0-beta.1')."""
    return next((s for s in STACKS if release == s.cann or release.startswith(s.cann + ".")), None)


Problem = tuple[str, str, str]  # (severity, message, hint)


def node_problems(cann: str | None, packages: dict[str, str | None], arch: str, python: str) -> list[Problem]:
    """What keeps a node with CANN release `cann` (None: no toolkit found), these installed `packages`, CPU `arch`
    and Python `python` (major.minor) from running trinity on its NPUs; each with the command that fixes it here."""
    steps = install_steps(CURRENT, arch if arch in ARCHITECTURES else ARCHITECTURES[0])
    fix = f"install CANN {CURRENT.cann} (toolkit, 910b ops, NNAL), then: " + " && ".join(s.command for s in steps)
    if cann is None:
        return [("error", "no CANN toolkit found here (its ascend_toolkit_install.info)", fix)]
    stack = by_cann(cann)
    if stack is None:
        return [("error", f"CANN {cann} is in no stack trinity runs on ({CURRENT.summary()})", fix)]
    if stack.refused:
        message = f"CANN {cann} is the stack of the RFC ({stack.summary()}); trinity cannot run on it: {stack.refused}"
        return [("error", message, fix)]
    return _python(stack, python) + _packages(stack, packages, {s.installs: s.command for s in steps})


def _python(stack: NpuStack, python: str) -> list[Problem]:
    low, high = stack.python
    if _numbers(low) <= _numbers(python) < _numbers(high):
        return []
    message = f"Python {python}: {stack.name}'s wheels are for Python >={low},<{high}"
    return [("error", message, f"create the environment with a Python >={low},<{high}")]


CHECKED = NPU.vendor_packages  # what a node must have exactly (pip enforces the rest)


def _packages(stack: NpuStack, packages: dict[str, str | None], commands: dict[str, str]) -> list[Problem]:
    out = []
    for name in CHECKED:
        have, want = packages.get(name), stack.packages[name]
        if have is None:
            out.append(("error", f"{name} is not installed: {stack.name}'s stack needs {name} {want}", commands[name]))
        elif _release_of(have) != want:
            message = f"{name} {have} is installed: {stack.name}'s stack needs {name} {want}"
            out.append(("error", message, commands[name]))
    return out


def _release_of(version: str) -> str:
    """A version without its local label: '2.10.0+cpu' is 2.10.0 (torch_npu's 2.10.0.post4 keeps its post)."""
    return version.split("+", 1)[0]


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
