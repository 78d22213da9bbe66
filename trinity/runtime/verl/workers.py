"""verl's workers, imported without vLLM.

verl 0.9.1's `checkpoint_engine` package (which its workers import) imports `vllm.distributed` for
its HCCL and Mooncake engines wherever vLLM is installed: ~2 s and ~45 MiB in every trainer rank
(measured beside vLLM's CPU build), though a trainer rank never runs vLLM and trinity moves weights
its own way (runtime/sync). vLLM is kept out of that package's import only: verl records those two
engines as unavailable, and anything that imports vLLM later gets it.
"""

import importlib
import sys


def _checkpoint_engines_without_vllm() -> None:
    if "verl.checkpoint_engine" in sys.modules or "vllm" in sys.modules:
        return
    sys.modules["vllm"] = None  # `import vllm` raises ImportError, which verl catches per engine
    try:
        importlib.import_module("verl.checkpoint_engine")
    finally:
        del sys.modules["vllm"]


_checkpoint_engines_without_vllm()

from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker, TrainingWorkerConfig  # noqa: E402

__all__ = ["ActorRolloutRefWorker", "TrainingWorker", "TrainingWorkerConfig"]
