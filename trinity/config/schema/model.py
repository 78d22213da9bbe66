"""`model:` section: the policy model, its token budget and its sampling defaults."""

from typing import Any, Literal

from pydantic import Field, PositiveInt

from ._base import Section
from .env import ENV_NAME_PATTERN

LoraDtype = Literal["auto", "float32", "bfloat16", "float16"]
ALL_LINEAR = "all-linear"


def module_names(text: str | None) -> list[str]:
    """A comma-separated list of module names as a list: 'q_proj, v_proj' -> ['q_proj', 'v_proj']."""
    return [n.strip() for n in (text or "").split(",") if n.strip()]


class LoRAConfig(Section):
    """One LoRA adapter: trained by the trainer (verl's peft path), applied by the rollout engines."""

    name: str | None = Field(None, description="The adapter's name in vLLM's requests; derived 'default'.")
    path: str | None = Field(
        None,
        description="A PEFT adapter folder (adapter_config.json) to go on training; its rank, alpha and modules "
        "are used.",
    )
    lora_rank: PositiveInt = Field(32, description="Rank r of the adapter's low-rank matrices.")
    lora_alpha: PositiveInt = Field(32, description="Scaling numerator: the update is (lora_alpha / lora_rank) B A.")
    lora_dtype: LoraDtype = Field("auto", description="dtype of the adapter in the rollout engines; auto: theirs.")
    target_modules: str = Field(
        "all-linear",
        description="Comma-separated module names to adapt (q_proj,v_proj), or all-linear (every linear but the "
        "output head).",
    )
    exclude_modules: str | None = Field(None, description="Comma-separated module names left out of target_modules.")
    base_model_name: str | None = Field(
        None,
        description="The base model vLLM records for the adapter (its LoRARequest's base_model_name); the adapter "
        "is trained on and applied to model.model_path either way.",
    )


class ExternalModelConfig(Section):
    """An OpenAI-compatible API answering as the rollout model (Trinity-RFT's ExternalModelConfig): mode bench only.
    The config names the environment variables that hold the endpoint's URL and its key, never the key itself."""

    enable: bool = Field(False, description="Evaluate the model behind an OpenAI-compatible API instead of engines.")
    base_url_env: str = Field(
        "OPENAI_BASE_URL",
        pattern=ENV_NAME_PATTERN,
        description="Environment variable holding the API's base URL (https://host/v1), read where the run starts.",
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        pattern=ENV_NAME_PATTERN,
        description="Environment variable holding the API's key (unset: 'EMPTY', as a local server takes); masked in "
        "every output.",
    )
    model_name: str | None = Field(None, description="The model the API serves, as its requests name it (required).")


class ModelConfig(Section):
    model_path: str = Field(..., min_length=1, description="Local path or hub name of the policy model.")
    critic_model_path: str | None = Field(None, description="Critic model; defaults to model_path.")
    teacher_model_path: str | None = Field(
        None,
        description="Teacher of on-policy distillation (advantage_fn on_policy_distill, jsd): a local model with "
        "model_path's tokenizer; the trainer computes its log-probs of every response.",
    )
    max_model_len: PositiveInt | None = Field(
        None, description="Context length of prompt plus response; derived as their sum when both are set."
    )
    max_prompt_tokens: PositiveInt | None = Field(
        None, description="Longest prompt; derived as max_model_len - max_response_tokens."
    )
    max_response_tokens: PositiveInt | None = Field(
        None, description="Longest generated response; derived as max_model_len - max_prompt_tokens."
    )
    min_response_tokens: int = Field(
        0, ge=0, description="Shortest generated response; lowered below max_response_tokens."
    )
    temperature: float = Field(1.0, ge=0, description="Sampling temperature of task sets that set none.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass of task sets that set none.")
    top_k: int = Field(
        -1,
        ge=-1,
        description="Top-k of the engines' own sampling defaults (their OpenAI endpoint's requests outside a "
        "workflow); -1 disables it. Task sets sample with rollout_args.top_k, as in Trinity-RFT.",
    )
    logprobs: int = Field(
        0,
        ge=0,
        description="Top-k log-probs the engines record per response token, for task sets that set none "
        "(rollout_args.logprobs); 0: the sampled token's own only.",
    )
    enable_thinking: bool | None = Field(
        None, description="Let the chat template emit thinking tokens; None leaves it to the template."
    )
    custom_chat_template: str | None = Field(
        None, description="Jinja2 chat template for prompts and SFT samples, instead of the tokenizer's."
    )
    chat_template_path: str | None = Field(
        None, description="File holding the chat template; overrides custom_chat_template."
    )
    trust_remote_code: bool = Field(
        False,
        description="Run the Python code a model folder ships (auto_map in its config.json); only code you have read.",
    )
    repetition_penalty: float = Field(
        1.0,
        gt=0,
        description="Penalty on tokens already in the prompt or the response; 1.0 is none, above 1 discourages "
        "repeats.",
    )
    enable_prompt_truncation: bool = Field(
        True,
        description="Keep only the last max_prompt_tokens tokens of a longer prompt; false sends every prompt whole.",
    )
    rope_scaling: dict[str, Any] | None = Field(
        None,
        description="RoPE scaling of the trainer's and the engines' model ({rope_type: yarn, factor: 4.0, ...}), over "
        "the model's own rope parameters.",
    )
    rope_theta: float | None = Field(
        None, gt=0, description="RoPE base frequency of the trainer's and the engines' model; null: the model's."
    )
    lora_configs: list[LoRAConfig] | None = Field(
        None, description="Train a LoRA adapter instead of every weight: one entry (trinity trains one adapter)."
    )
    max_cpu_loras: PositiveInt | None = Field(
        None, description="vLLM: adapters kept in host memory; 1 (vLLM's default): the engines serve one adapter."
    )
    fully_sharded_loras: bool = Field(
        False, description="vLLM: shard the adapter's computation across tensor-parallel ranks too."
    )
    external_model: ExternalModelConfig = Field(
        default_factory=ExternalModelConfig,
        description="An OpenAI-compatible API as the rollout model, in mode bench (no engines, no weights to sync).",
    )
