"""Stand-ins for Ray actor handles and for the stage's call watcher, to drive the real Stage in this process.

Ray itself runs in the launch and end-to-end tests. Here the stage's loop (which call comes next, what it
records, when the devices change hands) runs against role objects that keep the roles' protocols
(trinity.runtime.roles.protocols; tests/runtime/roles/test_protocols.py holds them to it). A call runs when the
watcher finishes it, in the order the test picks, as an actor's call would run later on Ray.
"""

import asyncio
import inspect
from dataclasses import dataclass, field
from pathlib import Path


class Ref:
    """A call made on a stand-in handle; it runs when the watcher finishes it."""

    def __init__(self, method, args, kwargs):
        self.method, self.args, self.kwargs = method, args, kwargs

    def result(self):
        value = self.method(*self.args, **self.kwargs)
        return asyncio.run(value) if inspect.iscoroutine(value) else value


class Handle:
    """`handle.method.remote(*args)` as on a Ray actor handle, over a plain object."""

    def __init__(self, role):
        self.role = role

    def __getattr__(self, name):
        method = getattr(self.role, name)
        return type("Method", (), {"remote": staticmethod(lambda *a, **kw: Ref(method, a, kw))})


class InlineWatcher:
    """The stage's call watcher (RayWatcher's interface) without Ray: `pick` chooses which started call ends next
    (None: every started call ends at once, as ray.wait can report several)."""

    def __init__(self, pick=lambda kinds: 0):
        self.pick, self.started = pick, []  # [(kind, refs)] in start order
        self.waits: list[list[str]] = []  # the methods of each call the stage waited on, in order: Engine.setup, ...

    def start(self, kind: str, refs: list) -> None:
        self.started.append((kind, refs))

    def wait(self, refs: list, timeout_s: float | None = None) -> list:
        self.waits.append([r.method.__qualname__ for r in refs])
        return [r.result() for r in refs]

    def next_done(self) -> list[tuple[str, list]]:
        if self.pick is None:
            done, self.started = self.started, []
            return [(kind, self.wait(refs)) for kind, refs in done]
        kind, refs = self.started.pop(self.pick([k for k, _ in self.started]))
        return [(kind, self.wait(refs))]


@dataclass
class World:
    """What the stand-in roles share: the engines' weights, whether they sleep, and every call in order."""

    experiences: int = 4  # per explore step
    version: int = 0
    asleep: bool = False  # some of the engines' memory sleeps
    asleep_memory: set = field(default_factory=set)  # which of it: weights, kv_cache
    log: list = field(default_factory=list)
    preview: bool = False  # train steps return preview rows, as with trainer.enable_preview
    buffer_setups: list = field(default_factory=list)  # (scope, trained, resumed) of each Buffer.setup
    waiting: int = 0  # experiences the buffer says wait as a stage sets up (a resume kept them)


class Explorer:
    def __init__(self, world: World):
        self.world = world

    def peak_rss_mb(self) -> float:
        return 1.0

    def peak_device_mb(self) -> float | None:
        return None

    def setup(
        self,
        engines: list,
        buffer,
        model_path: str,
        feedback: str | None = None,
        done: int = 0,
        auxiliary: list | None = None,
    ) -> dict:
        return {}

    def steps_per_epoch(self) -> int:
        return 3

    def replace_engines(self, engines: list, replaced: list[int]) -> None:
        self.world.log.append(("replace_engines", tuple(replaced)))

    def explore_step(self, step: int) -> dict:
        assert not self.world.asleep, "explored on sleeping engines"
        self.world.log.append(("explore", step, self.world.version))
        n = self.world.experiences
        return dict(
            reward_mean=0.5,
            response_length_mean=3.0,
            tokens_per_s=10.0,
            weight_version=self.world.version,
            tasks=4,
            experiences=n,
            failed_tasks=0,
            truncated_prompts=0,
            engine_calls=1,
            seconds=0.1,
            steps_in_flight=1,
            tasks_left_behind=0,
            workflow_metrics={"accuracy_mean": 0.5},
        )

    def evaluate(self, step: int) -> list[dict]:
        assert not self.world.asleep, "evaluated on sleeping engines"
        self.world.log.append(("evaluate", step, self.world.version))
        return [dict(taskset="eval", accuracy=step / 10, reward_mean=0.5, tasks=4, workflow_metrics={})]


class Trainer:
    def __init__(self, world: World, rank: int):
        self.world, self.rank = world, rank

    def peak_rss_mb(self) -> float:
        return 1.0

    def peak_device_mb(self) -> float | None:
        return None

    def rendezvous(self) -> tuple[str, int]:
        return "127.0.0.1", 0

    def setup(self, host: str, port: int, model_path: str, total_steps: int, buffer, resume: str | None = None) -> dict:
        return {}

    def train_step(self, step: int) -> dict | None:
        if self.rank == 0:
            self.world.log.append(("train", step, "asleep" if self.world.asleep else "awake"))
        if self.rank != 0:
            return None
        rows = [{"prompt": f"{step}+1=", "response": str(step + 1), "reward": 1.0}] if self.world.preview else None
        return dict(loss=1.0 / step, grad_norm=1.0, lr=1e-5, experiences=4, seconds=0.1) | (
            {"preview": rows} if rows else {}
        )

    def save(self, folder: str, step: int, hf: bool) -> None:
        if self.rank == 0:
            self.world.log.append(("save", step, hf))
            (Path(folder) / "trainer.pt").write_text(str(step))

    def write_weights(self, path: str, version: int) -> None:
        self.world.log.append(("publish", version))

    def join_sync_group(self, backend: str, host: str, port: int, world_size: int, timeout_s: float) -> None:
        pass

    def weight_specs(self) -> list:
        from trinity.runtime.rollout.base import WeightSpec

        # three pieces whatever synchronizer.sync_bucket_mib: a piece holds one dtype
        return [WeightSpec(f"w{i}", (2,), dtype) for i, dtype in enumerate(("float32", "bfloat16", "float32"))]

    def broadcast_weights(self) -> float:
        return 0.01

    def weight_piece(self, index: int, count: int):
        return {} if self.rank == 0 else None

    def end_weight_pieces(self) -> None:
        pass

    def hand_back_device_memory(self) -> float:
        if self.rank == 0:
            self.world.log.append(("hand back", "asleep" if self.world.asleep else "awake"))
        return 0.0


class Engine:
    def __init__(self, world: World):
        self.world = world

    def peak_rss_mb(self) -> float:
        return 1.0

    def peak_device_mb(self) -> float | None:
        return None

    def weight_version(self) -> int:
        return self.world.version

    async def setup(self, model_path: str, version: int) -> dict:
        return {}

    async def load_weights(self, weights, version: int) -> int:
        return self._synced(version)

    async def join_sync_group(
        self, backend: str, host: str, port: int, rank: int, world_size: int, timeout_s: float
    ) -> None:
        pass

    async def receive_weights(self, specs: list, version: int) -> int:
        return self._synced(version)

    async def load_piece(self, piece, specs: list, index: int, count: int, version: int) -> int:
        return self._synced(version) if index == count - 1 else version

    def _synced(self, version: int) -> int:
        assert "weights" not in self.world.asleep_memory, "synced into sleeping weights"
        self.world.version = version
        self.world.log.append(("sync", version))
        return version

    async def sleep(self, level: int = 1) -> bool:
        self.world.asleep = True
        self.world.asleep_memory = {"weights", "kv_cache"}
        self.world.log.append(("sleep", level))
        return True

    async def wake_up(self, tags: list[str] | None = None) -> bool:
        woken = [t for t in ("weights", "kv_cache") if t in self.world.asleep_memory and (tags is None or t in tags)]
        self.world.asleep_memory -= set(woken)
        self.world.asleep = bool(self.world.asleep_memory)
        if woken:
            self.world.log.append(("wake", *woken))
        return self.world.asleep

    async def openai_url(self) -> str | None:
        return None  # the stand-in serves no endpoint

    async def tokenizer_backend(self, model_path: str) -> dict | None:
        return None  # an explorer of this stand-in loads Hugging Face's tokenizer

    def take_experiences(self, final: bool = False) -> list:
        return []


class Buffer:
    def __init__(self, world: World):
        self.world = world

    def peak_rss_mb(self) -> float:
        return 1.0

    def peak_device_mb(self) -> float | None:
        return None

    def setup(self, sft: dict | None = None, scope=None, trained: int | None = None, resumed: bool = False) -> dict:
        self.world.buffer_setups.append((scope, trained, resumed))
        return {"samples": 0, "waiting": self.world.waiting}

    def put(self, experiences: list, step: int | None = None) -> int:
        return len(experiences)


STAND_INS = {
    "explorer": Explorer,
    "trainer": Trainer,
    "rollout": Engine,
    "auxiliary": Engine,  # an auxiliary model's engine: the calls are a rollout engine's
    "buffer": Buffer,
}


def handles_for(specs: list, world: World) -> dict:
    """name -> stand-in handle for every planned actor, as Launch.start_actors returns Ray handles."""
    made = {}
    for spec in specs:
        kind = STAND_INS[spec.role]
        role = kind(world, spec.rank) if spec.role == "trainer" else kind(world)
        made[spec.name] = Handle(role)
    return made
