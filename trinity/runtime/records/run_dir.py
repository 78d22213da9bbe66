"""The run directory `checkpoint_root_dir/project/name/`: the resolved config with its hash,
metrics.jsonl, checkpoints/global_step_N/ (Hugging Face files plus the trainer's state, published
by renaming a finished temporary folder), logs/ per role, selectors/ (the pass rates the explorer fed back to its
data selectors), and a lock per mode."""

import fcntl
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path

import yaml

from ...config import modes
from ...config.schema.explorer import NO_API_KEY, InferenceModelConfig
from ...errors import Issue, LockError
from ...utils.atomic import publish_dir, write_once, write_text_atomic
from ..weights.lora import adapter_base

STATE = "state.json"


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: its folder and what state.json says of it."""

    path: Path
    global_step: int
    stage: str
    stage_index: int
    stage_step: int
    stage_total: int
    mode: str = "both"  # an `explore` run and a `train` run may share the directory; each resumes only its own

    @property
    def stage_done(self) -> bool:
        return self.stage_step >= self.stage_total


FIELDS = tuple(f.name for f in fields(Checkpoint) if f.name != "path")  # what state.json holds


class RunDir:
    def __init__(self, root: Path, save_dir: str = ""):
        self.root = Path(root)
        self.checkpoints = self.root / "checkpoints"
        self.logs = Path(save_dir) if save_dir else self.root / "logs"  # log.save_dir, else Trinity-RFT's place
        self.metrics = self.root / "metrics.jsonl"
        self.config = self.root / "config.yaml"
        self.endpoints = self.root / "endpoints.json"
        self.timeline = self.root / "ray_timeline.json"  # monitor.enable_ray_timeline: Chrome trace of the run's calls

    def run_id(self) -> str:
        """The run's identity, made once (a random id in `run_id`): what a persisted experience store's rows name
        their stage by, however the directory is reached or wherever it is moved (buffer/scope.py)."""
        self.root.mkdir(parents=True, exist_ok=True)
        return write_once(self.root / "run_id", uuid.uuid4().hex + "\n").strip()

    def selector_feedback(self, stage_index: int) -> Path:
        """The pass rates a stage's explorer fed back to its data selectors, one line per explore step, which a resumed
        stage replays (explorer/schedule.py FeedbackLog)."""
        return self.root / "selectors" / f"stage_{stage_index}.jsonl"

    @contextmanager
    def lock(self, mode: str | Collection[str]) -> Iterator[None]:
        """Hold the locks of a mode, or of every mode of a staged run, for the block (Mode.locks: `both` excludes
        every other run of the directory, an `explore` and a `train` run may share it); the OS drops them if the
        process dies."""
        names = sorted({n for m in ([mode] if isinstance(mode, str) else mode) for n in modes.mode(m).locks})
        self.root.mkdir(parents=True, exist_ok=True)
        handles = []
        try:
            for name in names:
                handle = (self.root / f"{name}.lock").open("a+")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.seek(0)
                    holder = handle.read().strip() or "another process"
                    handle.close()
                    raise LockError(
                        [
                            Issue(
                                f"{self.root} is in use by a live run ({name} lock held by {holder})",
                                key="name",
                                hint="wait for it to end, or choose another project/name",
                            )
                        ]
                    ) from None
                handle.seek(0)
                handle.truncate()
                handle.write(f"pid {os.getpid()} on {os.uname().nodename}")
                handle.flush()
                handles.append(handle)
            yield
        finally:
            for handle in handles:
                handle.close()

    def write_config(self, data: dict) -> str:
        """Write the resolved config atomically with its sha256 in the first line; returns the hash."""
        digest = config_hash(data)
        text = f"# sha256: {digest}\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)
        self.root.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.config, text)
        return digest

    def write_endpoints(
        self, stage: str, rollout: InferenceModelConfig, urls: list[str], proxy: str | None = None
    ) -> None:
        """The running stage's OpenAI endpoints (one per engine; serve mode's proxy in front of them) and the model
        name requests give, atomically."""
        data = {
            "stage": stage,
            "model": rollout.model_path,
            "endpoints": urls,
            "needs_api_key": rollout.api_key != NO_API_KEY,
        }
        if proxy is not None:
            data["proxy"] = proxy
        write_text_atomic(self.endpoints, json.dumps(data, indent=2) + "\n")

    def saved_config(self) -> dict | None:
        """The config an earlier run of this directory saved, if any."""
        return yaml.safe_load(self.config.read_text(encoding="utf-8")) if self.config.exists() else None

    def complete_checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint whose state.json was published, oldest first (a half-written one has none)."""
        found = []
        for folder in self.checkpoints.glob("global_step_*"):
            state = folder / STATE
            if state.is_file():
                data = json.loads(state.read_text(encoding="utf-8"))
                found.append(Checkpoint(folder, **{k: data[k] for k in FIELDS}))
        return sorted(found, key=lambda c: c.global_step)

    def latest(self) -> Checkpoint | None:
        """The last complete checkpoint."""
        found = self.complete_checkpoints()
        return found[-1] if found else None

    def save_checkpoint(self, checkpoint: Checkpoint, fill: Callable[[Path], None], keep: int | None) -> Checkpoint:
        """Publish a checkpoint: `fill` writes its files into a temporary folder, state.json goes last."""

        def build(folder: Path) -> None:
            fill(folder)
            write_text_atomic(folder / STATE, json.dumps({k: getattr(checkpoint, k) for k in FIELDS}, indent=2))

        target = self.checkpoints / f"global_step_{checkpoint.global_step}"
        if target.exists():
            shutil.rmtree(target)  # an incomplete folder of that step, left by a crash
        publish_dir(build, target)
        self._prune(keep)
        return replace(checkpoint, path=target)

    def _prune(self, keep: int | None) -> None:
        if not keep:
            return
        checkpoints = self.complete_checkpoints()
        # a LoRA checkpoint names the full model it adapts, which may be an earlier stage's checkpoint: kept with it
        bases = {base.resolve() for c in checkpoints[-keep:] if (base := adapter_base(c.path)) is not None}
        for old in checkpoints[:-keep]:
            if old.path.resolve() not in bases:
                shutil.rmtree(old.path, ignore_errors=True)


def config_hash(data: dict) -> str:
    """sha256 of the config's canonical JSON."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
