"""`buffer:` section: task sets the explorer reads and the experience buffer the trainer reads."""

from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from ._base import Section


class _Columns(Section):
    """What every data set's format names: its columns and how its rows become prompts."""

    prompt_type: Literal["plaintext", "messages", "chatpair"] = Field(
        "messages", description="How a sample's prompt is stored; messages goes through the chat template."
    )
    prompt_key: str = Field("prompt", description="Column holding the prompt.")
    response_key: str = Field("response", description="Column holding the reference response.")
    messages_key: str = Field("message", description="Column holding chat messages (Trinity-RFT's default name).")
    chosen_key: str = Field("chosen", description="Column holding the preferred response (DPO).")
    rejected_key: str = Field("rejected", description="Column holding the rejected response (DPO).")
    system_prompt: str | None = Field(None, description="System prompt prepended to every task.")
    system_prompt_key: str | None = Field(
        None, description="Column holding each row's own system prompt; wins over system_prompt."
    )
    reply_prefix: str | None = Field(None, description="Text the assistant reply starts with.")
    chat_template: str | None = Field(
        None, description="Jinja2 chat template of this data set's rows; defaults to the model's."
    )
    tools_key: str = Field(
        "tools",
        description="Column holding a row's tools (OpenAI function schemas), which the chat template renders into its "
        "prompt; a row without the column has none.",
    )
    enable_thinking: bool | None = Field(
        None,
        description="The chat template's enable_thinking for this data set's prompts; null: a taskset's take "
        "explorer.rollout_model.enable_thinking, the experience buffer's model.enable_thinking, an auxiliary "
        "buffer's the template's own default.",
    )
    workflow_key: str = Field(
        "", description="Column naming each row's workflow (tasksets); a row with none takes default_workflow_type."
    )
    reward_fn_key: str = Field(
        "",
        description="Column naming each row's reward function (tasksets); a row with none takes "
        "default_reward_fn_type.",
    )
    enable_concatenated_multi_turn: bool = Field(
        False,
        description="SFT on messages: train every assistant turn of a conversation (the others are context), not "
        "only the last.",
    )


class FormatConfig(_Columns):
    """A data set's format: a taskset's, a trainer's (SFT, DPO, pre-training) or a buffer's (Trinity-RFT's one
    FormatConfig; what a kind of data set does not read is said where it is written)."""


class GenerationConfig(Section):
    temperature: float | None = Field(None, ge=0, description="Sampling temperature; defaults to model.temperature.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling mass; defaults to model.top_p.")
    top_k: int = Field(-1, ge=-1, description="Top-k sampling; -1 disables it.")
    max_tokens: PositiveInt | None = Field(None, description="Response limit; defaults to model.max_response_tokens.")
    logprobs: NonNegativeInt | None = Field(
        None,
        description="The k most likely tokens' log-probs the engines record beside each response token's own (the "
        "experience's top_logprobs); 0: the sampled token's only; defaults to model.logprobs.",
    )


# Trinity-RFT's data selectors (buffer/selector/__init__.py); what each does: trinity/config/selectors.py
SelectorType = Literal["sequential", "shuffle", "random", "offline_easy2hard", "difficulty_based"]


class DataSelectorConfig(Section):
    """Which rows of a data set each step reads (Trinity-RFT's DataSelectorConfig)."""

    selector_type: SelectorType = Field(
        "sequential",
        description="sequential: in order; shuffle: a seeded permutation per epoch; random: a seeded draw per batch; "
        "offline_easy2hard: by feature_keys, highest first; difficulty_based: tasks whose predicted pass rate is "
        "nearest kwargs.target_reward.",
    )
    seed: int = Field(42, description="Seed of shuffle, random and difficulty_based.")
    feature_keys: list[str] = Field(
        default_factory=list,
        description="Columns the difficulty selectors read: offline_easy2hard one or more (higher is easier), "
        "difficulty_based two (pass rates of a weaker and a stronger reference model).",
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="difficulty_based's settings (m, lamb, rho, adaptive_rho, do_sample, tau, target_reward).",
    )


class StorageConfig(Section):
    """What every data source and sink has: a name, where it lives, and how its rows are read."""

    name: str = Field("", description="Name of the data set or buffer; derived when empty.")
    storage_type: Literal["file", "queue", "sql"] = Field("file", description="Where the data lives.")
    path: str | None = Field(None, description="File, directory, hub name or database URL.")
    subset_name: str | None = Field(None, description="Data set subset (config) name.")
    split: str = Field("train", description="Data set split.")
    format: FormatConfig = Field(default_factory=FormatConfig, description="Column mapping.")
    enable_progress_bar: bool = Field(False, description="Show a progress bar while reading.")
    data_selector: DataSelectorConfig = Field(
        default_factory=DataSelectorConfig, description="Which rows each step reads."
    )
    max_retry_times: int = Field(
        3, ge=0, description="Attempts of an SQL store's operation (at least one) before its error stands."
    )
    max_retry_interval: int = Field(1, ge=0, description="Seconds between an SQL store's attempts.")


class TasksetConfig(StorageConfig):
    """A task set the explorer rolls out."""

    repeat_times: PositiveInt | None = Field(
        None, description="Rollouts per task; algorithm.repeat_times for training sets, 1 for evaluation."
    )
    rollout_args: GenerationConfig = Field(default_factory=GenerationConfig, description="Sampling arguments.")
    default_workflow_type: str | None = Field(None, description="Workflow for this set; defaults to the input's.")
    default_reward_fn_type: str | None = Field(
        None, description="Reward function for this set; defaults to the input's."
    )
    workflow_args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the workflow.")
    reward_fn_args: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of the reward function."
    )
    task_selector: DataSelectorConfig | None = Field(
        None, description="Deprecated upstream: a training taskset's data_selector, which it replaces."
    )


class _Experiences(StorageConfig):
    """What the trainer's data sources share: experiences, or a data set's samples."""

    storage_type: Literal["file", "queue", "sql"] = Field("queue", description="Where the experiences live.")
    enable_progress_bar: bool | None = Field(False, description="Show a progress bar while reading.")


class ReplayBufferConfig(Section):
    """The experience queue as a priority queue (Trinity-RFT's AsyncPriorityQueue): the highest priority first."""

    enable: bool = Field(
        False, description="Serve the experiences of the freshest weights first, evicting the lowest when full."
    )
    priority_fn: Literal["linear_decay", "decay_limit_randomization"] = Field(
        "linear_decay",
        description="A task's priority: linear_decay, model_version - decay x use_count; decay_limit_randomization, "
        "the same plus Gaussian noise (sigma), reused at most use_count_limit times.",
    )
    priority_fn_args: dict[str, Any] = Field(
        default_factory=lambda: {"decay": 2.0}, description="Arguments of the priority function."
    )
    reuse_cooldown_time: NonNegativeFloat | None = Field(
        None, description="Seconds after which a task's experiences served once are queued again; null: never."
    )


class ExperienceBufferConfig(_Experiences):
    """Where the trainer reads experiences (or, for SFT, its data set)."""

    max_read_timeout: float = Field(
        1800, gt=0, description="Seconds the trainer waits for a batch of experiences before it stops with an error."
    )
    capacity: PositiveInt = Field(
        10000, description="Tasks the replay buffer holds; a new one evicts the lowest priority (replay_buffer only)."
    )
    replay_buffer: ReplayBufferConfig = Field(
        default_factory=ReplayBufferConfig, description="Replay: the queue served by priority."
    )


class AuxiliaryBufferConfig(_Experiences):
    """A data set a sample strategy mixes into batches (mix's SFT data set), read from its path."""

    storage_type: Literal["file", "queue", "sql"] = Field(
        "file", description="Where the data set lives: read from its path (upstream's default 'queue' reads nothing)."
    )
    capacity: PositiveInt = Field(
        10000, description="A queue's size; a data set read from its path has none (accepted, changes nothing)."
    )
    max_read_timeout: float = Field(
        1800,
        gt=0,
        description="A queue's wait for a batch; a data set read from its path does not wait (accepted, "
        "changes nothing).",
    )


class ExplorerInput(Section):
    taskset: TasksetConfig | None = Field(None, description="The training task set.")
    tasksets: list[TasksetConfig] = Field(default_factory=list, description="Several training task sets.")
    eval_tasksets: list[TasksetConfig] = Field(default_factory=list, description="Evaluation task sets.")
    default_workflow_type: str | None = Field(None, description="Workflow used where a task set names none.")
    default_eval_workflow_type: str | None = Field(
        None, description="Workflow used where an evaluation task set names none (before default_workflow_type)."
    )
    default_reward_fn_type: str | None = Field(None, description="Reward function used where a task set names none.")

    @property
    def training(self) -> list[TasksetConfig]:
        """The training task sets: taskset (where written), then tasksets."""
        return [t for t in [self.taskset, *self.tasksets] if t]


class TrainerInput(Section):
    experience_buffer: ExperienceBufferConfig | None = Field(None, description="Where the trainer reads experiences.")
    auxiliary_buffers: dict[str, AuxiliaryBufferConfig] = Field(
        default_factory=dict,
        description="Data sets the sample strategy mixes into each batch, by name (mix: the SFT data set).",
    )

    @property
    def experiences(self) -> ExperienceBufferConfig:
        """What the trainer reads: experience_buffer, else an in-memory queue named experiences."""
        return self.experience_buffer or ExperienceBufferConfig(name="experiences")


class BufferConfig(Section):
    batch_size: PositiveInt = Field(1, description="Tasks per explore step.")
    train_batch_size: NonNegativeInt = Field(
        0, description="Experiences per train step; 0 means batch_size x repeat_times."
    )
    total_epochs: PositiveInt = Field(1, description="Passes over the task set.")
    total_steps: PositiveInt | None = Field(None, description="Stop after this many steps (overrides epochs).")
    explorer_input: ExplorerInput = Field(default_factory=ExplorerInput, description="What the explorer reads.")
    trainer_input: TrainerInput = Field(default_factory=TrainerInput, description="What the trainer reads.")
