"""NPU smoke check, one command on an Ascend host with CANN installed and the Ascend stack (docs/clusters.md:
"Running on an Ascend cluster"); it installs nothing:

    source /usr/local/Ascend/ascend-toolkit/set_env.sh
    source /usr/local/Ascend/nnal/atb/set_env.sh
    python scripts/npu_smoke.py --train

First, before anything is imported or started, the stack this node has (its CANN release and the torch, torch_npu,
vLLM and vllm-ascend beside it: trinity/platforms/npu_stacks.py): where it is not the one trinity runs, it prints
`trinity doctor`'s report (what is missing or does not match, and the commands for this CPU architecture) and exits 1.
Then the same steps as gpu_smoke.py: detection picks the Ascend profile, torch.distributed with the derived
`cpu:gloo,npu:hccl` backend, a Ray actor asking for one NPU, and with `--train` the embedded demo on vLLM
(vllm-ascend) for a few steps with reward, tokens/s and sync seconds per step. It prints one JSON object and exits 0
when every step passed.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trinity.cli.doctor import diagnose, render_text  # noqa: E402


def stack_first() -> int:
    """Print the node's NPU stack (stderr); 1 with the doctor's report where it cannot run trinity, else 0."""
    report = diagnose()
    stack = report.get("npu_stack")
    if stack is None:
        print("npu_smoke: no NPUs found here", file=sys.stderr)
        return 0  # gpu_smoke's steps say what the machine has
    found = stack["stack"] or f"CANN {stack['cann']}: in no stack trinity knows"
    print(f"npu_smoke: stack: {found}", file=sys.stderr)
    if any(p["severity"] == "error" for p in report["problems"]):
        print(render_text(report), file=sys.stderr, end="")
        return 1
    return 0


if __name__ == "__main__":
    if stack_first():
        raise SystemExit(1)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_smoke import main

    raise SystemExit(main(expect="npu"))
