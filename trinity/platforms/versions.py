"""Versions known to work together, by install extra: the README's table and the pins of pyproject.toml's
extras (a test keeps the three in step), and the pairs `trinity doctor` checks on a machine.

Sources: vLLM 0.23.0's wheel requires torch==2.11.0; vllm-ascend's compatibility matrix pairs
vllm-ascend 0.23.0 with vLLM 0.23.0, torch 2.10.0 / torch_npu 2.10.0.post4 and CANN 9.1.0.
"""

import re
from typing import Optional

KNOWN = {
    "gpu": {"torch": "2.11.0", "vllm": "0.23.0", "verl": "0.9.1", "ray": "2.60.0"},
    "npu": {"torch": "2.10.0", "torch_npu": "2.10.0.post4", "vllm": "0.23.0", "vllm-ascend": "0.23.0.post1", "verl": "0.9.1", "ray": "2.60.0"},
}
VLLM = KNOWN["gpu"]["vllm"]  # the vLLM whose EngineArgs trinity's engine arguments are checked against
CANN = "9.1.0"  # the CANN release vllm-ascend 0.23.0 and torch_npu 2.10.0 are built against
# (plugin distribution, the distribution it is built for): the plugin's release must equal the other's
PAIRS = (("vllm-ascend", "vllm"), ("torch_npu", "torch"))


def release(version: str) -> str:
    """The release a version belongs to: '2.10.0+cpu', '2.10.0.post4' and '2.10.0rc1' are all '2.10.0'."""
    match = re.match(r"\d+(\.\d+)*", version)
    return match.group(0) if match else version


def pair_problems(packages: dict[str, Optional[str]]) -> list[tuple[str, str, str]]:
    """(severity, message, hint) for each installed pair that cannot work together, and a vLLM other than the tested one."""
    out = []
    for plugin, base in PAIRS:
        have, needs = packages.get(base), packages.get(plugin)
        if have and needs and release(have) != release(needs):
            out.append(("error", f"{plugin} {needs} is built for {base} {release(needs)}, but {base} {have} is installed", f"pip install {base}=={release(needs)}, or the {plugin} release matching {base} {release(have)}"))
    vllm = packages.get("vllm")
    if vllm and release(vllm) != VLLM:
        out.append(("note", f"trinity is tested with vllm {VLLM}; vllm {vllm} is installed", "trinity run checks its engine arguments against the installed vLLM before anything starts"))
    return out
