"""Nothing is accepted that is not honoured: every value the schema's Literal fields accept, and every name the
algorithm, function, workflow and reward registries list, either reaches the runtime in a named test or is
refused at validate time by name. The values are found by walking the schema, so a value added there fails
here until it is classified. Also: conf/upstream_fields.yaml (the Trinity-RFT fate table) agrees with the code.
"""

import ast
import typing
from functools import cache

import pytest
import yaml
from pydantic import BaseModel

from tests.conftest import MINIMAL, PROFILES, REPO
from trinity.config import upstream
from trinity.config.algorithms.functions import FUNCTIONS, UNSUPPORTED
from trinity.config.algorithms.presets import ALGORITHMS
from trinity.config.compose import Request
from trinity.config.operators import OPERATORS
from trinity.config.operators import REFUSED as REFUSED_OPERATORS
from trinity.config.resolve import resolve
from trinity.config.rewards import REWARDS, UNSUPPORTED_REWARDS
from trinity.config.schema import RunConfig
from trinity.config.workflows import WORKFLOWS
from trinity.errors import ConfigError

RUN = "tests/cli/test_run.py::"
BOTH = RUN + "test_both_mode_trains_through_a_stage_transition_with_gloo_sync"  # the demo: SFT, then GRPO
EVERY = "tests/cli/test_run_every_value.py::test_a_staged_run_through_the_values_no_other_run_takes"
SPLIT = RUN + "test_explore_and_train_runs_share_experiences_and_weights_through_files"
MEMORY_SYNC = RUN + "test_memory_sync_moves_each_steps_weights"
CHECKPOINT_SYNC = RUN + "test_checkpoint_sync_in_one_run"
# A value only a device this machine lacks runs (nccl, hccl, cuda, npu, fsdp, float16) is NOT run here: the test named
# runs the same code path with the CPU profile's value, and the value itself is profile data (a collective's name, a
# torch device, a dtype) that only a GPU or NPU run exercises. The CPU profile corrects or refuses the value itself.
ON_DEVICE = {"gloo path": BOTH, "fsdp2 path": BOTH, "bf16 path": BOTH}
ALGOS = "tests/cli/test_run_algorithms.py::test_every_algorithm_type_trains_the_demo_model"
LORA_RUN = "tests/cli/test_run_lora.py::test_a_lora_run_syncs_the_adapter_and_checkpoints_it_in_peft_layout"
LORA_DTYPES = "tests/runtime/rollout/test_transformers_engine.py::test_the_adapter_runs_in_the_lora_dtype_it_is_given"
# a reward the demo's runs do not name: the explorer loads a taskset naming it and its workflow scores with it
REWARD_RUN = "tests/runtime/explorer/test_role.py::test_the_reward_a_taskset_names_scores_its_tasks"
# issue 46's keys in a run: the replay buffer; the experience operators in an explore run
KEYS46 = "tests/cli/test_run_keys46.py::test_a_run_with_trinity_rfts_example_keys_honours_each_of_them"
KEYS46_EXPLORE = (
    "tests/cli/test_run_keys46.py::"
    "test_an_explore_run_splits_tasks_into_runs_records_top_logprobs_filters_and_logs_by_node"
)
# Trinity-RFT's judged math example: math_rm_workflow, its judge (a stand-in on loopback) and m2po, in one run
JUDGED = "tests/cli/test_run_upstream_workflows.py::test_a_judged_math_run_trains_on_the_judges_grades_with_m2po"
# Clip_B's entropy mask in a real update, on rollouts whose log-probs make the mask known
CLIPB_RUN = "tests/cli/test_run_clipb.py::test_clipb_takes_the_negative_tokens_of_lowest_signal_out_of_a_real_update"
MATH_FLOWS = "tests/runtime/workflows/test_math_workflows.py::"
JUDGES = ("trajectory_accuracy_grader_reward",)  # rewards that ask a judge: run against one
# the data selectors: two training tasksets (difficulty_based fed by pass_rate_calculator, offline_easy2hard) and an
# evaluation one (random) in a run stopped and resumed; every selector under each key in the explorer and in the
# trainer's data sets, set up from a resolved config
SELECTORS_RUN = (
    "tests/cli/test_run_selectors.py::test_a_resumed_run_reads_the_rows_its_selectors_would_have_read_unbroken"
)
TASKSET_SELECTOR = "tests/runtime/explorer/test_role.py::test_a_tasksets_selector_chooses_the_rows_each_step_reads"
DATA_SET_SELECTOR = (
    "tests/runtime/buffer/test_buffer.py::test_a_trainers_data_set_reads_the_rows_its_selector_picks_by_step"
)
AUX_RUN = "tests/cli/test_run_auxiliary.py::test_a_workflow_asks_the_auxiliary_models_engine_which_starts_with_the_run"
AUX_VIEW = (
    "tests/config/test_auxiliary.py::test_each_setting_of_an_auxiliary_model_reaches_its_engines_as_the_rollout_models"
)
CORRECTED_RUN = "tests/cli/test_run_rollout_correction.py::test_a_corrected_run_trains_and_logs_verls_metrics"
SELECTOR_NAMES = ("sequential", "shuffle", "random", "offline_easy2hard", "difficulty_based")

# (key, value) -> the test that runs it end to end. Keys: a taskset's fields as taskset.*, the trainer's data set's
# as experience_buffer.*, a stage's mode as mode (a stage is resolved and run as a root config).
RUNS = {
    ("mode", "both"): BOTH,
    ("cluster.train_stage_devices", "trainer"): BOTH,  # SFT on GRPO's trainer slot; GRPO keeps every actor
    ("cluster.train_stage_devices", "all"): EVERY,  # SFT on both slots; the next stage starts its own ranks
    ("mode", "train"): SPLIT,
    ("mode", "explore"): SPLIT,
    ("mode", "bench"): RUN + "test_checkpoints_are_hugging_face_models_that_bench_evaluates",
    ("mode", "colocate"): RUN + "test_colocate_takes_turns_on_the_shared_devices_and_syncs_through_memory",
    ("mode", "serve"): "tests/cli/test_run_serve.py::"
    "test_outside_calls_rewarded_at_feedback_are_the_experiences_a_train_run_learns_from",
    ("algorithm.optimizer.lr_scheduler_type", "constant"): BOTH,
    ("algorithm.optimizer.lr_scheduler_type", "cosine"): BOTH,
    # deprecated name: copied to lr_scheduler_type before anything reads it
    (
        "algorithm.optimizer.warmup_style",
        "constant",
    ): "tests/config/derive/test_optimizer.py::test_warmup_style_is_upstreams_deprecated_name_of_the_schedule",
    (
        "algorithm.optimizer.warmup_style",
        "cosine",
    ): "tests/config/derive/test_optimizer.py::test_warmup_style_is_upstreams_deprecated_name_of_the_schedule",
    ("algorithm.optimizer.optimizer_type", "adam"): BOTH,
    ("algorithm.optimizer.optimizer_type", "adamw"): EVERY,
    ("algorithm.optimizer.optimizer_type", "sgd"): EVERY,
    **{
        ("algorithm.loss_agg_mode", mode): EVERY
        for mode in ("seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
    },
    ("algorithm.loss_agg_mode", "token-mean"): BOTH,
    ("taskset.storage_type", "file"): BOTH,
    ("taskset.format.prompt_type", "plaintext"): BOTH,
    ("taskset.format.prompt_type", "messages"): EVERY,
    ("experience_buffer.storage_type", "file"): RUN + "test_long_prompts_keep_their_end_and_are_counted",
    ("experience_buffer.storage_type", "queue"): BOTH,
    ("experience_buffer.storage_type", "sql"): SPLIT,
    ("experience_buffer.format.prompt_type", "plaintext"): BOTH,
    ("experience_buffer.format.prompt_type", "messages"): EVERY,
    ("auxiliary_buffer.storage_type", "file"): ALGOS,  # the SFT data sets mix and mix_chord put in their batches
    ("auxiliary_buffer.format.prompt_type", "plaintext"): ALGOS,
    ("auxiliary_buffer.format.prompt_type", "messages"): ALGOS,
    ("explorer.rollout_model.engine_type", "transformers"): BOTH,
    (
        "explorer.rollout_model.engine_type",
        "vllm",
    ): "tests/test_gpu_smoke.py::test_smoke_train_step_runs_the_staged_demo_on_vllm_with_gloo_sync",
    ("explorer.rollout_model.dtype", "bfloat16"): BOTH,
    ("explorer.rollout_model.dtype", "float32"): EVERY,
    ("explorer.rollout_model.dtype", "float16"): ON_DEVICE["bf16 path"],
    ("trainer.param_dtype", "bfloat16"): BOTH,
    ("trainer.param_dtype", "float32"): EVERY,
    ("trainer.param_dtype", "float16"): ON_DEVICE["bf16 path"],
    ("synchronizer.sync_method", "online"): BOTH,
    ("synchronizer.sync_method", "gloo"): BOTH,
    ("synchronizer.sync_method", "nccl"): ON_DEVICE["gloo path"],
    ("synchronizer.sync_method", "hccl"): ON_DEVICE["gloo path"],
    ("synchronizer.sync_method", "memory"): MEMORY_SYNC,
    ("synchronizer.sync_method", "checkpoint"): CHECKPOINT_SYNC,
    ("synchronizer.sync_method", "offline"): EVERY,
    # derived from the method, the mode and the platform (config/sync_methods.py); a user's value is refused
    ("synchronizer.sync_channel", "process_group"): BOTH,
    ("synchronizer.sync_channel", "files"): CHECKPOINT_SYNC,
    ("synchronizer.sync_channel", "object_store"): MEMORY_SYNC,
    # a colocated engine maps the trainer's device buffers: CUDA or torch_npu IPC, which no CPU has; the routing by
    # device and the loads around it run with the mapping stood in for
    ("synchronizer.sync_channel", "device_ipc"): "tests/runtime/rollout/test_vllm_engine.py::"
    "test_a_device_buffer_piece_reaches_each_worker_by_its_own_devices_handle",
    ("synchronizer.sync_style", "fixed"): BOTH,
    ("synchronizer.sync_style", "trainer_driven"): EVERY,
    ("synchronizer.sync_style", "explorer_driven"): EVERY,
    ("synchronizer.sync_style", "fully_async"): RUN
    + "test_fully_async_runs_two_explore_steps_at_once_and_syncs_beside_them",
    ("trainer.trainer_type", "verl"): BOTH,
    ("trainer.trainer_strategy", "fsdp2"): BOTH,
    ("trainer.trainer_strategy", "fsdp"): ON_DEVICE["fsdp2 path"],
    ("trainer.device", "cpu"): BOTH,  # derived from the profile: a user's value that contradicts it is not used
    ("trainer.device", "cuda"): ON_DEVICE["gloo path"],
    ("trainer.device", "npu"): ON_DEVICE["gloo path"],
    (
        "trainer.save_hf_checkpoint",
        "last",
    ): "tests/cli/test_run.py::test_resume_after_sigterm_continues_from_the_last_checkpoint",
    ("trainer.save_hf_checkpoint", "always"): EVERY,
    ("trainer.save_hf_checkpoint", "never"): EVERY,
    ("monitor.monitor_type", "tensorboard"): BOTH,
    ("monitor.monitor_type", "wandb"): EVERY,
    ("algorithm.algorithm_type", "grpo"): BOTH,
    ("algorithm.algorithm_type", "sft"): BOTH,
    **{("algorithm.algorithm_type", name): EVERY for name in ("grpo_verl", "dapo", "gspo", "cispo")},
    **{
        ("algorithm.algorithm_type", name): ALGOS
        for name in ("reinforceplusplus", "rloo", "opmd", "asymre", "topr", "sapo", "rec", "sppo", "ppo", "dpo", "cpt")
        + ("raft", "on_policy_distill", "jsd", "mix", "mix_chord")
    },
    **{
        ("algorithm.policy_loss_fn", name): ALGOS
        for name in ("opmd", "topr", "rec", "sppo", "sapo", "dpo", "importance_sampling", "mix", "mix_chord")
        + ("sft_is", "sft_phi")
    },
    **{
        ("algorithm.advantage_fn", name): ALGOS
        for name in ("reinforceplusplus", "rloo", "reinforce", "opmd", "asymre", "rec", "ppo", "raft", "remax")
        + ("on_policy_distill", "jsd")
        + ("grpo_verl", "opmd_verl", "asymre_verl")  # upstream's deprecated names of the same functions
    },
    **{("algorithm.sample_strategy", name): ALGOS for name in ("warmup", "staleness_control", "mix")},
    ("algorithm.entropy_loss_fn", "mix"): ALGOS,
    **{
        ("algorithm.kl_penalty_fn", kind): ALGOS
        for kind in ("k1", "k2", "k3", "low_var_kl", "abs", "mse", "corrected_k3")
    },
    ("algorithm.sample_strategy", "default"): BOTH,
    ("algorithm.policy_loss_fn", "ppo"): BOTH,
    ("algorithm.policy_loss_fn", "sft"): BOTH,
    ("algorithm.policy_loss_fn", "gspo"): EVERY,
    ("algorithm.policy_loss_fn", "cispo"): EVERY,
    ("algorithm.advantage_fn", "grpo"): BOTH,
    ("algorithm.advantage_fn", "none"): BOTH,
    ("algorithm.kl_penalty_fn", "none"): BOTH,
    ("algorithm.kl_loss_fn", "none"): BOTH,
    ("algorithm.kl_loss_fn", "low_var_kl"): CHECKPOINT_SYNC,
    **{("algorithm.kl_loss_fn", kind): EVERY for kind in ("k1", "k2", "k3", "abs", "mse")},
    ("algorithm.entropy_loss_fn", "default"): BOTH,
    ("algorithm.entropy_loss_fn", "none"): BOTH,
    ("synchronizer.lora_sync", "adapter"): LORA_RUN,
    ("synchronizer.lora_sync", "merged"): "tests/cli/test_run_lora.py::"
    "test_merged_sync_hands_the_engines_full_weights_and_bench_evaluates_the_merged_checkpoints",
    ("model.lora_configs[].lora_dtype", "auto"): LORA_RUN,
    **{("model.lora_configs[].lora_dtype", dtype): LORA_DTYPES for dtype in ("float32", "bfloat16", "float16")},
    ("workflow", "arith_workflow"): BOTH,
    ("workflow", "math_workflow"): EVERY,
    # parametrised by workflow name
    **{
        ("workflow", name): "tests/cli/test_run_multi_turn.py::"
        "test_a_multi_turn_example_trains_whole_episodes_on_the_models_turns_only"
        for name in ("arith_feedback_workflow", "calculator_workflow", "react_agent_workflow")
    },
    # the step-wise algorithms train the multi-turn examples' episodes: parametrised by workflow name
    **{
        (key, name): "tests/cli/test_run_multi_turn.py::"
        "test_a_multi_turn_example_trains_whole_episodes_on_the_models_turns_only"
        for key, names in (
            ("algorithm.algorithm_type", ("multi_step_grpo", "gigpo")),
            ("algorithm.advantage_fn", ("step_wise_grpo", "gigpo")),
        )
        for name in names
    },
    ("explorer.rollout_model.tool_call_parser", "brackets"): "tests/cli/test_run_multi_turn.py::"
    "test_a_multi_turn_example_trains_whole_episodes_on_the_models_turns_only",
    ("explorer.rollout_model.tool_call_parser", "hermes"): "tests/runtime/rollout/test_openai_api.py::"
    "test_a_react_episode_over_the_endpoint_is_one_experience_of_the_models_turns",
    # issue 46, part D: the endpoint's reasoning formats (parametrised by name), held to vLLM's own parsers too
    **{
        ("explorer.rollout_model.reasoning_parser", name): "tests/runtime/rollout/test_openai_messages.py::"
        "test_a_chat_reply_is_split_into_reasoning_and_content_as_the_parser_says"
        for name in ("deepseek_r1", "qwen3")
    },
    # vLLM's V1 engine is every vLLM engine trinity starts; the one that also runs the other rollout-model keys
    ("explorer.rollout_model.use_v1", True): "tests/runtime/rollout/test_vllm_model_keys.py::"
    "test_vllm_runs_the_changed_rope_and_every_reply_runs_to_max_tokens",
    # an auxiliary model's engines: run on each engine type; every other setting reaches the engines as the rollout
    # model's (config/auxiliary.py engine_view), where its values are held to the tests above
    **{("explorer.auxiliary_models[].engine_type", e): AUX_RUN for e in ("transformers", "vllm")},
    ("explorer.auxiliary_models[].engine_type", "vllm_async"): "tests/config/derive/test_rollout.py::"
    "test_an_auxiliary_model_names_its_model_and_is_served",
    **{
        (f"explorer.auxiliary_models[].{key}", value): AUX_VIEW
        for key, values in {
            "dtype": ("bfloat16", "float16", "float32"),
            "tool_call_parser": ("hermes", "brackets"),
            "reasoning_parser": ("deepseek_r1", "qwen3"),
            "use_v1": (True,),
        }.items()
        for value in values
    },
    ("trainer.save_strategy", "unrestricted"): BOTH,  # every rank writes its shard of each checkpoint at once
    # issue 48: how a runner plays a one-rollout workflow's repeats; multi-threading in a real run, both in the explorer
    ("explorer.concurrent_mode", "multi-threading"): "tests/cli/test_run_keys48.py::"
    "test_a_hung_task_is_cut_at_its_dynamic_timeout_runners_report_and_rollouts_play_at_once",
    ("explorer.concurrent_mode", "sequential"): "tests/runtime/explorer/test_runners.py::"
    "test_a_one_rollout_workflow_is_played_repeat_times_as_concurrent_mode_says",
    # Trinity-RFT's former name of its vLLM engine: resolved to vllm, with a note (derive/aliases.py), and run as vllm
    ("explorer.rollout_model.engine_type", "vllm_async"): "tests/config/derive/test_aliases.py::"
    "test_vllm_async_is_vllm_with_a_note",
    # a role's logger at that level (parametrised by it); a run logs at INFO in KEYS46
    **{
        ("log.level", level): "tests/runtime/roles/test_base.py::"
        "test_a_role_logs_at_log_level_in_its_nodes_folder_with_group_by_node"
        for level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    },
    ("experience_buffer.replay_buffer.priority_fn", "linear_decay"): KEYS46,
    (
        "experience_buffer.replay_buffer.priority_fn",
        "decay_limit_randomization",
    ): "tests/runtime/buffer/test_replay.py::"
    "test_decay_limit_randomization_stops_queueing_a_task_after_its_use_count_limit",
    **{("operator", name): KEYS46_EXPLORE for name in ("mask_response_truncated", "dapo_dynamic_sampling")},
    ("workflow", "math_rm_workflow"): JUDGED,
    ("workflow", "math_boxed_workflow"): MATH_FLOWS + "test_use_base_prompts_with_plain_text",
    # its judge (the first auxiliary model) a stand-in on loopback, asked through the real openai client
    ("workflow", "math_ruler_workflow"): MATH_FLOWS
    + "test_math_ruler_rewards_the_judges_scores_and_reports_the_references",
    # Trinity-RFT's async twins: the same classes
    **{
        ("workflow", name): MATH_FLOWS + "test_the_async_twins_are_their_workflows"
        for name in ("async_math_workflow", "async_math_rm_workflow", "async_math_boxed_workflow")
    },
    ("workflow", "frozen_lake_workflow"): "tests/runtime/workflows/test_frozen_lake.py::"
    "test_episodes_end_on_the_goal_in_a_hole_or_out_of_turns",
    ("workflow", "step_wise_alfworld_workflow"): "tests/runtime/workflows/test_alfworld.py::"
    "test_a_solved_game_is_one_experience_per_step_each_with_the_episodes_reward",
    ("algorithm.algorithm_type", "m2po"): JUDGED,
    ("algorithm.policy_loss_fn", "m2po"): JUDGED,
    ("algorithm.advantage_fn", "clipb"): CLIPB_RUN,
    ("reward", "exact_match"): EVERY,
    ("reward", "math_reward"): EVERY,
    ("reward", "trajectory_accuracy_grader_reward"): JUDGED,
    **{("taskset.data_selector.selector_type", name): TASKSET_SELECTOR for name in SELECTOR_NAMES},
    **{("taskset.data_selector.selector_type", name): SELECTORS_RUN for name in ("difficulty_based", "random")},
    ("taskset.data_selector.selector_type", "offline_easy2hard"): SELECTORS_RUN,
    **{("taskset.task_selector.selector_type", name): TASKSET_SELECTOR for name in SELECTOR_NAMES},
    **{
        (f"{place}.data_selector.selector_type", name): DATA_SET_SELECTOR
        for place in ("experience_buffer", "auxiliary_buffer")
        for name in SELECTOR_NAMES
    },
    ("operator", "pass_rate_calculator"): SELECTORS_RUN,
    **{("reward", name): REWARD_RUN for name in REWARDS if name not in ("exact_match", "math_reward", *JUDGES)},
    # verl's rollout correction: token weights in a run; sequence weights in a real trainer rank's batch and update
    ("algorithm.rollout_correction.rollout_is", "token"): CORRECTED_RUN,
    ("algorithm.rollout_correction.loss_type", "ppo_clip"): CORRECTED_RUN,
    ("algorithm.rollout_correction.rollout_is", "sequence"): "tests/runtime/trainer/test_step.py::"
    "test_rollout_correction_weighs_and_masks_the_batch_verls_loss_trains_on",
}

# A schema value reached only through a key that is refused as a whole (the rule names the whole key): none now.
REFUSED_WHOLE: dict[str, str] = {}
# Set from the hardware profile, never by users: profile data, held to the profiles by tests/config/test_profiles.py.
PROFILE_DATA = "hardware."


def _literal_values(annotation) -> list:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [v for arg in typing.get_args(annotation) for v in _literal_values(arg)]


def _models(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _is_list(annotation) -> bool:
    return typing.get_origin(annotation) is list or any(_is_list(a) for a in typing.get_args(annotation))


def _is_dict(annotation) -> bool:
    return typing.get_origin(annotation) is dict or any(_is_dict(a) for a in typing.get_args(annotation))


def schema_values(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[tuple[str, object]]:
    """(schema path, value) of every value a Literal field of the run config accepts; `[]` marks a list item, `{}` a
    value of a mapping."""
    out = []
    for name, field in model.model_fields.items():
        path = prefix + name
        out += [(path, value) for value in _literal_values(field.annotation)]
        for sub in _models(field.annotation):
            mark = "[]." if _is_list(field.annotation) else "{}." if _is_dict(field.annotation) else "."
            out += schema_values(sub, path + mark)
    return out


def registry_values() -> list[tuple[str, object]]:
    """(key, name) of every algorithm, function, workflow and reward the registries list, refused ones included."""
    out = [("algorithm.algorithm_type", name) for name in ALGORITHMS]
    out += [(f"algorithm.{kind}", name) for kind, names in FUNCTIONS.items() for name in names]
    out += [(f"algorithm.{kind}", name) for kind, names in UNSUPPORTED.items() for name in names]
    out += [("workflow", name) for name in WORKFLOWS]
    out += [("operator", name) for name in [*OPERATORS, *REFUSED_OPERATORS]]
    return out + [("reward", name) for name in REWARDS] + [("reward", name) for name in UNSUPPORTED_REWARDS]


def classified_key(path: str) -> str:
    """The RUNS key of a schema path: every taskset as taskset.*, the trainer's data set as experience_buffer.*."""
    for start in (
        "buffer.explorer_input.taskset.",
        "buffer.explorer_input.tasksets[].",
        "buffer.explorer_input.eval_tasksets[].",
    ):
        if path.startswith(start):
            return "taskset." + path.removeprefix(start)
    return (
        path.replace("buffer.trainer_input.experience_buffer.", "experience_buffer.")
        .replace("buffer.trainer_input.auxiliary_buffers{}.", "auxiliary_buffer.")
        .replace("stages[].mode", "mode")
    )


ALL = sorted({(p, v) for p, v in schema_values() if not p.startswith(PROFILE_DATA)} | set(registry_values()), key=str)
REFUSED = [(p, v) for p, v in ALL if (classified_key(p), v) not in RUNS]


def test_the_walk_finds_the_fields_it_must():
    paths = {p for p, _ in schema_values()}
    assert {
        "mode",
        "stages[].mode",
        "synchronizer.sync_style",
        "buffer.explorer_input.eval_tasksets[].format.prompt_type",
        "explorer.auxiliary_models[].engine_type",
    } <= paths
    assert {p for p in paths if p.startswith(PROFILE_DATA)}, (
        "the hardware section is walked too (and left to the profile tests)"
    )


@cache
def _tests_in(file: str) -> frozenset:
    tree = ast.parse((REPO / file).read_text())
    return frozenset(
        n.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_")
    )


@pytest.mark.parametrize("key,value", sorted(RUNS, key=str))
def test_a_value_that_runs_names_a_test_that_exists(key, value):
    file, _, name = RUNS[key, value].partition("::")
    assert name in _tests_in(file), f"{key}={value!r}: {RUNS[key, value]} does not exist"


def test_every_classified_value_is_one_the_schema_or_a_registry_has():
    known = {(classified_key(p), v) for p, v in ALL}
    assert [kv for kv in RUNS if kv not in known] == []


# --- the refused class: resolved as a user writes it, the error names the key and the value ----------------

BASE = {
    "algorithm": {"repeat_times": 4},
    "buffer": {
        "explorer_input": {"taskset": {"path": "/data/t"}, "default_workflow_type": "math_workflow"},
        "trainer_input": {"experience_buffer": {"name": "e"}},
    },
}
MAPPED = "sft_dataset"  # the name a value of a mapping written with `{}` gets
# a list item of a path written with `[]`, completed to what the schema requires
ITEMS = {
    "tasksets": {"path": "/data/t"},
    "eval_tasksets": {"path": "/data/t"},
    "stages": {"stage_name": "one"},
    "auxiliary_models": {},
    "lora_configs": {},
    "operators": {},
}
# a registry's names, written where a config names one
NAMED = {
    "workflow": "buffer.explorer_input.default_workflow_type",
    "reward": "buffer.explorer_input.default_reward_fn_type",
    "operator": "data_processor.experience_pipeline.operators[].name",
}


def _written(path: str, value) -> dict:
    """BASE with `value` written at `path` (the first item of a list; a workflow or reward at the input's default)."""
    path = NAMED.get(path, path)
    tree = yaml.safe_load(yaml.safe_dump(BASE))
    node, parts = tree, path.split(".")
    for part in parts[:-1]:
        name = part.removesuffix("[]").removesuffix("{}")
        if part.endswith("[]"):
            node = node.setdefault(name, [dict(ITEMS[name])])[0]
        elif part.endswith("{}"):
            node = node.setdefault(name, {MAPPED: {}})[MAPPED]
        else:
            node = node.setdefault(name, {})
    node[parts[-1]] = value
    if path.startswith("algorithm.") and path != "algorithm.algorithm_type":
        tree["algorithm"]["algorithm_type"] = "grpo"
    return tree


def _error_key(path: str) -> str:
    """The dotted key the refusal must name."""
    for kept, whole in REFUSED_WHOLE.items():
        if path.startswith(kept):
            return whole
    path = NAMED.get(path, path)
    return path.replace("stages[].", "").replace("[]", "[0]").replace("{}", f".{MAPPED}")


def _refusal(tmp_path, path: str, value, profile: str) -> list:
    file = tmp_path / "run.yaml"
    file.write_text(MINIMAL + yaml.safe_dump(_written(path, value)))
    with pytest.raises(ConfigError) as err:
        resolve(Request(file, (f"hardware={profile}",)))
    key = _error_key(path)
    return [
        i
        for i in err.value.issues
        if i.severity == "error"
        and i.key == key
        and (key in REFUSED_WHOLE.values() or str(value) in i.message)
        and i.source.startswith(str(file))
    ]


@pytest.mark.parametrize("path,value", REFUSED, ids=[f"{p}={v}" for p, v in REFUSED])
def test_a_value_that_does_not_run_is_refused_by_name_on_every_profile(tmp_path, path, value):
    for profile in PROFILES:
        found = _refusal(tmp_path, path, value, profile)
        assert found, (
            f"{path}={value!r} on {profile}: neither run by a named test (RUNS) nor refused by name at validate"
        )
        assert found[0].allowed or found[0].hint, "a refusal says what is allowed or what to do"


SAMPLES = [
    ("monitor.monitor_type", "swanlab"),
    ("trainer.trainer_strategy", "megatron"),
    ("buffer.explorer_input.eval_tasksets[].format.prompt_type", "chatpair"),
]


@pytest.mark.parametrize("path,value", SAMPLES)
def test_validate_and_run_exit_2_with_the_key_the_value_and_where(cli, write, path, value):
    text = MINIMAL + yaml.safe_dump(_written(path, value))
    for command in (("config", "validate"), ("run",)):
        result = cli(*command, "-c", write("run.yaml", text), "hardware=a100")
        assert result.code == 2, result.err
        line = next(
            line
            for line in result.err.splitlines()
            if f"{_error_key(path)}: {value!r} is not run by this version of trinity" in line
        )
        assert line.startswith("error: run.yaml:"), line  # file:line:col of the value
        assert "allowed: " in result.err.split(line, 1)[1].split("\nerror", 1)[0]


def test_megatron_on_an_npu_is_one_error_with_the_hardwares_reason(cli, write):
    result = cli(
        "config",
        "validate",
        "-c",
        write("run.yaml", MINIMAL + "trainer:\n  trainer_strategy: megatron\n"),
        "hardware=ascend910b",
    )
    assert (
        result.err.startswith("trinity: 1 problem in the config\n")
        and "Megatron training on Ascend NPUs is not supported yet" in result.err
    )


# --- the fate table says what the code does ----------------------------------------------------------------


def _literal_leaves() -> dict[str, list]:
    out: dict[str, list] = {}
    for path, value in schema_values():
        out.setdefault(path, []).append(value)
    return out


def _supported_literal_keys() -> list[str]:
    table = upstream.table()
    return sorted(p for p in _literal_leaves() if p in table and table[p].fate == "supported")


@pytest.mark.parametrize("key", _supported_literal_keys())
def test_a_supported_key_runs_some_value_and_its_fate_names_each_value_refused(key):
    refused = {v for p, v in REFUSED if p == key}
    accepted = [v for v in _literal_leaves()[key] if v not in refused]
    assert accepted, f"{key} is marked supported, but every value is refused"
    why = upstream.table()[key].why
    assert all(f"'{v}'" in why for v in refused), (
        f"conf/upstream_fields.yaml: {key}'s why should name what is refused: {sorted(refused)}"
    )
    assert "refused" not in why or refused, f"{key}'s why says a value is refused; none is"


def test_a_refused_key_the_schema_keeps_is_refused_by_a_rule_when_set(tmp_path):
    from tests.config.test_upstream_fields import _in_schema

    table = upstream.table()
    kept = [k for k, f in table.items() if f.fate != "supported" and _in_schema(k)]
    assert kept == list(REFUSED_WHOLE.values())
    for key in kept:
        found = _refusal(tmp_path, key + "[].engine_type", "transformers", "cpu")
        assert found, f"{key} is '{table[key].fate}' in conf/upstream_fields.yaml but a config that sets it resolves"


def test_every_supported_key_written_with_its_default_resolves(tmp_path):
    """A key marked supported is not refused by any rule: a config writing each one (its schema default) resolves."""
    from tests.config.test_upstream_fields import OURS, _our_default

    table, tree = upstream.table(), yaml.safe_load(yaml.safe_dump(BASE))
    for path, field in OURS.items():
        entry = table.get(path)
        default = _our_default(field)
        if (
            entry is None
            or entry.fate != "supported"
            or default == "<required>"
            or "[]" in path
            or "{}" in path  # a mapping of sections: an entry is only read when a strategy names it
            or path.startswith(("stages", "hardware"))
        ):
            continue
        node = tree
        for part in path.split(".")[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node.setdefault(path.split(".")[-1], default)
    tree.setdefault("model", {})["model_path"] = "/models/tiny"
    file = tmp_path / "run.yaml"
    file.write_text(yaml.safe_dump(tree))
    resolve(Request(file, ("hardware=cpu",)))
