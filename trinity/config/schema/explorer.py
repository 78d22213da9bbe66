"""`explorer:` section: rollout engines and the runners that drive them."""

from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from ..engines import ALIASES, ENGINES
from ._base import Section
from .env import EnvVars
from .model import ExternalModelConfig

# the engine registry (config/engines.py) lists them, and the names Trinity-RFT still accepts for them
EngineType = Literal[tuple(ENGINES) + tuple(ALIASES)]
NO_API_KEY = "EMPTY"  # api_key's default (Trinity-RFT's): the OpenAI endpoint asks requests for no key
# the reasoning formats the OpenAI endpoint splits from replies (runtime/data/reasoning.py FORMATS)
ReasoningParser = Literal["deepseek_r1", "qwen3"]


class InferenceModelConfig(Section):
    model_path: str | None = Field(None, description="Model served by these engines; defaults to model.model_path.")
    engine_type: EngineType = Field(
        "vllm",
        description="Inference engine: vllm (GPU/NPU), or transformers (Hugging Face generate, any torch device); "
        "vllm_async, Trinity-RFT's former name of its vLLM engine, is vllm.",
    )
    engine_num: PositiveInt = Field(1, description="Independent engines.")
    tensor_parallel_size: PositiveInt = Field(1, description="Devices one engine shards a layer over.")
    pipeline_parallel_size: PositiveInt = Field(1, description="Pipeline stages per engine.")
    data_parallel_size: PositiveInt = Field(1, description="Data-parallel replicas inside one engine.")
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1, description="Share of device memory vLLM may take (on vLLM's CPU build: of host memory)."
    )
    kv_cache_mib: PositiveInt | None = Field(
        None,
        description="KV cache of one vLLM engine in MiB (vLLM's kv_cache_memory_bytes), instead of sizing it by "
        "gpu_memory_utilization; defaults to the profile's rollout_kv_cache_mib.",
    )
    enforce_eager: bool = Field(False, description="Disable CUDA/ACL graph capture.")
    enable_prefix_caching: bool = Field(True, description="Reuse KV cache across prompts with a shared prefix.")
    enable_chunked_prefill: bool = Field(True, description="Split long prefills into chunks.")
    dtype: Literal["bfloat16", "float16", "float32"] = Field("bfloat16", description="Weights and activations dtype.")
    seed: int = Field(42, description="Sampling seed.")
    max_model_len: PositiveInt | None = Field(None, description="Context length; defaults to model.max_model_len.")
    enable_thinking: bool | None = Field(
        None, description="Let the chat template emit thinking tokens; defaults to model.enable_thinking."
    )
    extra_engine_args: dict[str, Any] = Field(
        default_factory=dict,
        description="More vLLM engine arguments (EngineArgs fields trinity does not set), checked against vLLM "
        "before Ray starts.",
    )
    chat_template: str | None = Field(
        None,
        description="Jinja2 chat template of the prompts; defaults to model.custom_chat_template, else the "
        "tokenizer's.",
    )
    repetition_penalty: float | None = Field(
        None,
        gt=0,
        description="Penalty on tokens already in the prompt or the response; defaults to model.repetition_penalty.",
    )
    enable_prompt_truncation: bool | None = Field(
        None,
        description="Keep only the last model.max_prompt_tokens tokens of a longer prompt; defaults to "
        "model.enable_prompt_truncation.",
    )
    enable_openai_api: bool = Field(
        False,
        description="Serve each rollout engine on an OpenAI-compatible HTTP endpoint (/v1/chat/completions, "
        "/v1/completions, /v1/models) for agents in workflows; the run lists the endpoints in endpoints.json.",
    )
    base_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Port of engine 0's OpenAI endpoint (engine i listens on base_port + i); null: a free port each.",
    )
    api_key: str = Field(
        NO_API_KEY, description="Bearer key the OpenAI endpoint asks of every request; EMPTY: it asks none."
    )
    enable_history: bool = Field(
        False,
        description="Trinity-RFT's switch for recording a workflow's model calls; trinity records them either way "
        "(self.model.recorded_calls(client) returns the OpenAI endpoint's), so it changes nothing.",
    )
    tool_call_parser: Literal["hermes", "brackets"] | None = Field(
        None,
        description="Tool-call format the OpenAI endpoint parses from replies into tool_calls (hermes: "
        "<tool_call>{json}</tool_call>; brackets: [text], the only tool's one argument); null: requests with tools "
        "are refused.",
    )
    enable_auto_tool_choice: bool = Field(
        False,
        description="Answer requests whose tool_choice is auto (what a request with tools and no tool_choice asks) "
        "with the tool calls parsed from the reply, as vLLM's --enable-auto-tool-choice; needs tool_call_parser, and "
        "is derived true when that is set.",
    )
    reasoning_parser: ReasoningParser | None = Field(
        None,
        description="Split the reasoning (<think>...</think>) from a chat reply into its message's reasoning_content, "
        "as vLLM's reasoning parser of that name; null: the reply is the content.",
    )
    enable_log_requests: bool = Field(
        False, description="Log every request an engine and its OpenAI endpoint take, with its sampling."
    )
    max_prompt_tokens: PositiveInt | None = Field(
        None,
        description="Longest prompt these engines are given (cut to its end); defaults to model.max_prompt_tokens.",
    )
    max_response_tokens: PositiveInt | None = Field(
        None,
        description="The engines' reply limit where a request sets none (their OpenAI endpoint's); defaults to "
        "model.max_response_tokens. Task sets reply within rollout_args.max_tokens.",
    )
    min_response_tokens: NonNegativeInt | None = Field(
        None, description="Shortest reply of these engines; defaults to model.min_response_tokens."
    )
    ignore_eos: bool = Field(
        False, description="Go on generating past the end-of-sequence token, to max_tokens (long-response tests)."
    )
    use_v1: Literal[True] = Field(
        True,
        description="Trinity-RFT's switch for vLLM's V1 engine, the only engine of the vLLM trinity runs; false "
        "(V0) is not taken.",
    )
    weight_sync_buffer_size: PositiveInt = Field(
        1024,
        description="Trinity-RFT's name of synchronizer.sync_bucket_mib (MiB): set, it sets that; unset, it shows it.",
    )
    external_model_config: ExternalModelConfig = Field(
        default_factory=ExternalModelConfig,
        description="The external API these engines stand for: model.external_model's, copied here (Trinity-RFT's "
        "rule); set model.external_model instead.",
    )


# how a runner runs the repeats of a task whose workflow plays one rollout (Workflow.can_repeat false); asynchronous is
# Trinity-RFT's third mode, refused by name (conf/upstream_fields.yaml values:): trinity's workflows are synchronous
ConcurrentMode = Literal["sequential", "multi-threading"]


class DynamicTimeoutConfig(Section):
    """Trinity-RFT's dynamic timeout: once `warmup_min_steps` explore steps are done, a task may take `ratio` times
    the average time of the training tasks run so far (never more than explorer.max_timeout)."""

    enable: bool = Field(False, description="Cut tasks at ratio x the average task time instead of max_timeout.")
    warmup_min_steps: NonNegativeInt = Field(
        1, description="Explore steps to complete (max_timeout applies during them) before the timeout adapts."
    )
    ratio: PositiveFloat = Field(
        3.0,
        description="A task's timeout is this times the average seconds of the training tasks run so far, at most "
        "explorer.max_timeout.",
    )


class OverRolloutConfig(Section):
    """Trinity-RFT's over-rollout (explorer/explorer.py min_wait_num, explorer/scheduler.py _wait_for_batch_results): a
    training explore step waits for ceil(tasks x (1 - ratio)) of its tasks, then wait_after_min seconds more, and
    leaves the others behind."""

    ratio: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Share of a training explore step's tasks it need not wait for: once the others have ended, the "
        "rest get wait_after_min seconds and are then left behind (cut); 0: wait for every task.",
    )
    wait_after_min: NonNegativeFloat = Field(
        30.0, description="Seconds the tasks still going get once enough of the step's tasks have ended."
    )
    return_partial_tasks: bool = Field(
        False,
        description="A task left behind gives the experiences of its runs that ended (its split runs: "
        "explorer.max_repeat_times_per_runner); false: none of them.",
    )


class ExplorerConfig(Section):
    name: str = Field("explorer", description="Name of the explorer actor.")
    runner_per_model: PositiveInt = Field(8, description="Workflow runners per engine.")
    runner_num: int | None = Field(
        None, description="Deprecated in Trinity-RFT, which ignores it: runners are engine_num x runner_per_model."
    )
    runner_prepare_concurrency: int = Field(
        8, description="Trinity-RFT's cap on runner actors starting at once; trinity's runners are explorer threads."
    )
    runner_prepare_max_retries: int = Field(
        2, description="Trinity-RFT's retries of a runner actor's start; trinity's runners are explorer threads."
    )
    max_timeout: PositiveInt = Field(1800, description="Seconds one task may take.")
    max_retry_times: int = Field(2, ge=0, description="Retries of a failed task.")
    dynamic_timeout: DynamicTimeoutConfig = Field(
        default_factory=DynamicTimeoutConfig,
        description="Adapt the task timeout to the tasks' average time (Trinity-RFT's dynamic timeout).",
    )
    runner_state_report_interval: NonNegativeInt = Field(
        0,
        description="Seconds between reports, in the explorer's log, of what each runner is running and for how "
        "long; 0: no reports.",
    )
    concurrent_mode: ConcurrentMode = Field(
        "sequential",
        description="How a runner plays the repeat_times rollouts of a task whose workflow plays one rollout "
        "(can_repeat false): sequential, one after another; multi-threading, each on a thread of its own, at once.",
    )
    max_repeat_times_per_runner: PositiveInt | None = Field(
        None,
        description="Split each task's repeat_times rollouts into runs of at most this many, each on whichever "
        "runner is free; null: a task's rollouts run in one workflow.",
    )
    max_inflight_batches: PositiveInt = Field(
        2,
        description="synchronizer.sync_style fully_async: explore steps run at once (Trinity-RFT's batches in "
        "flight); the explorer also runs at most this many steps plus sync_offset ahead of the trainer. Not read "
        "under the other sync styles.",
    )
    over_rollout: OverRolloutConfig = Field(
        default_factory=OverRolloutConfig,
        description="Do not wait for a training step's slowest tasks (Trinity-RFT's over-rollout).",
    )
    eval_interval: PositiveInt = Field(100, description="Explore steps between evaluations.")
    eval_on_startup: bool = Field(True, description="Evaluate before the first step.")
    bench_on_latest_checkpoint: bool = Field(
        False,
        description="mode bench: evaluate the run's latest complete checkpoint only (the model itself when there is "
        "none); false: every complete checkpoint, in order.",
    )
    rollout_model: InferenceModelConfig = Field(default_factory=InferenceModelConfig, description="Rollout engines.")
    auxiliary_models: list[InferenceModelConfig] = Field(
        default_factory=list,
        description="Models of their own for the workflows (a judge, a reward model, a teacher): each runs engine_num "
        "engines beside the rollout engines, on devices of their own, never weight-synced, served on their OpenAI "
        "endpoint; a workflow reaches model i through self.auxiliary_models[i], an openai.OpenAI client (its "
        "model_path attribute names the model in requests).",
    )
    env_vars: EnvVars = Field(default_factory=dict, description="Extra environment of the rollout processes.")
    # serve mode's proxy (Trinity-RFT's explorer/proxy/): one OpenAI endpoint in front of the engines
    listen_address: str = Field(
        "0.0.0.0",
        description="Serve mode: the address the proxy in front of the engines listens on (an IP address or a host "
        "name; 0.0.0.0: every interface).",
    )
    proxy_port: int = Field(
        8010,
        ge=0,
        le=65535,
        description="Serve mode: the port of the proxy in front of the engines (0: a free one, listed in "
        "endpoints.json).",
    )
    service_status_check_interval: PositiveInt = Field(
        60,
        description="Serve mode: seconds between the proxy's checks of each engine (its /health and weight "
        "version); an engine that does not answer gets no requests until it does.",
    )
    min_running_model_num: PositiveInt = Field(
        1,
        description="Serve mode: engines the proxy keeps serving while the others take new weights; the proxy "
        "answers 503 while fewer engines answer their health check.",
    )
    db_url: str | None = Field(
        None,
        description="Serve mode: SQLite database (sqlite:///path; a relative path is in the run directory) where "
        "the proxy records every call it forwards, and /feedback's rewards; null: <run dir>/proxy_history.db.",
    )
