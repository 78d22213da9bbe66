"""One stage of a run on Ray: set up its roles, drive them with its mode's loop, checkpoint.

The driver only orchestrates; experiences flow explorer -> buffer -> trainer and weights flow
trainer -> engines without passing through it (the synchronizer, which starts the weights' calls,
lives in the driver). The scheduler (scheduler.py) decides which call
comes next; every call is watched (calls.py): a role that raises or dies ends the stage at once
with that role's error.
"""

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import sync_methods
from ..config.algorithms.queries import data_kind, needs_rollout
from ..config.modes import mode
from ..config.schema import RunConfig
from ..errors import ConfigError, Issue
from . import lora
from .calls import Calls, RayCalls, RoleFailed
from .explorer import batch_metrics
from .metrics import MetricsLog
from .progress import Progress, StageSummary
from .protocols import EvalRecord, ExploreResult, TrainResult
from .roles import peak_rss_mb
from .run_dir import Checkpoint, RunDir
from .schedule import SyncPolicy
from .scheduler import EVALUATE, EXPLORE, SYNC, TRAIN, Call, Scheduler, Stalled
from .sync import files
from .sync.synchronizer import Synchronizer

DRIVER = "driver"  # the run's own process, beside the roles in a stage's peak memory
SERVE_POLL_S = 0.5  # serve mode: how often the stage takes the engines' rewarded experiences and published weights


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
class RoleHandles:
    """The stage's actors: by name (plan order), and by `ActorSpec.role` in rank order."""

    actors: dict[str, Any]
    roles: dict[str, list] = field(default_factory=dict)

    @classmethod
    def of(cls, specs: list, actors: dict[str, Any]) -> "RoleHandles":
        """Group `actors` (name -> handle) by their specs' role, each role's in rank order."""
        roles: dict[str, list] = {}
        for spec in sorted(specs, key=lambda s: s.rank):
            roles.setdefault(spec.role, []).append(actors[spec.name])
        return cls(actors, roles)

    def all(self, role: str) -> list:
        """Every actor of `role` (trainer ranks, engine slots), in rank order."""
        return self.roles.get(role, [])

    def one(self, role: str) -> Any:
        """The single actor of `role` (explorer, buffer), or None when the mode has none."""
        found = self.all(role)
        return found[0] if found else None


class Stage:
    """Runs one stage's config with the actors a Launch started."""

    def __init__(
        self,
        config: RunConfig,
        name: str | None,
        index: int,
        run_dir: RunDir,
        metrics: MetricsLog,
        start: StageStart,
        quiet: bool,
    ):
        self.config, self.name, self.index = config, name, index
        self.run_dir, self.metrics, self.start, self.quiet = run_dir, metrics, start, quiet
        self.mode = mode(config.mode)
        self.summary = StageSummary(name or "run", config.mode)
        self.last_checkpoint: Checkpoint | None = None
        self.device_holder = "rollout"  # sharing devices (colocate): who has them now

    # --- setting up ----------------------------------------------------------------------------------

    def setup(self, handles: RoleHandles, calls: Calls | None = None) -> None:
        """Set up every role (heavy work: models, data, groups), then learn the stage's length.

        `calls` watches the calls in flight: RayCalls over `handles` unless a test gives its own."""
        self.handles, self.calls = handles, calls or RayCalls(handles.actors, self.run_dir.logs)
        self.driver_calls = self._counted = 0  # the driver's calls to role actors: all, and when the last step ended
        self.ranks, self.engines = handles.all("trainer"), handles.all("rollout")
        self.explorer, self.buffer = handles.one("explorer"), handles.one("buffer")
        self.synchronizer = Synchronizer(self.config, self.run_dir.root, self.call) if self.mode.syncs else None
        resume = self.start.resume
        weights, self.engines_behind = self._engine_start(resume)
        version = self.start.offset + self.start.done
        if self.buffer:
            self.data_size = self._setup_buffer(resume)
        rollout = [e.setup.remote(weights, version) for e in self.engines]
        if self.explorer:
            rollout.append(self.explorer.setup.remote(self.engines, self.buffer, weights))
        # the trainer sets up beside the rollout side, unless it needs the explorer's count of tasks, or shares the
        # devices (an engine sizes its memory from what the device has free as it starts)
        if self._steps_from_tasks() or self.mode.shares_devices:
            self.call(rollout)
            rollout = []
        self.total = self._total()
        self.call(rollout + (self._setup_ranks(resume) if self.ranks else []))
        if self.synchronizer:
            self.synchronizer.setup(self.ranks, self.engines)
        self.endpoints = self._endpoints()

    def _endpoints(self) -> list[str]:
        """The engines' OpenAI endpoints, written to the run directory for agents outside the run (none: [])."""
        if not self.engines or not self.config.explorer.rollout_model.enable_openai_api:
            return []
        urls = list(dict.fromkeys(self.call([e.openai_url.remote() for e in self.engines])))  # parts share the head's
        self.run_dir.write_endpoints(self.summary.name, self.config.explorer.rollout_model, urls)
        return urls

    def _setup_ranks(self, resume: Checkpoint | None) -> list:
        """Start every trainer rank's setup (verl's worker: model, optimizer, the resumed state); returns the calls."""
        host, port = self.call([self.ranks[0].rendezvous.remote()])[0]
        state = str(resume.path) if resume else None
        return [r.setup.remote(host, port, self.start.model_path, self.total, self.buffer, state) for r in self.ranks]

    def _engine_start(self, resume: Checkpoint | None) -> tuple[str, bool]:
        """What the engines load, and whether the trainer's weights must reach them by a sync before their first step:
        they load the stage's model (or, holding merged weights, an adapter's base) while the trainer resumes its own
        state."""
        hf = bool(resume) and lora.engine_file(resume.path, self.config) is not None
        weights, behind = lora.engine_start(str(resume.path) if hf else self.start.model_path, self.config)
        if behind and not self.mode.trains:  # no trainer to hand them base + adapter: they would run the base
            message = (
                f"the engines hold merged weights and {self.start.model_path} is an adapter without its merged "
                f"model; mode {self.config.mode!r} has no trainer to sync them base + adapter"
            )
            hint = "set synchronizer.lora_sync: adapter, or save the merged model (trainer.save_merged_model)"
            raise ConfigError([Issue(message, key="synchronizer.lora_sync", source="the run config", hint=hint)])
        return weights, behind or (bool(resume) and not hf)

    def _setup_buffer(self, resume: Checkpoint | None) -> int:
        """The buffer's store (an SFT data set, or the experience queue); returns how many samples it holds."""
        rollout = self.config.explorer.rollout_model
        data = data_kind(self.config.algorithm.algorithm_type)
        sft = {"tokenizer": self.start.model_path, "seed": rollout.seed, "model": self.config.model, "data": data}
        info = self.call([self.buffer.setup.remote(None if self._rl() else sft)])[0]
        if resume:
            self.call([self.buffer.rewind.remote(self.start.done)])
        return info.get("samples", 0)

    def _rl(self) -> bool:
        return needs_rollout(self.config.algorithm.algorithm_type)

    def _steps_from_tasks(self) -> bool:
        """Whether the stage's length is epochs over the explorer's tasks (known once the explorer is set up)."""
        return bool(self.explorer) and not self._explicit_steps() and not self.mode.evaluates_checkpoints

    def _explicit_steps(self) -> int | None:
        return self.config.trainer.total_steps or self.config.buffer.total_steps

    def _total(self) -> int:
        """Steps of this stage: trainer.total_steps, else buffer.total_steps, else total_epochs passes over the data."""
        explicit = self._explicit_steps()
        if self.mode.serves:
            return explicit or 0  # 0: until stopped
        if self.mode.evaluates_checkpoints:
            return max(1, len(self.run_dir.complete_checkpoints()))
        if explicit:
            return explicit
        if self.explorer:
            per_epoch = self.call([self.explorer.steps_per_epoch.remote()])[0]
        else:
            per_epoch = max(1, -(-self.data_size // self.config.buffer.train_batch_size))
        return per_epoch * self.config.buffer.total_epochs

    # --- running ---------------------------------------------------------------------------------------

    def run(self) -> StageSummary:
        """Drive the stage to its last step with the loop its mode names; returns what it did."""
        started = time.monotonic()
        self.progress = Progress(self.summary.name, self.total, self.quiet)
        self.progress.update(self.start.done)
        self._counted = self.driver_calls  # a step's count leaves the setup's calls out
        loops = {
            "both": self._both,
            "explore": self._explore_only,
            "train": self._train_only,
            "bench": self._bench,
            "serve": self._serve,
        }
        loops[self.mode.loop]()
        self.progress.close()
        self.summary.steps = self.total or self.progress.step  # serve mode without total_steps: what it served
        self.summary.seconds = time.monotonic() - started
        return self.summary

    def scheduler(self) -> Scheduler:
        """The explore/train/sync/evaluate order of this stage, from its config."""
        sync, explorer = self.config.synchronizer, self.config.explorer
        return Scheduler(
            SyncPolicy(sync.sync_style, sync.sync_interval, sync.sync_offset),
            self.total,
            self.start.done,
            shared=self.mode.shares_devices,
            batch_size=self.config.buffer.train_batch_size,
            eval_interval=explorer.eval_interval,
            sync_first=self.engines_behind,  # resumed from a checkpoint without Hugging Face weights
            eval_first=explorer.eval_on_startup,
        )

    def _both(self) -> None:
        """Explore and train in the order the scheduler gives, watching every call until all are done."""
        schedule = self.scheduler()
        while not schedule.finished_all:
            try:
                calls = schedule.next_calls()
            except Stalled as exc:
                raise RoleFailed(f"{self.config.mode} {exc}") from None
            for call in calls:
                schedule.started(call)
                if call.kind in (EXPLORE, TRAIN):
                    self._start_step(call)
                    continue
                # a sync or an evaluation: the stage waits for it before it asks for the next call
                if call.kind == SYNC:
                    self._sync(call.step)
                else:
                    self._evaluate(self.start.offset + call.step)
                schedule.finished(call)
            if schedule.running and not any(c.kind in (SYNC, EVALUATE) for c in calls):
                for kind, results in self.calls.next_done():
                    self._step_done(schedule, schedule.running[kind], results[0])

    def _step_done(self, schedule: Scheduler, call: Call, result: dict) -> None:
        """Record a finished explore or train step and tell the scheduler."""
        if call.kind == EXPLORE:
            schedule.finished(call, result["experiences"])
            self._explored(call.step, result)
        else:
            schedule.finished(call)
            self._trained(call.step, result)

    def _start_step(self, call: Call) -> None:
        """Start an explore step (on the engines) or a train step (on every rank); the stage does not wait."""
        if call.kind == EXPLORE:
            self._share_devices("rollout", call.step)
            self.start_call(EXPLORE, [self.explorer.explore_step.remote(call.step)])
        else:
            self._share_devices("trainer", call.step)
            self.start_call(TRAIN, [r.train_step.remote(call.step) for r in self.ranks])

    def _share_devices(self, holder: str, step: int) -> None:
        """Sharing devices: give them to `holder` for `step` (the engines sleep while the trainer steps); each
        handoff is a metrics record."""
        if not self.mode.shares_devices or self.device_holder == holder:
            return
        started = time.perf_counter()
        wake = holder == "rollout"
        kept = {}
        if wake:  # the trainer's cached blocks go back to the device before the engines map theirs again
            reserved = self.call([r.hand_back_device_memory.remote() for r in self.ranks])
            kept = {"trainer_reserved_mib": max(reserved, default=0.0)}
        asleep = self.call([e.wake_up.remote() if wake else e.sleep.remote() for e in self.engines])
        self.device_holder = holder
        seconds = time.perf_counter() - started
        self.metrics.write(
            "devices",
            self.start.offset + step,
            self.name,
            holder=holder,
            engines_asleep=sum(asleep),
            seconds=seconds,
            **kept,
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
            result = self.call([self.explorer.explore_step.remote(explored + 1)])[0]
            explored += 1
            self._explored(explored, result)
        self._evaluate(self._take_published(version))

    def _serve(self) -> None:
        """Answer agents outside the run on the engines' endpoints, until buffer.total_steps steps of
        buffer.batch_size rewarded experiences (none: until stopped): /feedback's experiences are stored a step at a
        time, and the weights a `train` run publishes are taken between polls."""
        served, version, pending = self.start.done, self.start.offset + self.start.done, []
        size, started = self.config.buffer.batch_size, time.perf_counter()
        try:
            while not self.total or served < self.total:
                version = self._take_published(version)
                pending += self._rewarded(final=False)
                while len(pending) >= size and (not self.total or served < self.total):
                    served, step, pending = served + 1, pending[:size], pending[size:]
                    self._store(step, served)
                    result = batch_metrics(step, time.perf_counter() - started) | {"tasks": 0, "engine_calls": 0}
                    self._explored(served, result)
                    started = time.perf_counter()
                time.sleep(SERVE_POLL_S)
        finally:  # rewards already acknowledged are stored, also when the run is stopped
            self._store(pending + self._rewarded(final=True), served + 1)

    def _rewarded(self, final: bool) -> list:
        """The engines' newly rewarded experiences; `final`: /feedback takes no more after these."""
        return [e for taken in self.call([e.take_experiences.remote(final) for e in self.engines]) for e in taken]

    def _store(self, experiences: list, step: int) -> None:
        """Store experiences in the buffer as explore step `step`'s."""
        for exp in experiences:
            exp.step = step
        if experiences:
            self.call([self.buffer.put.remote(experiences)])

    def _train_only(self) -> None:
        """Train from the buffer (a data set for SFT; experiences an `explore` run writes, for RL)."""
        trained = self.start.done
        channel = sync_methods.method(self.config.synchronizer.sync_method).channel
        publishes = self._rl() and channel == sync_methods.FILES  # an explore run of this directory picks them up
        while trained < self.total:
            results = self.call([r.train_step.remote(trained + 1) for r in self.ranks])
            trained += 1
            self._trained(trained, results[0])
            if publishes and trained % self.config.synchronizer.sync_interval == 0:
                self._publish(self.start.offset + trained)

    def _bench(self) -> None:
        """Evaluate every complete checkpoint of this run (or the model itself when there is none)."""
        saved = self.run_dir.complete_checkpoints()
        refused = [f"{c.path.name}: {why}" for c in saved if (why := lora.mismatch(c.path, self.config))]
        if refused:
            raise ConfigError(
                [
                    Issue(
                        f"bench cannot evaluate {len(refused)} checkpoint(s) of this run: {'; '.join(refused)}",
                        key="synchronizer.lora_sync",
                        source="the run config",
                        hint="bench with the model.lora_configs and synchronizer.lora_sync the run trained with",
                    )
                ]
            )
        files = [(c, lora.engine_file(c.path, self.config)) for c in saved]
        checkpoints = [(c, f) for c, f in files if f is not None]
        if not checkpoints:
            self._evaluate(0)
        for done, (checkpoint, file) in enumerate(checkpoints, 1):
            weights = str(file)
            self.call([e.load_weights.remote(weights, checkpoint.global_step) for e in self.engines])
            self._evaluate(checkpoint.global_step)
            self.progress.update(done)

    # --- one step's bookkeeping ------------------------------------------------------------------------------

    def _explored(self, step: int, result: ExploreResult) -> None:
        self.metrics.write("explorer", self.start.offset + step, self.name, **_flat(result, ExploreResult))
        self.summary.reward = result["reward_mean"]
        if not self.mode.trains:
            self.progress.update(step, reward=result["reward_mean"], tok_s=result["tokens_per_s"])
        else:
            self.progress.fields.update(reward=f"{result['reward_mean']:.3g}", tok_s=f"{result['tokens_per_s']:.3g}")

    def _trained(self, step: int, result: TrainResult) -> None:
        # the NotRequired ones (logprob_diff, kl_penalty) only where the trainer computed them
        optional = TrainResult.__optional_keys__
        values = {k: result.get(k) for k in TrainResult.__annotations__ if k in result or k not in optional}
        # since the step before: this step's explore, train and sync calls (and any evaluation or checkpoint)
        values["driver_calls"], self._counted = self.driver_calls - self._counted, self.driver_calls
        self.metrics.write("trainer", self.start.offset + step, self.name, **values)
        self.progress.update(step, loss=result.get("loss"))
        every = self.config.trainer.save_interval
        if every and step % every == 0 and step < self.total:
            self._checkpoint(step)

    def _sync(self, trained: int) -> None:
        # sharing devices: the engines take the new weights awake, as they then generate
        self._share_devices("rollout", trained)
        version = self.start.offset + trained
        result = self.synchronizer.sync(version)
        method, seconds = result["method"], result["seconds"]
        self.metrics.write("synchronizer", version, self.name, method=method, seconds=seconds, weight_version=version)
        self.progress.update(trained, sync_s=seconds)

    def _evaluate(self, version: int) -> None:
        if not self.explorer or not self.config.buffer.explorer_input.eval_tasksets:
            return
        self._share_devices("rollout", version - self.start.offset)
        records: list[EvalRecord] = self.call([self.explorer.evaluate.remote(version)])[0]
        for record in records:
            self.metrics.write("eval", version, self.name, **_flat(record, EvalRecord))
            self.summary.eval_first.setdefault(record["taskset"], record["accuracy"])
            self.summary.eval_last[record["taskset"]] = record["accuracy"]

    def _publish(self, version: int) -> None:
        """Write the trainer's weights where an `explore` run of this project/name picks them up."""
        path = files.published_file(self.run_dir.root)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.call([r.write_weights.remote(str(path), version) for r in self.ranks])

    def _take_published(self, version: int) -> int:
        published = files.published_version(self.run_dir.root)
        if published is None or published <= version:
            return version
        path = str(files.published_file(self.run_dir.root))
        started = time.perf_counter()
        self.call([e.load_weights.remote(path, published) for e in self.engines])
        seconds = time.perf_counter() - started
        self.metrics.write(
            "synchronizer",
            published,
            self.name,
            method=sync_methods.CHECKPOINT,
            seconds=seconds,
            weight_version=published,
        )
        return published

    def finish(self) -> None:
        """Save the stage's last checkpoint (its weights start the next stage); note each role's peak memory (and the
        driver's), and each device peak a role reports."""
        if self.ranks:
            self.last_checkpoint = self._checkpoint(self.total)
        actors = self.handles.actors
        peaks = self.call([a.peak_rss_mb.remote() for a in actors.values()])
        self.summary.peak_rss_mb = dict(zip(actors, peaks)) | {DRIVER: peak_rss_mb()}
        devices = self.call([a.peak_device_mb.remote() for a in actors.values()])
        self.summary.peak_device_mb = {name: mb for name, mb in zip(actors, devices) if mb is not None}

    def _checkpoint(self, step: int) -> Checkpoint:
        # last: only the stage's last checkpoint, which starts the next stage
        policy = self.config.trainer.save_hf_checkpoint
        hf = policy == "always" or (policy == "last" and step == self.total)

        def fill(folder: Path) -> None:
            self.call([r.save.remote(str(folder), self.start.offset + step, hf) for r in self.ranks])

        draft = Checkpoint(
            Path(), self.start.offset + step, self.name or "", self.index, step, self.total, self.config.mode
        )
        saved = self.run_dir.save_checkpoint(draft, fill, self.config.trainer.max_actor_ckpt_to_keep)
        self.summary.checkpoint = str(saved.path)
        return saved

    def call(self, refs: list, timeout_s: float | None = None) -> list:
        """Wait for `refs` (each role's call), made in turn; a failed role raises RoleFailed at once (TimeoutError
        after `timeout_s`)."""
        self.driver_calls += len(refs)
        return self.calls.wait(refs, timeout_s)

    def start_call(self, kind: str, refs: list) -> None:
        """Start `refs` (each role's call) as one call of `kind`, not waiting for them."""
        self.driver_calls += len(refs)
        self.calls.start(kind, refs)


def _flat(result: ExploreResult | EvalRecord, kind: type) -> dict:
    """A role's result as its metrics line: the fields its protocol names (which win over a workflow metric of the
    same name), the workflows' own means beside them."""
    return result["workflow_metrics"] | {k: result[k] for k in kind.__annotations__ if k != "workflow_metrics"}
