"""One stage of a run on Ray: set up its roles, drive them with the loop its mode names (loops/), finish.

The driver only orchestrates; experiences flow explorer -> buffer -> trainer and weights flow trainer -> engines
without passing through it (the synchronizer, which starts the weights' calls, lives in the driver). Every call on
a role is watched (watcher.py): a role that raises or dies ends the stage at once with that role's error.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...config.algorithms.queries import data_kind, needs_rollout
from ...config.algorithms.sampling import batch_split
from ...config.modes import mode, trains_until_drained
from ...config.schema import RunConfig
from ...errors import ConfigError, Issue
from ...launch.plan import STEPS_GROUP, ActorSpec, auxiliary_models, auxiliary_slot, explorer_groups
from ...launch.roles import AUXILIARY, BUFFER, EXPLORER, ROLLOUT, TRAINER, role
from ..buffer.scope import Scope, scope_name
from ..records.metrics import MetricsLog
from ..records.progress import Progress, StageSummary
from ..records.run_dir import Checkpoint, RunDir
from ..roles.base import peak_rss_mb
from ..sync.synchronizer import Synchronizer
from ..weights import lora
from .device_handoff import DeviceHandoff
from .restarts import RestartBudget
from .watcher import RayWatcher, Watcher

DRIVER = "driver"  # the run's own process, beside the roles in a stage's peak memory
Handle = object  # a Ray actor handle (or a test's stand-in): its methods' `.remote` make the calls


@dataclass
class StageStart:
    """Where a stage starts: the weights it loads, the checkpoint it resumes (if any), and its numbering."""

    model_path: str
    offset: int  # global steps done before this stage
    resume: Checkpoint | None = None
    restarted: bool = False  # run again after a failure (stage_restart.py): what it consumed is given back

    @property
    def done(self) -> int:
        """Steps of this stage already done (a resumed checkpoint's)."""
        return self.resume.stage_step if self.resume else 0


@dataclass
class RoleHandles:
    """The stage's actors: by name (plan order), and by role (launch/roles.py) in rank order."""

    actors: dict[str, Handle]
    roles: dict[str, list[Handle]] = field(default_factory=dict)

    @classmethod
    def of(cls, specs: list[ActorSpec], actors: dict[str, Handle]) -> "RoleHandles":
        """Group `actors` (name -> handle) by their specs' role, each role's in rank order."""
        roles: dict[str, list[Handle]] = {}
        for spec in sorted(specs, key=lambda s: s.rank):
            roles.setdefault(spec.role, []).append(actors[spec.name])
        return cls(actors, roles)

    def all(self, name: str) -> list[Handle]:
        """Every actor of ranked role `name` (trainer ranks, engine slots), in rank order."""
        assert role(name).ranked, f"role {name} has one actor: ask one()"
        return self.roles.get(name, [])

    def one(self, name: str) -> Handle | None:
        """The actor of single role `name` (explorer, buffer), or None when the mode has none."""
        assert not role(name).ranked, f"role {name} has ranks: ask all()"
        found = self.roles.get(name, [])
        return found[0] if found else None


class Stage:
    """Runs one stage's config with the actors a Launch started: setup, the mode's loop, finish."""

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
        self.waiting = 0  # experiences in the buffer before the stage's first explore step (kept by a resume)
        self.proxy = None  # serve mode's proxy in front of the engines (rollout/proxy.py), while the stage runs
        self.engine_actors: list[list[int]] = []  # with a proxy: each of its engines' actors (indices of engines)
        # replacing a dead engine or explorer (restart.py): the run's budget, and how the launch starts a new actor
        self.budget: RestartBudget | None = None
        self.restart_actor: Callable[[str], Handle] | None = None

    # --- setting up ----------------------------------------------------------------------------------

    def setup(self, handles: RoleHandles, watcher: Watcher | None = None) -> None:
        """Set up every role (heavy work: models, data, groups), then learn the stage's length.

        `watcher` watches the calls in flight: a RayWatcher over `handles` unless a test gives its own."""
        self.handles, self.watcher = handles, watcher or RayWatcher(handles.actors, self.run_dir.logs)
        self.driver_calls = self.counted_calls = 0  # the driver's calls to role actors: all, and at the last step
        self.previews: list[dict] = []  # trainer.enable_preview: the rows not yet shown (step_results._preview)
        self.ranks, self.engines = handles.all(TRAINER), handles.all(ROLLOUT)
        self.explorer, self.buffer = handles.one(EXPLORER), handles.one(BUFFER)
        self.synchronizer = Synchronizer(self.config, self.run_dir.root, self.wait) if self.mode.syncs else None
        self.devices = DeviceHandoff(self)
        resume = self.start.resume
        weights, self.engines_behind = self._engine_start(resume)
        version = self.start.offset + self.start.done
        if self.buffer:
            self.data_size = self._setup_buffer(resume)
        self.engine_weights = weights  # what an engine loads as it starts (a replaced one too: restart.py)
        rollout = [e.setup.remote(weights, version) for e in self.engines]
        auxiliary = self._auxiliary(handles.all(AUXILIARY))
        # an auxiliary model's engines load its own model, once: no weight sync ever reaches them (version 0)
        rollout += [e.setup.remote(m.model_path, 0) for m, group in auxiliary for e in group]
        self.auxiliary_groups = [group for _, group in auxiliary]
        if self.explorer:
            rollout.append(self.setup_explorer(self.start.done))
        # the trainer sets up beside the rollout side, unless it needs the explorer's count of tasks, or shares the
        # devices (an engine sizes its memory from what the device has free as it starts)
        if self._steps_from_tasks() or self.mode.shares_devices:
            self.wait(rollout)
            rollout = []
        self.total = self._total()
        self.wait(rollout + (self._setup_ranks(resume) if self.ranks else []))
        if self.synchronizer:
            self.synchronizer.setup(self.ranks, self.engines)
        self.endpoints = self._endpoints()

    def setup_explorer(self, done: int) -> Any:
        """Start the explorer's setup (its engines, the buffer, its selectors given back the pass rates of steps 1 ..
        `done`); returns the call. A replaced explorer is set up the same way (restart.py)."""
        feedback = str(self.run_dir.selector_feedback(self.index))
        return self.explorer.setup.remote(
            self.engines, self.buffer, self.engine_weights, feedback, done, self.auxiliary_groups
        )

    def _auxiliary(self, engines: list[Handle]) -> list[tuple]:
        """(auxiliary model, its engines' actors in slot order) of each auxiliary model whose engines run: the role's
        actors in rank order are each model's slots in turn (launch/plan.py)."""
        models = auxiliary_models(self.config)
        groups: list[list[Handle]] = [[] for _ in models]
        for rank, engine in enumerate(engines):
            groups[auxiliary_slot(self.config, rank)[0]].append(engine)
        return list(zip(models, groups))

    def _endpoints(self) -> list[str]:
        """The engines' OpenAI endpoints, written to the run directory for agents outside the run (none: [])."""
        if not self.engines or not self.config.explorer.rollout_model.enable_openai_api:
            return []
        of_actors = self.wait([e.openai_url.remote() for e in self.engines])
        urls = list(dict.fromkeys(of_actors))  # parts share the head's
        if self.mode.serves:
            self._start_proxy(urls, of_actors)
        proxy = self.proxy.url if self.proxy else None
        self.run_dir.write_endpoints(self.summary.name, self.config.explorer.rollout_model, urls, proxy)
        return urls

    def _start_proxy(self, urls: list[str], of_actors: list[str]) -> None:
        """Serve mode: the proxy in front of the engines (explorer.listen_address:proxy_port)."""
        import ray

        from ..rollout import proxy

        self.engine_actors = [[i for i, u in enumerate(of_actors) if u == url] for url in urls]
        try:
            self.proxy = proxy.start(self.config, urls, self.run_dir.root, ray.util.get_node_ip_address())
        except OSError as exc:  # the address or port is taken, or not this machine's
            hint = "free that port, choose another (explorer.proxy_port; 0: any free one), or another listen_address"
            raise ConfigError(
                [Issue(str(exc), key="explorer.proxy_port", source="the run config", hint=hint)]
            ) from None

    def stop_proxy(self) -> None:
        """Stop the proxy, if one runs (its records stay in explorer.db_url)."""
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None

    def _setup_ranks(self, resume: Checkpoint | None) -> list:
        """Start every trainer rank's setup (verl's worker: model, optimizer, the resumed state); returns the calls."""
        host, port = self.wait([self.ranks[0].rendezvous.remote()])[0]
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
        """The buffer's store (an SFT data set, or the experience queue), set back to where the stage resumes where it
        trains (buffer/scope.py); returns how many samples it holds, and keeps how many experiences wait in it."""
        data = data_kind(self.config.algorithm.algorithm_type)
        sft = {"tokenizer": self.start.model_path, "model": self.config.model, "data": data}
        mode = self.mode
        does = {"explores": mode.explores_steps, "serves": mode.serves, "trains": mode.trains}
        name = scope_name(self.run_dir.run_id(), self.summary.name, does)
        scope = Scope(name, mode.explores_steps and mode.trains, batch_split(self.config)[0])  # rollouts a step reads
        trained = self.start.done if self.mode.trains else None
        resumed = bool(resume) or self.start.restarted
        info = self.wait(
            [self.buffer.setup.remote(None if self.learns_from_rollout() else sft, scope, trained, resumed)]
        )
        self.waiting = info[0].get("waiting", 0)
        return info[0].get("samples", 0)

    def learns_from_rollout(self) -> bool:
        """RL: the trainer learns from experiences (else from a data set: SFT, DPO)."""
        return needs_rollout(self.config.algorithm.algorithm_type)

    def _steps_from_tasks(self) -> bool:
        """Whether the stage's length is epochs over the explorer's tasks (known once the explorer is set up)."""
        return bool(self.explorer) and not self._explicit_steps() and not self.mode.evaluates_checkpoints

    def _explicit_steps(self) -> int | None:
        return self.config.trainer.total_steps or self.config.buffer.total_steps

    def _total(self) -> int:
        """Steps of this stage: trainer.total_steps, else buffer.total_steps, else total_epochs passes over the data;
        0 where that is not known before the run (serve mode, a train run of another run's experiences)."""
        explicit = self._explicit_steps()
        if self.mode.serves:
            return explicit or 0  # 0: until stopped
        if self.mode.evaluates_checkpoints:
            return max(1, len(self.run_dir.complete_checkpoints()))
        if explicit:
            return explicit
        if trains_until_drained(self.config):
            return 0  # until the experiences stop coming: loops/train.py sets it then
        if self.explorer:
            per_epoch = self.wait([self.explorer.steps_per_epoch.remote()])[0]
        else:
            per_epoch = max(1, -(-self.data_size // self.config.buffer.train_batch_size))
        return per_epoch * self.config.buffer.total_epochs

    # --- running ---------------------------------------------------------------------------------------

    def run(self, loop: Callable[["Stage"], None]) -> StageSummary:
        """Drive the stage to its last step with `loop` (the one its mode names: loops.loop); returns what it did."""
        started = time.monotonic()
        self.progress = Progress(self.summary.name, self.total, self.quiet)
        self.progress.update(self.start.done)
        self.counted_calls = self.driver_calls  # a step's count leaves the setup's calls out
        loop(self)
        self.progress.close()
        self.summary.steps = self.total or self.progress.step  # serve mode without total_steps: what it served
        self.summary.seconds = time.monotonic() - started
        return self.summary

    def reached(self) -> int:
        """The run's global step this stage has reached (where it resumed, before it runs)."""
        progress = getattr(self, "progress", None)  # set as the stage runs
        return self.start.offset + (progress.step if progress else self.start.done)

    def wait(self, refs: list, timeout_s: float | None = None) -> list:
        """Wait for `refs` (each a call on a role), made in turn; a failed role raises RoleFailed at once (TimeoutError
        after `timeout_s`)."""
        self.driver_calls += len(refs)
        return self.watcher.wait(refs, timeout_s)

    def on_explorer(self, method: str) -> Handle:
        """The explorer's remote `method`, called in its steps group where it has one (fully_async: explore steps and
        an evaluation run at once)."""
        call = getattr(self.explorer, method)
        return call.options(concurrency_group=STEPS_GROUP) if explorer_groups(self.config) else call

    def watch(self, kind: str, refs: list) -> None:
        """Start watching `refs` (each a call on a role) as one step of `kind`, not waiting for them."""
        self.driver_calls += len(refs)
        self.watcher.start(kind, refs)

    def record(self, role: str, step: int, **values: Any) -> None:
        """A metrics line of `role` at stage step `step` (numbered as the run's global steps)."""
        self.metrics.write(role, self.start.offset + step, self.name, **values)

    # --- finishing -------------------------------------------------------------------------------------

    def finish(self) -> None:
        """Save the stage's last checkpoint (its weights start the next stage); note each role's peak memory (and the
        driver's), and each device peak a role reports."""
        if self.ranks and self.total:  # 0: a train run whose experiences never came trained nothing
            self.last_checkpoint = self.checkpoint(self.total)
        actors = self.handles.actors
        peaks = self.wait([a.peak_rss_mb.remote() for a in actors.values()])
        self.summary.peak_rss_mb = dict(zip(actors, peaks)) | {DRIVER: peak_rss_mb()}
        devices = self.wait([a.peak_device_mb.remote() for a in actors.values()])
        self.summary.peak_device_mb = {name: mb for name, mb in zip(actors, devices) if mb is not None}

    def checkpoint(self, step: int) -> Checkpoint:
        """Save the trainer's state after stage step `step` in the run directory, whole or not at all."""
        # last: only the stage's last checkpoint, which starts the next stage
        policy = self.config.trainer.save_hf_checkpoint
        hf = policy == "always" or (policy == "last" and step == self.total)

        def fill(folder: Path) -> None:
            self.wait([r.save.remote(str(folder), self.start.offset + step, hf) for r in self.ranks])

        draft = Checkpoint(
            Path(), self.start.offset + step, self.name or "", self.index, step, self.total, self.config.mode
        )
        saved = self.run_dir.save_checkpoint(draft, fill, self.config.trainer.max_actor_ckpt_to_keep)
        self.summary.checkpoint = str(saved.path)
        return saved
