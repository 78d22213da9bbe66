"""NPU smoke check, one command on an Ascend host with CANN installed and the `npu` extra (docs/clusters.md:
"Running on an Ascend cluster"); it installs nothing:

    source /usr/local/Ascend/ascend-toolkit/set_env.sh
    source /usr/local/Ascend/nnal/atb/set_env.sh
    python scripts/npu_smoke.py --train

The same steps as gpu_smoke.py: detection picks the Ascend profile, `trinity doctor`'s findings,
torch.distributed with the derived `cpu:gloo,npu:hccl` backend, a Ray actor asking for one NPU, and
with `--train` the embedded demo on vLLM (vllm-ascend) for a few steps with reward, tokens/s and
sync seconds per step. It prints one JSON object and exits 0 when every step passed.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_smoke import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(expect="npu"))
