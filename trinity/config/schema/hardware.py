"""Hardware profile schema: facts about a machine, recommended run values, env vars by role."""

from typing import Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt

from ..engines import ENGINES
from ._base import Section
from .env import EnvConfig

DeviceType = Literal["cuda", "npu", "cpu"]


class CoreBinding(Section):
    """How a rollout engine is bound to its own cores of a node (vLLM's CPU build pins its threads)."""

    env: str = Field(
        ..., description="Variable holding an engine's cores, e.g. 0-3, one range per worker joined by '|'."
    )
    fixed: dict[str, str] = Field(
        default_factory=dict, description="Variables set beside it, e.g. no cores reserved for the engine process."
    )


class ComputeThreads(Section):
    """How many threads each role computes with where the devices are host cores (a CPU slot is one core)."""

    env: str = Field("OMP_NUM_THREADS", description="Variable that sizes a process's compute threads at its start.")
    turns_share_node: bool = Field(
        True,
        description="Roles that take turns (strictly on-policy sync, or colocate) each compute with the node's slots "
        "on their turn instead of only their own: a role that waits holds no core idle.",
    )


class HardwareFacts(Section):
    """What the hardware is and can do; a run value contradicting a fact is reported."""

    vendor: str = Field(..., description="Who makes the accelerator (nvidia, huawei, none).")
    device_type: DeviceType = Field(..., description="torch device type of the trainer.")
    chip: str = Field(..., description="Chip model as the vendor tool names it.")
    ray_resource_key: str = Field(..., description="Ray resource a process asks for to get one device.")
    ray_request: Literal["num_gpus", "resources", "none"] = Field(
        ..., description="How Ray is asked for devices: num_gpus=n, resources={key: n}, or not at all."
    )
    collective_backend: str = Field(..., description="torch.distributed backend between devices.")
    visible_devices_env: str | None = Field(None, description="Variable Ray sets to the devices of an actor.")
    noset_visible_devices_env: str | None = Field(None, description="Variable that stops Ray from setting it.")
    devices_per_node: PositiveInt = Field(..., description="Devices in one node.")
    memory_gb_per_device: PositiveFloat | None = Field(None, description="Device memory in GB.")
    dtypes: list[Literal["bfloat16", "float16", "float32"]] = Field(
        ..., min_length=1, description="Dtypes the chip computes in."
    )
    torch_compile_training: bool = Field(..., description="Whether the trainer may use torch.compile.")
    trainer_strategies: list[Literal["fsdp", "fsdp2", "megatron"]] = Field(
        ..., min_length=1, description="Training strategies that run here."
    )
    rollout_engines: list[Literal[tuple(ENGINES)]] = Field(
        default_factory=lambda: list(ENGINES), min_length=1, description="Rollout engines that run here."
    )
    attn_implementation: str = Field(
        "sdpa",
        description="Attention kernel the trainer's model uses by default (a Hugging Face attn_implementation; "
        "trainer.attn_implementation overrides it).",
    )
    varlen_attention: list[str] = Field(
        default_factory=list,
        description="Attention implementations (Hugging Face attn_implementation names) that have a variable-length "
        "kernel here, one that takes a packed row's sequence boundaries: flash_attention_2 with flash-attn on NVIDIA "
        "GPUs (flash_attention_3 on Hopper), torch_npu's npu_fusion_attention behind flash_attention_2 on Ascend, "
        "none on the CPU. trainer.use_remove_padding (verl packs a micro-batch's sequences into one row) defaults to "
        "whether trainer.attn_implementation is one of them: any other attends the packed row with a dense block "
        "mask, O(L^2) time and memory in the packed length.",
    )
    raw_logprobs_engines: list[Literal[tuple(ENGINES)]] = Field(
        default_factory=list,
        description="Rollout engines whose log-probs here are the logits' own (raw), not those of the distribution a "
        "token was sampled from (after temperature, top-k, top-p and a repetition penalty): where training rollouts "
        "shape that distribution, the trainer recomputes the old policy's log-probs (algorithm.bypass_old_logprobs "
        "derived false).",
    )
    fused_kernels: bool = Field(
        False,
        description="Whether the trainer computes log-probs from the last hidden state by default "
        "(trainer.use_fused_kernels, verl's fused kernels): the vocabulary's logits are never held whole.",
    )
    fused_optimizer: bool = Field(
        False,
        description="Whether the trainer's optimizer runs torch's fused implementation by default "
        "(trainer.fused_optimizer): one kernel over every parameter a step, not one call per parameter and operation.",
    )
    gradient_checkpointing: bool = Field(
        True,
        description="Whether the trainer recomputes activations in the backward pass by default "
        "(trainer.enable_gradient_checkpointing): less device memory for one more forward pass per update.",
    )
    train_stage_devices: Literal["all", "trainer"] = Field(
        "all",
        description="Devices a train-only stage of a run that also explores trains on by default "
        "(cluster.train_stage_devices): all, or the trainer's share, the next stage's engines starting beside it.",
    )
    compute_threads: ComputeThreads | None = Field(
        None,
        description="How each role's compute threads are sized where the devices are host cores; none where an "
        "accelerator computes (Ray's default stands: one thread per CPU it grants).",
    )
    rollout_sleep_mode: bool = Field(
        True,
        description="Whether vLLM's sleep mode (freeing device memory for the trainer in colocate mode) exists here.",
    )
    max_gpu_memory_utilization: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Largest explorer.rollout_model.gpu_memory_utilization that starts vLLM here (on the CPU it is a "
        "share of host memory).",
    )
    rollout_kv_cache_mib: PositiveInt | None = Field(
        None,
        description="KV cache of one vLLM engine in MiB when explorer.rollout_model.kv_cache_mib is unset; none "
        "sizes it by gpu_memory_utilization.",
    )
    rollout_core_binding: CoreBinding | None = Field(
        None, description="How each rollout engine on a node gets its own cores; none leaves it to the engine."
    )
    collective_timeout_env: list[str] = Field(
        default_factory=list,
        description="Variables holding the collective timeout in seconds; raised to synchronizer.sync_timeout.",
    )
    reasons: dict[str, str] = Field(
        default_factory=dict, description="Why a capability is missing, keyed by fact name."
    )


class DetectRule(Section):
    """How `hardware=auto` recognises this profile on a machine."""

    names: list[str] = Field(default_factory=list, description="Regular expressions matched against device names.")
    min_memory_gb: PositiveFloat | None = Field(None, description="Smallest device memory this profile covers.")
    max_memory_gb: PositiveFloat | None = Field(None, description="Largest device memory this profile covers.")


class EnvWhen(EnvConfig):
    """Env vars that apply only when every `when` entry (dotted key: value) matches the run config."""

    when: dict[str, Any] = Field(..., min_length=1, description="Dotted run-config keys and the values they must have.")


class HardwareProfile(Section):
    name: str = Field(..., description="Profile name, the file name without .yaml.")
    description: str = Field("", description="One line for `trinity profile list`.")
    extends: str | None = Field(None, description="Profile this one starts from.")
    facts: HardwareFacts = Field(..., description="What the hardware is and can do.")
    recommended: dict[str, Any] = Field(
        default_factory=dict,
        description="Run-config values applied under the user's file (same shape as the run config).",
    )
    env: EnvConfig = Field(default_factory=EnvConfig, description="Environment variables by role.")
    env_when: list[EnvWhen] = Field(default_factory=list, description="Env vars that depend on run-config values.")
    detect: DetectRule = Field(default_factory=DetectRule, description="How hardware=auto recognises this hardware.")


class HardwareSection(HardwareFacts):
    """The `hardware:` block of a resolved run config: the profile's facts plus where they came from."""

    name: str = Field(..., description="Selected profile.")
    source: str = Field(..., description="Profile file, after `extends`.")
    selected_by: str = Field(
        ..., description="How the profile was chosen: the override, or what hardware=auto detected."
    )
