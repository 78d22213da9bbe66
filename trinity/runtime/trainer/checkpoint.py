"""A trainer rank's side of each checkpoint, and of resuming from one.

Every rank saves verl's trainer state (model, optimizer, schedule; the critic's beside it). Rank 0 also makes the
checkpoint a Hugging Face model folder where asked: the weights (with LoRA, the adapter in PEFT's layout and, with
trainer.save_merged_model, the merged model in merged/) beside the model folder's own files (config, tokenizer, code).
"""

from pathlib import Path
from typing import TYPE_CHECKING

from ..records.run_dir import STATE
from ..weights import lora

if TYPE_CHECKING:
    import torch

    from .weights_out import WeightsOut
    from .worker_setup import Workers

TRAINER_STATE = "trainer_state"  # a checkpoint's folder of verl's actor state, one file set per rank

# what a checkpoint writes itself, never copied from the model folder
WEIGHT_FILES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".h5",
    ".msgpack",
    ".gguf",
    ".ckpt",
    ".index.json",
)


class Checkpoint:
    """What this rank writes into each checkpoint of the stage and reads back on resume."""

    def __init__(self, workers: "Workers", weights: "WeightsOut") -> None:
        self.workers, self.weights, self.rank = workers, weights, weights.rank
        self.companions = companion_files(Path(workers.base))

    def load(self, folder: str) -> None:
        """The trainer state (and the critic's) saved under checkpoint `folder`."""
        self.workers.actor.load_checkpoint(str(Path(folder) / TRAINER_STATE))
        if self.workers.critic is not None:
            self.workers.critic.load(folder)

    def save(self, folder: str, step: int, hf: bool) -> None:
        """verl's trainer state per rank; with `hf`, rank 0's Hugging Face files (every rank takes part in the
        gathers)."""
        self.workers.actor.save_checkpoint(str(Path(folder) / TRAINER_STATE), global_step=step)
        if self.workers.critic is not None:
            self.workers.critic.save(folder, step)
        if not hf:
            return
        if self.weights.lora is None:
            self._save_model(Path(folder))
        else:
            self._save_adapter(Path(folder))

    def _save_model(self, folder: Path) -> None:
        weights = self.weights.full()
        if self.rank == 0:
            self._write_hf(folder, weights)

    def _save_adapter(self, folder: Path) -> None:
        """The adapter in PEFT's layout, and the merged model in merged/ with trainer.save_merged_model."""
        adapter = self.weights.on_rank0(self.weights.gathered(kind="adapter"))
        merged = None
        if self.weights.config.trainer.save_merged_model:
            merged = self.weights.on_rank0(self.weights.gathered(kind="merged"))
        if self.rank != 0:
            return
        self._write_companions(folder)
        lora.write_adapter(folder, adapter, lora.peft_config(self.weights.lora, self.workers.base))
        if merged is not None:
            self._write_hf(folder / lora.MERGED, merged)

    def _write_hf(self, folder: Path, weights: dict[str, "torch.Tensor"]) -> None:
        from ..weights.safetensors import save_safetensors

        folder.mkdir(parents=True, exist_ok=True)
        self._write_companions(folder)
        save_safetensors(weights, folder / "model.safetensors")

    def _write_companions(self, folder: Path) -> None:
        for name, content in self.companions.items():
            (folder / name).write_bytes(content)


def companion_files(model_path: Path) -> dict[str, bytes]:
    """The model folder's config, tokenizer and code, read once: a later stage's source checkpoint may be pruned."""
    skipped = lambda name: name.endswith(WEIGHT_FILES) or name.startswith(".") or name == STATE  # noqa: E731
    return {p.name: p.read_bytes() for p in sorted(model_path.iterdir()) if p.is_file() and not skipped(p.name)}
