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


class FormatConfig(_Columns):
    """A data set's format: a trainer's (SFT, DPO, pre-training) or a buffer's."""

    enable_concatenated_multi_turn: bool = Field(
        False,
        description="SFT on messages: train every assistant turn of a conversation (the others are context), not "
        "only the last.",
    )


class TasksetFormat(_Columns):
    workflow_key: str = Field(
        "", description="Column naming each row's workflow; a row with none takes the taskset's default_workflow_type."
    )


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


class StorageConfig(Section):
    """What every data source and sink has: a name, where it lives, and how its rows are read."""

    name: str = Field("", description="Name of the data set or buffer; derived when empty.")
    storage_type: Literal["file", "queue", "sql"] = Field("file", description="Where the data lives.")
    path: str | None = Field(None, description="File, directory, hub name or database URL.")
    subset_name: str | None = Field(None, description="Data set subset (config) name.")
    split: str = Field("train", description="Data set split.")
    format: FormatConfig = Field(default_factory=FormatConfig, description="Column mapping.")
    enable_progress_bar: bool = Field(False, description="Show a progress bar while reading.")


class TasksetConfig(StorageConfig):
    """A task set the explorer rolls out."""

    format: TasksetFormat = Field(default_factory=TasksetFormat, description="Column mapping.")
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


class ExplorerInput(Section):
    taskset: TasksetConfig | None = Field(None, description="The training task set.")
    tasksets: list[TasksetConfig] = Field(default_factory=list, description="Several training task sets.")
    eval_tasksets: list[TasksetConfig] = Field(default_factory=list, description="Evaluation task sets.")
    default_workflow_type: str | None = Field(None, description="Workflow used where a task set names none.")
    default_eval_workflow_type: str | None = Field(
        None, description="Workflow used where an evaluation task set names none (before default_workflow_type)."
    )
    default_reward_fn_type: str | None = Field(None, description="Reward function used where a task set names none.")


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
