"""The experience buffer as a Ray actor: the explorer puts, trainer rank 0 takes, each once."""

import asyncio
from pathlib import Path
from typing import Any

from ...config.algorithms.queries import needs_rollout
from ...config.schema import RunConfig
from ...config.schema.buffer import ExperienceBufferConfig
from ...launch.plan import ActorSpec
from ..experience import Experience
from ..roles.base import Role
from . import replay, stores
from .scope import Scope

POLL_S = 0.2  # a store shared with another process (sql) is polled; in-process puts wake the waiter at once


class ExperienceBuffer(Role):
    """One storage type behind put/get; `get` waits for enough experiences, up to a timeout."""

    WARM = ("transformers.models.auto.tokenization_auto",)  # a data set's tokenizer

    @classmethod
    def plan_arguments(cls, config: RunConfig, spec: ActorSpec, run_dir: Path) -> dict[str, Any]:
        """The trainer's input storage (the experience queue unless set); a data set for what learns without
        rollout (SFT, DPO), as the stage's buffer setup decides."""
        storage = config.buffer.trainer_input.experiences
        data = not needs_rollout(config.algorithm.algorithm_type)
        return {"storage": storage, "run_dir": str(run_dir), "data_set": data}

    def __init__(
        self, *, storage: ExperienceBufferConfig, run_dir: str, data_set: bool = False, **identity: Any
    ) -> None:
        super().__init__(**identity)
        self.storage, self.run_dir, self.data_set = storage, Path(run_dir), data_set
        self.store = None
        self.changed = asyncio.Event()
        self.stale = 0  # experiences dropped as too old (sample strategy staleness_control)
        self.explored: set[int] = set()  # the stage's explore steps whose experiences were stored (one put a step)

    def warm(self) -> None:
        """The tokenizer's imports only for a stage that serves a data set: they hold torch, ~350 MiB."""
        if self.data_set:
            super().warm()

    def setup(
        self, sft: dict | None = None, scope: Scope | None = None, trained: int | None = None, resumed: bool = False
    ) -> dict:
        """Open the store; `sft` = {tokenizer path, model section, data kind} makes it serve a data set's
        samples instead (SFT samples, DPO pairs or raw text). `scope`: the stage that stores and reads through it;
        `trained`: where a stage that trains resumes (the train steps its checkpoint holds, 0 from its start; None for
        a stage that does not train): a persisted store gives back and drops what scope.py says, and the explore steps
        it holds of the stage's are not stored again; `resumed`: the stage resumed from a checkpoint or restarted
        (rows consumed by no stage then count as its own)."""
        self.store = self._store(sft, scope)
        done = self.store.rewind(trained, resumed)
        self.explored = set(done.kept_steps)  # a stage numbers its explore steps from 1; kept ones are not stored again
        if done.given_back or done.dropped:
            self.log.info(
                "resumed after train step %d: %d experiences given back, %d of explore steps after it dropped "
                "(explored again)", trained, done.given_back, done.dropped,
            )  # fmt: skip
        return {
            "storage": self.storage.storage_type,
            "store": type(self.store).__name__,
            "samples": len(getattr(self.store, "samples", ())),
            "waiting": done.waiting,
            "given_back": done.given_back,
            "dropped": done.dropped,
        }

    def _store(self, sft: dict | None, scope: Scope | None) -> Any:
        storage = self.storage
        if sft is not None:
            return data_set(storage, sft)
        if storage.storage_type == "file":
            path = Path(storage.path) if storage.path else self.run_dir / f"{storage.name}.jsonl"
            return stores.JsonlFile(path, scope)
        if storage.storage_type == "sql" or (storage.path or "").startswith(stores.SQLITE_PREFIX):
            store = stores.SqliteStore(
                stores.sqlite_path(storage.path or f"{stores.SQLITE_PREFIX}{storage.name}.db", self.run_dir),
                (storage.max_retry_times, storage.max_retry_interval),
                scope=scope,
            )
            return store if storage.storage_type == "sql" else stores.MemoryQueue(store)
        if storage.replay_buffer.enable:  # served by priority (derive/replay.py: only the in-memory queue)
            return replay.ReplayQueue.of(storage)
        return stores.MemoryQueue()

    def put(self, experiences: list[Experience], step: int | None = None) -> int:
        """Store experiences; returns how many were stored. `step`: the explore step they are (the explorer's put):
        a step stored already is not stored again, so each is stored once even when an explorer that died after its
        put was taken, before the call returned, is replaced and the step runs again."""
        if step in self.explored:
            self.log.warning("explore step %d was stored already: its experiences of a second run are not", step)
            return 0
        self.store.add(experiences, step)
        if step is not None:
            self.explored.add(step)  # once stored: a put that failed stores nothing, and its step's next run does
        self.changed.set()
        return len(experiences)

    async def get(
        self, n: int, step: int, timeout_s: float, min_version: int = 0, until_drained: bool = False
    ) -> list[Experience] | None:
        """`n` experiences for train step `step`, none made by weights older than `min_version` (older ones are
        dropped and counted in `stale`); when they do not come within `timeout_s` (the experience buffer's
        max_read_timeout), None if the reader reads `until_drained` (that is its end), else a TimeoutError."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if min_version > 0:
                self.stale += self.store.drop_stale(min_version, step)
            taken = self.store.take(n, step)
            if taken:
                return taken
            left = deadline - loop.time()
            if left <= 0 and until_drained:
                return None
            if left <= 0:
                raise TimeoutError(
                    f"the buffer had fewer than {n} experiences for train step {step} after {timeout_s:g} s "
                    "(buffer.trainer_input.experience_buffer.max_read_timeout): the workflows returned fewer "
                    "experiences than a train step takes (buffer.train_batch_size), or took longer; raise "
                    "max_read_timeout for slow workflows"
                )
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), timeout=min(POLL_S, left))
            except TimeoutError:
                pass

    def dropped(self) -> int:
        """Experiences dropped as too old so far."""
        return self.stale


def data_set(storage: Any, sft: dict) -> stores.DataSet:
    """A local data set's rows, checked for the columns `sft["data"]` reads, tokenised and read through its
    data_selector (stores.DataSet)."""
    from transformers import AutoTokenizer

    from ..data.prompts import check_columns
    from ..data.tasksets import load_rows

    rows = load_rows(storage.path, storage.split, storage.subset_name)
    if not rows:
        raise ValueError(f"data set {storage.name}: {storage.path} (split {storage.split!r}) has no rows")
    check_columns(f"data set {storage.name}", storage.format, rows[0], sft["data"])
    model = sft["model"]
    tokenizer = AutoTokenizer.from_pretrained(sft["tokenizer"], trust_remote_code=model.trust_remote_code)
    try:
        return stores.DataSet(
            rows, storage.format, tokenizer, storage.data_selector, model.custom_chat_template, sft["data"]
        )
    except ValueError as exc:
        raise ValueError(f"data set {storage.name}: {exc}") from None
