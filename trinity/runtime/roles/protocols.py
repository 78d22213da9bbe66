"""The remote methods the driver calls on each role, as typed protocols, and what they return.

Each role's entry (launch/roles.py) names its protocol; its class keeps it (tests/runtime/roles/test_protocols.py
holds each class to its methods' names and parameters); the driver reaches roles only through these methods.
"""

from typing import Any, NotRequired, Protocol, TypedDict

from ..buffer.scope import Scope
from ..experience import Experience


class ExploreResult(TypedDict):
    reward_mean: float
    response_length_mean: float
    tokens_per_s: float
    weight_version: int
    tasks: int  # the step's tasks (0 in mode serve: outside agents made its experiences)
    experiences: int
    failed_tasks: int
    truncated_prompts: int
    engine_calls: int  # Ray calls to the engines (one per engine when every request of the step was gathered)
    seconds: float
    steps_in_flight: int  # the most explore steps the explorer ran at once while this one ran (fully_async: > 1)
    tasks_left_behind: int  # tasks explorer.over_rollout cut once enough of the step's had ended (0 without it)
    # what the workflows measured beyond the reward (accuracy, turns, tool_calls, ...), as <name>_mean over the
    # rollouts; written flat on the explorer's line
    workflow_metrics: dict[str, float]


class EvalRecord(TypedDict):
    taskset: str
    accuracy: float
    reward_mean: float
    tasks: int
    workflow_metrics: dict[str, float]  # as an explore step's, written flat on the eval line


class TrainResult(TypedDict):
    loss: float | None  # None while the actor is not updated: a critic warms up, or sampling left nothing to train
    grad_norm: float | None
    lr: float | None
    experiences: int
    seconds: float
    logprob_diff: NotRequired[float]  # only when the trainer recomputes the old log-probs
    kl_penalty: NotRequired[float]  # only with a KL penalty in the reward: the mean KL it penalised
    critic_loss: NotRequired[float]  # only with a critic (PPO): its value loss, gradient norm and update's seconds
    critic_grad_norm: NotRequired[float]
    critic_seconds: NotRequired[float]
    teacher_kl: NotRequired[float]  # only with a distillation teacher: the student's sampled KL to it, per token
    selected: NotRequired[int]  # only with RAFT: the rollouts chosen to train on
    stale_dropped: NotRequired[int]  # only with staleness_control: experiences dropped as too old, so far
    filtered_groups: NotRequired[int]  # only with std_threshold: groups dropped for rewards that all agree
    mixed_samples: NotRequired[int]  # only with sample strategy mix: the SFT samples in the batch
    # only with trainer.enable_preview: the batch's lowest- and highest-reward rollouts (prompt, response, reward)
    preview: NotRequired[list[dict]]
    # only with a policy loss that masks the batch (M2PO): its own metrics, named after it; written flat
    loss_metrics: NotRequired[dict[str, float]]
    # only with an advantage function that takes tokens out of the loss (Clip_B): its own metrics, named after it;
    # written flat
    advantage_metrics: NotRequired[dict[str, float]]
    # only where the run trains until the experiences stop coming (modes.trains_until_drained): why it ends, and then
    # this is the whole result (no step was taken)
    drained: NotRequired[str]
    # only with trainer.balance_batch: tokens per rank before and after balancing (global_seqlen/*); written flat
    seqlen_metrics: NotRequired[dict[str, float]]
    # only with algorithm.rollout_correction where the trainer recomputes the old log-probs: verl's rollout_corr/*
    # metrics (trainer/rollout_correction.py); written flat
    rollout_corr: NotRequired[dict[str, float]]


class SyncResult(TypedDict):  # the synchronizer's, in the driver
    method: str
    seconds: float
    weight_version: int


class AnyRole(Protocol):
    def peak_rss_mb(self) -> float: ...
    def peak_device_mb(self) -> float | None: ...


class ExplorerCalls(AnyRole, Protocol):
    def setup(
        self,
        engines: list,
        buffer: Any,
        model_path: str,
        feedback: str | None = None,
        done: int = 0,
        auxiliary: list | None = None,
    ) -> dict: ...
    def steps_per_epoch(self) -> int: ...
    def explore_step(self, step: int) -> ExploreResult: ...
    def evaluate(self, step: int) -> list[EvalRecord]: ...
    # the driver's, after it replaced dead engines (driver/replace.py)
    def replace_engines(self, engines: list, replaced: list[int]) -> None: ...


class TrainerCalls(AnyRole, Protocol):
    def rendezvous(self) -> tuple[str, int]: ...
    def setup(
        self, host: str, port: int, model_path: str, total_steps: int, buffer: Any, resume: str | None = None
    ) -> dict: ...
    def train_step(self, step: int) -> TrainResult | None: ...
    def save(self, folder: str, step: int, hf: bool) -> None: ...
    def write_weights(self, path: str, version: int) -> None: ...
    # the synchronizer's (sync/synchronizer.py)
    def join_sync_group(self, backend: str, host: str, port: int, world_size: int, timeout_s: float) -> None: ...
    def weight_specs(self) -> list: ...
    def broadcast_weights(self) -> float: ...
    def weight_piece(self, index: int, count: int) -> Any: ...
    def end_weight_pieces(self) -> None: ...
    # the stage's, where trainer and engines take turns on the devices (colocate)
    def hand_back_device_memory(self) -> float: ...


class EngineCalls(AnyRole, Protocol):
    async def setup(self, model_path: str, version: int) -> dict: ...
    async def load_weights(self, weights: Any, version: int) -> int: ...
    async def sleep(self, level: int = 1) -> bool: ...
    async def wake_up(self, tags: list[str] | None = None) -> bool: ...
    async def openai_url(self) -> str | None: ...
    async def tokenizer_backend(self, model_path: str) -> dict | None: ...
    def take_experiences(self, final: bool = False) -> list: ...
    def weight_version(self) -> int: ...  # the driver's health check (driver/health.py)
    # the synchronizer's (sync/synchronizer.py)
    async def join_sync_group(
        self, backend: str, host: str, port: int, rank: int, world_size: int, timeout_s: float
    ) -> None: ...
    async def receive_weights(self, specs: list, version: int) -> int: ...
    async def load_piece(self, piece: Any, specs: list, index: int, count: int, version: int) -> int: ...


class BufferCalls(AnyRole, Protocol):
    def setup(
        self, sft: dict | None = None, scope: Scope | None = None, trained: int | None = None, resumed: bool = False
    ) -> dict: ...
    def put(self, experiences: list[Experience], step: int | None = None) -> int: ...
