"""`buffer:` section: task sets the explorer reads and the experience buffer the trainer reads."""

from typing import Any, Literal, Optional

from pydantic import Field, NonNegativeInt, PositiveInt

from ._base import Section


class FormatConfig(Section):
    prompt_type: Literal["plaintext", "messages", "chatpair"] = Field("plaintext", description="How a sample's prompt is stored.")
    prompt_key: str = Field("prompt", description="Column holding the prompt.")
    response_key: str = Field("response", description="Column holding the reference response.")
    messages_key: str = Field("messages", description="Column holding chat messages (prompt_type: messages).")
    chosen_key: str = Field("chosen", description="Column holding the preferred response (DPO).")
    rejected_key: str = Field("rejected", description="Column holding the rejected response (DPO).")
    system_prompt: Optional[str] = Field(None, description="System prompt prepended to every task.")
    reply_prefix: Optional[str] = Field(None, description="Text the assistant reply starts with.")


class GenerationConfig(Section):
    temperature: float = Field(1.0, ge=0, description="Sampling temperature.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass.")
    top_k: int = Field(-1, ge=-1, description="Top-k sampling; -1 disables it.")
    logprobs: NonNegativeInt = Field(0, description="Log-probabilities returned per token.")
    max_tokens: Optional[PositiveInt] = Field(None, description="Response limit; defaults to model.max_response_tokens.")


class StorageConfig(Section):
    name: str = Field(..., min_length=1, description="Name of the data set or buffer.")
    storage_type: Literal["file", "queue", "sql"] = Field("file", description="Where the data lives.")
    path: Optional[str] = Field(None, description="File, directory, hub name or database URL.")
    subset_name: Optional[str] = Field(None, description="Data set subset (config) name.")
    split: str = Field("train", description="Data set split.")
    repeat_times: Optional[PositiveInt] = Field(None, description="Rollouts per task; defaults to algorithm.repeat_times.")
    format: FormatConfig = Field(default_factory=FormatConfig, description="Column mapping.")
    rollout_args: GenerationConfig = Field(default_factory=GenerationConfig, description="Sampling arguments.")
    default_workflow_type: Optional[str] = Field(None, description="Workflow for this set; defaults to the input's.")
    default_reward_fn_type: Optional[str] = Field(None, description="Reward function for this set; defaults to the input's.")
    workflow_args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the workflow.")
    reward_fn_args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the reward function.")
    enable_progress_bar: bool = Field(False, description="Show a progress bar while reading.")


class ExplorerInput(Section):
    taskset: Optional[StorageConfig] = Field(None, description="The training task set.")
    tasksets: list[StorageConfig] = Field(default_factory=list, description="Several training task sets.")
    eval_tasksets: list[StorageConfig] = Field(default_factory=list, description="Evaluation task sets.")
    default_workflow_type: Optional[str] = Field(None, description="Workflow used where a task set names none.")
    default_reward_fn_type: Optional[str] = Field(None, description="Reward function used where a task set names none.")
    system_prompt: Optional[str] = Field(None, description="System prompt used where a task set names none.")


class TrainerInput(Section):
    experience_buffer: Optional[StorageConfig] = Field(None, description="Where the trainer reads experiences.")
    sft_warmup_dataset: Optional[StorageConfig] = Field(None, description="Data set of an SFT warm-up.")
    sft_warmup_steps: NonNegativeInt = Field(0, description="SFT warm-up steps before RL.")


class BufferConfig(Section):
    batch_size: PositiveInt = Field(1, description="Tasks per explore step.")
    train_batch_size: NonNegativeInt = Field(0, description="Experiences per train step; 0 means batch_size x repeat_times.")
    total_epochs: PositiveInt = Field(1, description="Passes over the task set.")
    total_steps: Optional[PositiveInt] = Field(None, description="Stop after this many steps (overrides epochs).")
    explorer_input: ExplorerInput = Field(default_factory=ExplorerInput, description="What the explorer reads.")
    trainer_input: TrainerInput = Field(default_factory=TrainerInput, description="What the trainer reads.")
