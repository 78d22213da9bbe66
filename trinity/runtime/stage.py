"""One stage of a run on Ray: start its roles, set them up, drive them by mode, checkpoint, tear down.

The driver only orchestrates; experiences flow explorer -> buffer -> trainer and weights flow
trainer -> engines without passing through it. Every call it waits on is watched: a role that
raises or dies ends the stage at once with that role's error.
"""

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .metrics import MetricsLog
from .progress import Progress, StageSummary
from .run_dir import Checkpoint, RunDir
from .schedule import SyncPolicy

WAIT_S = 1.0  # how often the driver looks at its outstanding calls


class RoleFailed(RuntimeError):
    """A role actor raised or died; the message names it and carries its error."""


@dataclass
class StageStart:
    """Where a stage starts: the weights it loads, the checkpoint it resumes (if any), and its numbering."""

    model_path: str
    offset: int  # global steps done before this stage
    resume: Checkpoint | None = None

    @property
    def done(self) -> int:
        """Steps of this stage already done (a resumed checkpoint's)."""
        return self.resume.stage_step if self.resume else 0


@dataclass
class _Calls:
    """Outstanding calls: ref -> (kind, actor name)."""

    refs: dict = field(default_factory=dict)

    def add(self, kind: str, actor: str, refs: list) -> None:
        for ref in refs:
            self.refs[ref] = (kind, actor)

    def busy(self, kind: str) -> bool:
        return any(k == kind for k, _ in self.refs.values())


class Stage:
    """Runs one stage's config with the actors a Launch started."""

    def __init__(
        self,
        config: Any,
        name: str | None,
        index: int,
        run_dir: RunDir,
        metrics: MetricsLog,
        start: StageStart,
        quiet: bool,
        timeout_s: float,
    ):
        self.config, self.name, self.index = config, name, index
        self.run_dir, self.metrics, self.start, self.quiet, self.timeout_s = run_dir, metrics, start, quiet, timeout_s
        self.summary = StageSummary(name or "run", config.mode)
        self.calls = _Calls()
        self.last_checkpoint: Checkpoint | None = None
        self.shared = config.mode == "colocate"  # trainer ranks and engines on the same devices, in turn
        self.device_holder = "rollout"
        self.gathered = 0  # experiences the explore steps of this stage wrote

    # --- setting up ----------------------------------------------------------------------------------

    def setup(self, actors: dict) -> None:
        """Set up every role (heavy work: models, data, groups), then learn the stage's length."""
        self.actors = actors
        self.ranks = [a for n, a in actors.items() if n.startswith("trainer_")]
        self.engines = [a for n, a in actors.items() if n.startswith("rollout.")]
        self.explorer, self.buffer, self.synchronizer = (
            actors.get("explorer"),
            actors.get("buffer"),
            actors.get("synchronizer"),
        )
        resume = self.start.resume
        hf = bool(resume) and (resume.path / "model.safetensors").exists()
        weights = str(resume.path) if hf else self.start.model_path
        self.engines_behind = bool(resume) and not hf  # they load the stage's model; the trainer resumes its own state
        version = self.start.offset + self.start.done
        if self.buffer:
            sft = (
                {
                    "tokenizer": self.start.model_path,
                    "seed": self.config.explorer.rollout_model.seed,
                    "model": self.config.model,
                }
                if not self._rl()
                else None
            )
            info = self.call("buffer", [self.buffer.setup.remote(sft)])[0]
            if resume:
                self.call("buffer", [self.buffer.rewind.remote(self.start.done)])
            self.data_size = info.get("samples", 0)
        self.call("rollout", [e.setup.remote(weights, version) for e in self.engines])
        if self.explorer:
            self.call("explorer", [self.explorer.setup.remote(self.engines, self.buffer, weights)])
        self.total = self._total()
        if self.ranks:
            host, port = self.call("trainer", [self.ranks[0].rendezvous.remote()])[0]
            state = str(resume.path) if resume else None
            self.call(
                "trainer",
                [r.setup.remote(host, port, self.start.model_path, self.total, self.buffer, state) for r in self.ranks],
            )
        if self.synchronizer:
            self.call("synchronizer", [self.synchronizer.setup.remote(self.ranks, self.engines)])

    def _rl(self) -> bool:
        from ..config.algorithms import ALGORITHMS

        return ALGORITHMS[self.config.algorithm.algorithm_type].needs_rollout

    def _total(self) -> int:
        """Steps of this stage: trainer.total_steps, else buffer.total_steps, else total_epochs passes over the data."""
        explicit = self.config.trainer.total_steps or self.config.buffer.total_steps
        if self.config.mode == "bench":
            return max(1, len(self.run_dir.complete_checkpoints()))
        if explicit:
            return explicit
        if self.explorer:
            per_epoch = self.call("explorer", [self.explorer.steps_per_epoch.remote()])[0]
        else:
            per_epoch = max(1, -(-self.data_size // self.config.buffer.train_batch_size))
        return per_epoch * self.config.buffer.total_epochs

    # --- running ---------------------------------------------------------------------------------------

    def run(self) -> StageSummary:
        """Drive the stage to its last step; returns what it did."""
        started = time.monotonic()
        self.progress = Progress(self.summary.name, self.total, self.quiet)
        self.progress.update(self.start.done)
        loop = {
            "both": self._both,
            "colocate": self._both,
            "explore": self._explore_only,
            "train": self._train_only,
            "bench": self._bench,
        }[self.config.mode]
        loop()
        self.progress.close()
        self.summary.steps = self.total
        self.summary.seconds = time.monotonic() - started
        return self.summary

    def _both(self) -> None:
        sync = self.config.synchronizer
        policy = SyncPolicy(sync.sync_style, sync.sync_interval, sync.sync_offset)
        explored = trained = self.start.done
        engine_version, last_asked = trained, trained
        if self.engines_behind:  # resumed from a checkpoint without Hugging Face weights (save_hf_checkpoint: last)
            self._sync(trained)
        if self.config.explorer.eval_on_startup:
            self._evaluate(self.start.offset + trained)
        while trained < self.total:
            due = policy.sync_due(trained, engine_version, explored, last_asked)
            if due and not self.calls.refs:  # both sides are between steps: the engines get exactly version `trained`
                engine_version, last_asked = self._sync(trained), explored
                continue
            if (
                not due
                and self._free("explore", "train")
                and explored < self.total
                and policy.may_explore(explored + 1, engine_version, trained)
            ):
                self._share_devices("rollout", explored + 1)
                self.calls.add("explore", "explorer", [self.explorer.explore_step.remote(explored + 1)])
            if not due and self._free("train", "explore") and trained < explored and self._batch_ready(trained):
                self._share_devices("trainer", trained + 1)
                self.calls.add("train", "trainer", [r.train_step.remote(trained + 1) for r in self.ranks])
            if not due and not self.calls.refs:
                raise RoleFailed(self._stalled(explored, trained))
            for kind, results in self._next_done():
                if kind == "explore":
                    explored += 1
                    self.gathered += results[0]["experiences"]
                    self._explored(explored, results[0])
                    if explored % self.config.explorer.eval_interval == 0 and explored < self.total:
                        self._evaluate(self.start.offset + engine_version)
                else:
                    trained += 1
                    self._trained(trained, results[0])
        if engine_version < trained:
            engine_version = self._sync(trained)
        self._evaluate(self.start.offset + engine_version)

    def _batch_ready(self, trained: int) -> bool:
        """Colocate: whether the buffer holds the next train batch (a train step waiting for more would hold the
        devices while no explore step can run); elsewhere the explorer keeps filling it beside the trainer."""
        return not self.shared or self._buffered(trained) >= self.config.buffer.train_batch_size

    def _buffered(self, trained: int) -> int:
        """Experiences this stage's explore steps wrote that its train steps have not taken yet."""
        return self.gathered - (trained - self.start.done) * self.config.buffer.train_batch_size

    def _stalled(self, explored: int, trained: int) -> str:
        batch, left = self.config.buffer.train_batch_size, self._buffered(trained)
        return (
            f"colocate stalled after explore step {explored}: the buffer holds {left} experiences, fewer than "
            f"buffer.train_batch_size={batch}, "
            f"and the next explore step waits for the weights of train step {trained + 1}; set "
            "buffer.train_batch_size to at most "
            "buffer.batch_size x algorithm.repeat_times, or let the explorer run ahead (synchronizer.sync_offset)"
        )

    def _free(self, kind: str, other: str) -> bool:
        """Whether a call of `kind` may start: none running, and none of `other` when they share devices (colocate)."""
        return not self.calls.busy(kind) and not (self.shared and self.calls.busy(other))

    def _share_devices(self, holder: str, step: int) -> None:
        """Colocate: give the shared devices to `holder` for `step` (the engines sleep while the trainer steps); each
        handoff is a metrics record."""
        if not self.shared or self.device_holder == holder:
            return
        started = time.perf_counter()
        wake = holder == "rollout"
        asleep = self.call("rollout", [e.wake_up.remote() if wake else e.sleep.remote() for e in self.engines])
        self.device_holder = holder
        self.metrics.write(
            "devices",
            self.start.offset + step,
            self.name,
            holder=holder,
            engines_asleep=sum(asleep),
            seconds=time.perf_counter() - started,
        )

    def _explore_only(self) -> None:
        """Explore without a trainer here; with checkpoint sync, take the weights a `train` run publishes."""
        explored = self.start.done
        version = self.start.offset + explored
        if self.config.explorer.eval_on_startup:
            self._evaluate(version)
        while explored < self.total:
            if explored % self.config.synchronizer.sync_interval == 0:
                version = self._take_published(version)
            result = self.call("explore", [self.explorer.explore_step.remote(explored + 1)])[0]
            explored += 1
            self._explored(explored, result)
        self._evaluate(self._take_published(version))

    def _train_only(self) -> None:
        """Train from the buffer (a data set for SFT; experiences an `explore` run writes, for RL)."""
        trained = self.start.done
        while trained < self.total:
            results = self.call("train", [r.train_step.remote(trained + 1) for r in self.ranks])
            trained += 1
            self._trained(trained, results[0])
            if (
                self._rl()
                and self.config.synchronizer.sync_method == "checkpoint"
                and trained % self.config.synchronizer.sync_interval == 0
            ):
                self._publish(self.start.offset + trained)

    def _bench(self) -> None:
        """Evaluate every complete checkpoint of this run (or the model itself when there is none)."""
        checkpoints = [c for c in self.run_dir.complete_checkpoints() if (c.path / "model.safetensors").exists()]
        if not checkpoints:
            self._evaluate(0)
        for done, checkpoint in enumerate(checkpoints, 1):
            self.call(
                "rollout",
                [
                    e.load_weights.remote(str(checkpoint.path / "model.safetensors"), checkpoint.global_step)
                    for e in self.engines
                ],
            )
            self._evaluate(checkpoint.global_step)
            self.progress.update(done)

    # --- one step's bookkeeping ------------------------------------------------------------------------------

    def _explored(self, step: int, result: dict) -> None:
        values = {
            k: result[k]
            for k in (
                "reward_mean",
                "response_length_mean",
                "tokens_per_s",
                "weight_version",
                "experiences",
                "failed_tasks",
                "truncated_prompts",
                "seconds",
            )
        }
        self.metrics.write("explorer", self.start.offset + step, self.name, **values)
        self.summary.reward = result["reward_mean"]
        if self.config.mode != "both":
            self.progress.update(step, reward=result["reward_mean"], tok_s=result["tokens_per_s"])
        else:
            self.progress.fields.update(reward=f"{result['reward_mean']:.3g}", tok_s=f"{result['tokens_per_s']:.3g}")

    def _trained(self, step: int, result: dict) -> None:
        values = {k: result.get(k) for k in ("loss", "grad_norm", "lr", "experiences", "seconds")}
        if "logprob_diff" in result:  # only when the trainer recomputes the old log-probs
            values["logprob_diff"] = result["logprob_diff"]
        self.metrics.write("trainer", self.start.offset + step, self.name, **values)
        self.progress.update(step, loss=result.get("loss"))
        every = self.config.trainer.save_interval
        if every and step % every == 0 and step < self.total:
            self._checkpoint(step)

    def _sync(self, trained: int) -> int:
        # colocate: the engines take the new weights awake, as they then generate
        self._share_devices("rollout", trained)
        version = self.start.offset + trained
        result = self.call("sync", [self.synchronizer.sync.remote(version)])[0]
        self.metrics.write(
            "synchronizer",
            version,
            self.name,
            method=result["method"],
            seconds=result["seconds"],
            weight_version=version,
        )
        self.progress.update(trained, sync_s=result["seconds"])
        return trained

    def _evaluate(self, version: int) -> None:
        if not self.explorer or not self.config.buffer.explorer_input.eval_tasksets:
            return
        self._share_devices("rollout", version - self.start.offset)
        for record in self.call("eval", [self.explorer.evaluate.remote(version)])[0]:
            self.metrics.write(
                "eval",
                version,
                self.name,
                taskset=record["taskset"],
                accuracy=record["accuracy"],
                reward_mean=record["reward_mean"],
                tasks=record["tasks"],
            )
            self.summary.eval_first.setdefault(record["taskset"], record["accuracy"])
            self.summary.eval_last[record["taskset"]] = record["accuracy"]

    def _publish(self, version: int) -> None:
        """Write the trainer's weights where an `explore` run of this project/name picks them up."""
        folder = self.run_dir.root / "sync"
        folder.mkdir(parents=True, exist_ok=True)
        self.call("train", [r.write_weights.remote(str(folder / "published.safetensors"), version) for r in self.ranks])

    def _take_published(self, version: int) -> int:
        import json

        marker = self.run_dir.root / "sync" / "published.json"
        if not marker.exists():
            return version
        published = json.loads(marker.read_text())["version"]
        if published <= version:
            return version
        path = str(self.run_dir.root / "sync" / "published.safetensors")
        started = time.perf_counter()
        self.call("sync", [e.load_weights.remote(path, published) for e in self.engines])
        self.metrics.write(
            "synchronizer",
            published,
            self.name,
            method="checkpoint",
            seconds=time.perf_counter() - started,
            weight_version=published,
        )
        return published

    def finish(self) -> None:
        """Save the stage's last checkpoint (its weights start the next stage); note each role's peak memory."""
        if self.ranks:
            self.last_checkpoint = self._checkpoint(self.total)
        names = list(self.actors)
        self.summary.peak_rss_mb = dict(
            zip(names, self.call("resources", [a.peak_rss_mb.remote() for a in self.actors.values()]))
        )

    def _checkpoint(self, step: int) -> Checkpoint:
        # last: only the stage's last checkpoint, which starts the next stage
        policy = self.config.trainer.save_hf_checkpoint
        hf = policy == "always" or (policy == "last" and step == self.total)

        def fill(folder: Path) -> None:
            self.call("checkpoint", [r.save.remote(str(folder), self.start.offset + step, hf) for r in self.ranks])

        draft = Checkpoint(
            Path(), self.start.offset + step, self.name or "", self.index, step, self.total, self.config.mode
        )
        saved = self.run_dir.save_checkpoint(draft, fill, self.config.trainer.max_actor_ckpt_to_keep)
        self.summary.checkpoint = str(saved.path)
        return saved

    # --- waiting, with every failure named -----------------------------------------------------------------

    def call(self, kind: str, refs: list) -> list:
        """Wait for `refs` (each role's call) while watching every actor; returns their results."""
        self.calls.add(kind, kind, refs)
        pending = list(refs)
        while pending:
            _, pending = self._wait(pending)
        for ref in refs:
            self.calls.refs.pop(ref, None)
        return self._get(refs)

    def _next_done(self) -> list[tuple[str, list]]:
        """Wait until some outstanding kind of call has all its refs done; returns (kind, results) of each such kind."""
        while True:
            ready, _ = self._wait(list(self.calls.refs))
            finished = []
            for kind in {self.calls.refs[r][0] for r in ready}:
                mine = [r for r, (k, _) in self.calls.refs.items() if k == kind]
                if all(r in ready or _done(r) for r in mine):
                    finished.append((kind, self._get(mine)))
                    for r in mine:
                        self.calls.refs.pop(r)
            if finished:
                return finished

    def _wait(self, refs: list) -> tuple[list, list]:
        import ray

        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=WAIT_S)
        for ref in ready:
            self._get([ref])  # raises at once if that role failed
        return ready, pending

    def _get(self, refs: list) -> list:
        import ray

        try:
            return ray.get(refs)
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
            raise RoleFailed(self._who_failed(exc)) from None

    def _who_failed(self, exc: Exception) -> str:
        import ray

        pings = {name: actor.peak_rss_mb.remote() for name, actor in self.actors.items()}
        ready, _ = ray.wait(list(pings.values()), num_returns=len(pings), timeout=5)
        dead = [name for name, ref in pings.items() if ref not in ready or not _answers(ref)]
        cause = getattr(exc, "cause", None) or exc
        detail = str(cause).strip().splitlines()
        where = f"{', '.join(dead)} died" if dead else "a role failed"
        return f"{where}: {type(cause).__name__}: {detail[-1] if detail else ''}"


def _answers(ref: Any) -> bool:
    import ray

    try:
        ray.get(ref)
        return True
    except ray.exceptions.RayError:  # whatever stops an actor answering: it is the one to name
        return False


def _done(ref: Any) -> bool:
    import ray

    ready, _ = ray.wait([ref], timeout=0)
    return bool(ready)
