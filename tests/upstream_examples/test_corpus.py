"""The corpus of tests/upstream_examples/: run configs of our own that between them set every key and value that
Trinity-RFT's 20 example run configs set (UPSTREAM_CONFIGS: its examples/ folder but the research fork, and its test
template; their keys and values are UPSTREAM below, as OmegaConf's YAML loader reads them, `${oc.env:...}`
unresolved). Each value is either written in a corpus config, which `trinity config validate` accepts on a100 and on
ascend910b with the hub names it gives in the hub cache and the local data it names in the working folder (its
warnings and notes asserted: EXPECTED), or refused by trinity by name with its reason, tried on a corpus config by
test_a_value_trinity_refuses_is_refused_by_name (REFUSALS). test_corpus_runs.py runs six of them on the CPU."""

import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest
import yaml
from omegaconf._utils import get_yaml_loader

from tests.upstream_examples.conftest import CONFIGS, HERE, MODELS
from trinity.cli.main import main
from trinity.config.workflows import NEEDS

PROFILES = ("a100", "ascend910b")
# The 20 upstream run configs (agentscope-ai/Trinity-RFT), each at the commit it was read at.
UPSTREAM_CONFIGS = {
    "examples/dapo_math/dapo.yaml": "f3a198560ece82714a84b44e7dda2228d9c10b5c",
    "examples/entropy/clipb.yaml": "7305496a5a70870755756e8e9e163d2e1ed4da8e",
    "examples/gigpo_alfworld/gigpo.yaml": "3284b6a0e08ca681a31f548863ca20a7d8518a71",
    "examples/grpo_alfworld_general_multi_step/alfworld.yaml": "3284b6a0e08ca681a31f548863ca20a7d8518a71",
    **{
        f"examples/grpo_alfworld_general_multi_step/alfworld_tuft_lora32{variant}.yaml": (
            "3284b6a0e08ca681a31f548863ca20a7d8518a71"
        )
        for variant in ("", "_lr5e5_speed", "_lr5e5_speed_ab_r32", "_lr5e5_speed_ab_r48", "_lr5e5_speed_ab_r72")
    },
    "examples/grpo_frozenlake_openjudge/frozenlake.yaml": "8b7fce3f6c69400d2a33079f7268c2201c9a249f",
    "examples/grpo_gsm8k_openjudge/gsm8k.yaml": "cd48fb2cae4a89476da86ad6c972efdfd9f022bb",
    "examples/grpo_intercode_sql/intercode_sql.yaml": "b36034183ef149fd6d28a4b6e38fc50f9cc341a9",
    "examples/gspo_gsm8k/gsm8k.yaml": "29f34aa449edd00cd18ee633db2eb5eb18932ae2",
    "examples/m2po_gsm8k/explorer.yaml": "402adb2be98a53f4295ee256a7111dc9d06a484c",
    "examples/m2po_gsm8k/trainer.yaml": "402adb2be98a53f4295ee256a7111dc9d06a484c",
    "examples/reinforceplusplus_gsm8k/gsm8k.yaml": "312a3940a104b22726c7cbfb213cad582666bd70",
    "examples/rlcr_math/rlcr_math.yaml": "baf1f2336908e2a983873c84bc6b33afd0642818",
    "examples/rloo_gsm8k/gsm8k.yaml": "312a3940a104b22726c7cbfb213cad582666bd70",
    "examples/sapo_gsm8k/gsm8k.yaml": "0c34dfa778dc8ead169bfe40d0f639f6002bb79e",
    "tests/template/config.yaml": "e2a93dbf6a91f93ec48d64126a6435406902e764",
}
DAPO_PROMPT = (
    "Solve the following math problem step by step. The last line of your response should be of the form Answer: "
    "$Answer (without quotes) where $Answer is the answer to the problem."
)
RLCR_PROMPT = (
    "Solve the math problem and finish with exactly this four-tag sequence:\n<think>your reasoning</think><answer>"
    "your final answer</answer><analysis>check whether the final answer is correct</analysis><confidence>q"
    "</confidence>\nUse the tags exactly as written and put nothing but whitespace after </confidence>.\nSet q to a "
    "finite number from 0 to 1 representing the probability that your final answer is correct."
)
# Every leaf key the 20 upstream configs set, with every value it takes in them (lists of mappings as `[]`).
UPSTREAM = {
    "algorithm.advantage_fn": ("clipb", "gigpo", "ppo"),
    "algorithm.advantage_fn_args.epsilon": (1e-06,),
    "algorithm.advantage_fn_args.fnorm": ("none",),
    "algorithm.advantage_fn_args.gamma": (1.0,),
    "algorithm.advantage_fn_args.mu": (2.5,),
    "algorithm.advantage_fn_args.omega": (1.0,),
    "algorithm.algorithm_type": (
        "dapo",
        "grpo_verl",
        "gigpo",
        "multi_step_grpo",
        "grpo",
        "gspo",
        "m2po",
        "reinforceplusplus",
        "rloo",
        "sapo",
        "ppo",
    ),
    "algorithm.bypass_old_logprobs": (True,),
    "algorithm.entropy_loss_fn": ("none",),
    "algorithm.kl_loss_fn": ("none", "k2"),
    "algorithm.kl_loss_fn_args.kl_coef": (0.0, 0.001),
    "algorithm.kl_penalty_fn": ("k3",),
    "algorithm.loss_agg_mode": ("seq-mean-token-sum",),
    "algorithm.optimizer.lr": (1e-06, 5e-06, 5e-05, 1e-05, 5e-07),
    "algorithm.optimizer.lr_scheduler_type": ("constant",),
    "algorithm.optimizer.lr_warmup_steps": (20,),
    "algorithm.optimizer.lr_warmup_steps_ratio": (0.0,),
    "algorithm.policy_loss_fn": ("ppo",),
    "algorithm.policy_loss_fn_args.clip_range": (0.2,),
    "algorithm.policy_loss_fn_args.clip_range_high": (0.28, 0.2),
    "algorithm.policy_loss_fn_args.clip_range_low": (0.2,),
    "algorithm.policy_loss_fn_args.clip_ratio_c": (1000000.0,),
    "algorithm.policy_loss_fn_args.log_ratio_clip": (20.0,),
    "algorithm.policy_loss_fn_args.loss_agg_mode": ("token-mean",),
    "algorithm.policy_loss_fn_args.m2_threshold": (0.04,),
    "algorithm.repeat_times": (16, 8, 1),
    "algorithm.sample_strategy": ("staleness_control",),
    "algorithm.sample_strategy_args.max_staleness": (8,),
    "buffer.batch_size": (32, 64, 16, 96, 8, 4),
    "buffer.explorer_input.default_reward_fn_type": (
        "math_dapo_reward",
        "math_boxed_reward",
        "trajectory_accuracy_grader_reward",
    ),
    "buffer.explorer_input.default_workflow_type": (
        "math_boxed_workflow",
        "async_math_workflow",
        "frozen_lake_workflow",
        "math_rm_workflow",
        "math_workflow",
    ),
    "buffer.explorer_input.eval_tasksets[].format.prompt_key": ("question", "problem"),
    "buffer.explorer_input.eval_tasksets[].format.response_key": ("answer", "ground_truth"),
    "buffer.explorer_input.eval_tasksets[].format.system_prompt": (DAPO_PROMPT,),
    "buffer.explorer_input.eval_tasksets[].name": (
        "AIME2024",
        "dapo-validation-500",
        "amc23",
        "aime24",
        "aime25",
        "frozenlake",
        "gsm8k-eval",
    ),
    "buffer.explorer_input.eval_tasksets[].path": (
        "HuggingFaceH4/aime_2024",
        "/path/to/dapo-validation",
        "math-ai/amc23",
        "math-ai/aime25",
        "${oc.env:TRINITY_TASKSET_PATH}",
        "${oc.env:TRINITY_TASKSET_PATH,openai/gsm8k}",
    ),
    "buffer.explorer_input.eval_tasksets[].repeat_times": (32, 4),
    "buffer.explorer_input.eval_tasksets[].rollout_args.temperature": (1.0, 0.7),
    "buffer.explorer_input.eval_tasksets[].rollout_args.top_k": (20,),
    "buffer.explorer_input.eval_tasksets[].rollout_args.top_p": (0.7, 0.8),
    "buffer.explorer_input.eval_tasksets[].split": ("train", "test"),
    "buffer.explorer_input.eval_tasksets[].storage_type": ("file",),
    "buffer.explorer_input.eval_tasksets[].subset_name": ("main",),
    "buffer.explorer_input.eval_tasksets[].workflow_args.agent_max_steps": (10,),
    "buffer.explorer_input.eval_tasksets[].workflow_args.env_max_steps": (8,),
    "buffer.explorer_input.eval_tasksets[].workflow_args.is_slippery": (False,),
    "buffer.explorer_input.taskset.default_reward_fn_type": ("rlcr_reward",),
    "buffer.explorer_input.taskset.default_workflow_type": (
        "step_wise_alfworld_workflow",
        "intercode_sql_workflow",
        "math_workflow",
    ),
    "buffer.explorer_input.taskset.enable_progress_bar": (False,),
    "buffer.explorer_input.taskset.format.prompt_key": ("prompt", "question", "game_file", "query_idx"),
    "buffer.explorer_input.taskset.format.response_key": ("solution", "ground_truth", "answer"),
    "buffer.explorer_input.taskset.format.system_prompt": (DAPO_PROMPT, RLCR_PROMPT),
    "buffer.explorer_input.taskset.name": (
        "dapo-math",
        "dapo_235",
        "alfworld",
        "frozenlake",
        "gsm8k",
        "intercode_sql",
        "rlcr-math",
        "taskset",
    ),
    "buffer.explorer_input.taskset.path": (
        "open-r1/DAPO-Math-17k-Processed",
        "${oc.env:TRINITY_TASKSET_PATH}",
        "examples/grpo_alfworld/alfworld_data",
        "${oc.env:TRINITY_TASKSET_PATH,openai/gsm8k}",
        "examples/grpo_intercode_sql/intercode_sql_data",
        "placeholder",
    ),
    "buffer.explorer_input.taskset.reward_fn_args.cache_length": (4096,),
    "buffer.explorer_input.taskset.reward_fn_args.enable_overlong_penalty": (True,),
    "buffer.explorer_input.taskset.reward_fn_args.judge_api_base_url_env": ("OPENAI_BASE_URL",),
    "buffer.explorer_input.taskset.reward_fn_args.judge_api_key_env": ("OPENAI_API_KEY",),
    "buffer.explorer_input.taskset.reward_fn_args.max_response_length": (20480,),
    "buffer.explorer_input.taskset.reward_fn_args.model_name": ("${oc.env:TRINITY_JUDGE_MODEL_NAME,qwen3-max}",),
    "buffer.explorer_input.taskset.reward_fn_args.normalize_score": (True,),
    "buffer.explorer_input.taskset.reward_fn_args.penalty_factor": (1.0,),
    "buffer.explorer_input.taskset.reward_fn_args.score_max": (3.0,),
    "buffer.explorer_input.taskset.reward_fn_args.score_min": (1.0,),
    "buffer.explorer_input.taskset.reward_fn_args.weights.accuracy": (0.5,),
    "buffer.explorer_input.taskset.reward_fn_args.weights.brier": (0.5,),
    "buffer.explorer_input.taskset.reward_fn_args.weights.confidence_one_or_zero": (1e-05,),
    "buffer.explorer_input.taskset.reward_fn_args.weights.format": (0.5,),
    "buffer.explorer_input.taskset.reward_fn_args.weights.mean_confidence": (1e-05,),
    "buffer.explorer_input.taskset.rollout_args.logprobs": (0, 20),
    "buffer.explorer_input.taskset.rollout_args.temperature": (1.0,),
    "buffer.explorer_input.taskset.split": ("train",),
    "buffer.explorer_input.taskset.storage_type": ("file",),
    "buffer.explorer_input.taskset.subset_name": ("all", "main"),
    "buffer.explorer_input.taskset.workflow_args.agent_max_steps": (10,),
    "buffer.explorer_input.taskset.workflow_args.auto_submit": (True,),
    "buffer.explorer_input.taskset.workflow_args.data_path": (
        "examples/grpo_intercode_sql/intercode_sql_data/raw/ic_spider_dev.json",
    ),
    "buffer.explorer_input.taskset.workflow_args.env_max_steps": (8,),
    "buffer.explorer_input.taskset.workflow_args.image_name": ("docker-env-sql",),
    "buffer.explorer_input.taskset.workflow_args.is_slippery": (False,),
    "buffer.explorer_input.taskset.workflow_args.max_env_steps": (30, 10),
    "buffer.explorer_input.taskset.workflow_args.reward_fn_args.judge_api_base_url_env": ("OPENAI_BASE_URL",),
    "buffer.explorer_input.taskset.workflow_args.reward_fn_args.judge_api_key_env": ("OPENAI_API_KEY",),
    "buffer.explorer_input.taskset.workflow_args.reward_fn_args.model_name": (
        "${oc.env:TRINITY_JUDGE_MODEL_NAME,qwen3-max}",
    ),
    "buffer.explorer_input.taskset.workflow_args.reward_fn_args.normalize_score": (True,),
    "buffer.explorer_input.taskset.workflow_args.reward_fn_args.score_max": (3.0,),
    "buffer.explorer_input.taskset.workflow_args.reward_fn_args.score_min": (1.0,),
    "buffer.explorer_input.taskset.workflow_args.reward_fn_type": ("trajectory_accuracy_grader_reward",),
    "buffer.explorer_input.taskset.workflow_args.use_base": (True,),
    "buffer.explorer_input.taskset.workflow_args.verbose": (False,),
    "buffer.total_epochs": (1, 20, 100),
    "buffer.train_batch_size": (7680, 256),
    "buffer.trainer_input.experience_buffer.max_read_timeout": (7200, 10800),
    "buffer.trainer_input.experience_buffer.name": (
        "math_buffer",
        "alfworld_gigpo_buffer",
        "alfworld_buffer",
        "gsm8k_buffer",
        "intercode_sql_buffer",
        "m2po_gsm8k_buffer",
        "rlcr_math_buffer",
    ),
    "buffer.trainer_input.experience_buffer.path": (
        "sqlite:///gsm8k.db",
        "sqlite:///intercode_sql.db",
        "sqlite:///m2po_gsm8k.db",
    ),
    "buffer.trainer_input.experience_buffer.replay_buffer.enable": (True,),
    "buffer.trainer_input.experience_buffer.storage_type": ("queue",),
    "checkpoint_root_dir": (
        "${oc.env:TRINITY_CHECKPOINT_ROOT_DIR,./checkpoints}",
        "${oc.env:TRINITY_CHECKPOINT_ROOT_DIR}",
        "",
    ),
    "cluster.gpu_per_node": (8, 0, 2, 4, "${oc.env:GPU_PER_NODE,2}"),
    "cluster.node_num": (1, "${oc.env:NODE_NUM,2}"),
    "cluster.ray_address": (
        "${oc.env:TRINITY_RAY_ADDRESS,auto}",
        "${oc.env:TRINITY_RAY_ADDRESS,127.0.0.1:6393}",
        "${oc.env:TRINITY_RAY_ADDRESS,127.0.0.1:6395}",
    ),
    "data_processor.experience_pipeline.operators[].name": ("mask_response_truncated", "dapo_dynamic_sampling"),
    "explorer.env_vars.ALFWORLD_DATA": ("${oc.env:ALFWORLD_DATA}",),
    "explorer.env_vars.TMPDIR": ("${oc.env:TMPDIR,/tmp}",),
    "explorer.eval_interval": (10, 20, 50, 100),
    "explorer.eval_on_startup": (True, False),
    "explorer.max_repeat_times_per_runner": (1,),
    "explorer.max_retry_times": (2,),
    "explorer.max_timeout": (3600,),
    "explorer.rollout_model.dtype": ("bfloat16",),
    "explorer.rollout_model.enable_chunked_prefill": (True,),
    "explorer.rollout_model.enable_history": (True,),
    "explorer.rollout_model.enable_prefix_caching": (False,),
    "explorer.rollout_model.enforce_eager": (True, False),
    "explorer.rollout_model.engine_num": (4, 2, 1, 6),
    "explorer.rollout_model.engine_type": ("vllm_async", "tinker"),
    "explorer.rollout_model.gpu_memory_utilization": (0.7, 0.85),
    "explorer.rollout_model.seed": (42,),
    "explorer.rollout_model.tensor_parallel_size": (1, 2),
    "explorer.runner_per_model": (8, 16, 32, 48, 72),
    "ignore_validator_suggestions": (True,),
    "log.level": ("INFO",),
    "mode": ("both", "explore", "train"),
    "model.enable_prompt_truncation": (False,),
    "model.enable_thinking": (False,),
    "model.max_model_len": (21504, 20480, 8191, 14436, 2048, 16384, 4096),
    "model.max_prompt_tokens": (1024, 7679, 10240),
    "model.max_response_tokens": (20480, 7168, 16384, 512, 10240, 1024, 4096, 3072, 2048),
    "model.model_path": (
        "${oc.env:TRINITY_MODEL_PATH}",
        "${oc.env:TRINITY_MODEL_PATH,Qwen/Qwen2.5-7B-Instruct}",
        "${oc.env:TRINITY_MODEL_PATH,Qwen/Qwen3-1.7B}",
        "${oc.env:TRINITY_MODEL_PATH,Qwen/Qwen2.5-3B-Instruct}",
        "${oc.env:TRINITY_MODEL_PATH,Qwen/Qwen2.5-1.5B-Instruct}",
        "",
    ),
    "model.temperature": (0.7,),
    "model.tinker.base_url": ("${oc.env:TINKER_BASE_URL,http://127.0.0.1:10610}",),
    "model.tinker.enable": (True,),
    "model.tinker.forward_backward_chunk_bytes": (4500000,),
    "model.tinker.rank": (32,),
    "model.tinker.server_loss_fn": ("trinity_ppo",),
    "model.tinker.train_unembed": (False,),
    "monitor.monitor_type": ("tensorboard",),
    "name": (
        "dapo",
        "clipb_example",
        "GiGPO_Alfworld",
        "Step_Wise_Alfworld",
        "Step_Wise_Alfworld_TuFT_lora32_lr5e5_${oc.env:TRINITY_MACHINE_ID}",
        "Step_Wise_Alfworld_TuFT_lora32_lr5e5_speed_${oc.env:TRINITY_MACHINE_ID}",
        "trinity-frozen-lake-openjudge",
        "qwen2.5-1.5B-gsm8k-openjudge",
        "INTERCODE_SQL_RFT",
        "qwen2.5-1.5B-gsm8k-gspo",
        "m2po-qwen2.5-1.5B-gsm8k",
        "qwen2.5-1.5B-gsm8k-reinforceplusplus",
        "rlcr-math",
        "qwen2.5-1.5B-gsm8k-rloo",
        "qwen2.5-1.5B-gsm8k-sapo",
        "test",
    ),
    "project": (
        "Trinity-RFT-example",
        "math_dapo",
        "ALFWORLD",
        "FrozenLake-OpenJudge",
        "Trinity-RFT-gsm8k-openjudge",
        "INTERCODE_SQL",
        "Trinity-RFT-gsm8k",
        "Trinity-RFT-M2PO",
        "unittest",
    ),
    "synchronizer.sync_interval": (16, 1, 2, 8, 10),
    "synchronizer.sync_method": ("nccl", "memory", "checkpoint"),
    "synchronizer.sync_style": ("explorer_driven", "fully_async"),
    "synchronizer.sync_timeout": (1200, 3200, 3600),
    "synchronizer.wait_for_checkpoint": (False,),
    "trainer.enable_preview": (True,),
    "trainer.grad_clip": (1.0,),
    "trainer.max_token_len_per_gpu": (22000, 20480, 16384),
    "trainer.save_hf_checkpoint": ("never",),
    "trainer.save_interval": (100, 200, 50, 10, 1000),
    "trainer.total_steps": (250,),
    "trainer.trainer_config.actor_rollout_ref.actor.checkpoint.load_contents": (["model", "optimizer", "extra"],),
    "trainer.trainer_config.actor_rollout_ref.actor.checkpoint.save_contents": (["model", "optimizer", "extra"],),
    "trainer.trainer_config.actor_rollout_ref.actor.fsdp_config.optimizer_offload": (True,),
    "trainer.trainer_config.actor_rollout_ref.actor.fsdp_config.param_offload": (True,),
    "trainer.trainer_config.actor_rollout_ref.hybrid_engine": (True,),
    "trainer.trainer_config.actor_rollout_ref.model.enable_gradient_checkpointing": (True,),
    "trainer.trainer_config.actor_rollout_ref.model.use_remove_padding": (True,),
    "trainer.trainer_config.actor_rollout_ref.ref.fsdp_config.param_offload": (True,),
    "trainer.trainer_config.algorithm.rollout_correction.bypass_mode": (False,),
    "trainer.trainer_config.critic.checkpoint.load_contents": (["model", "optimizer", "extra"],),
    "trainer.trainer_config.critic.checkpoint.save_contents": (["model", "optimizer", "extra"],),
    "trainer.trainer_config.critic.cliprange_value": (0.5,),
    "trainer.trainer_config.critic.model.use_remove_padding": (False,),
    "trainer.trainer_config.critic.optim.lr": (1e-05,),
    "trainer.trainer_config.trainer.max_actor_ckpt_to_keep": (1,),
    "trainer.trainer_config.trainer.max_critic_ckpt_to_keep": (1,),
    "trainer.trainer_type": ("verl", "tinker"),
    "trainer.ulysses_sequence_parallel_size": (1,),
    "trainer.use_dynamic_bsz": (True,),
}

# The variables the configs read with no default, set for the config that reads them as its user sets them
# ("{site}": the working folder); every other variable a config reads stays unset, so its default applies.
ENV = {
    "dapo_math_boxed": {"TRINITY_MODEL_PATH": "models/Qwen2.5-3B-Instruct"},  # a downloaded copy (a larger model)
    "grpo_verl_math_evals": {"TRINITY_TASKSET_PATH": "data/dapo-math"},
    "frozen_lake_judge": {"TRINITY_TASKSET_PATH": "data/frozenlake"},
    "alfworld_lora32": {"TRINITY_MACHINE_ID": "node07", "ALFWORLD_DATA": "{site}/alfworld"},
    "alfworld_lora32_speed": {
        "TRINITY_MACHINE_ID": "node07",
        "ALFWORLD_DATA": "{site}/alfworld",
        "TRINITY_CHECKPOINT_ROOT_DIR": "{site}/checkpoints",
    },
}
NCCL = ("synchronizer.sync_method", "'nccl' is not the collective backend of ascend910b, which is 'hccl'")
TIGHT = ("model.model_path", "is tight on ascend910b: it needs 60.7 GiB per device and gets 64.0 GiB (95%")
HISTORY = "explorer.rollout_model.enable_history"
TWINS = "trainer.trainer_config.actor_rollout_ref"
FROZEN_LAKE_TWINS = (
    "actor.fsdp_config.param_offload",
    "actor.fsdp_config.optimizer_offload",
    "model.use_remove_padding",
    "model.enable_gradient_checkpointing",
)


@dataclass(frozen=True)
class Expected:
    """What `trinity config validate` says of a corpus config besides that it is valid: its warnings, each (key,
    what the message says), on both profiles, on ascend910b only and on a100 only; the keys of its notes."""

    warnings: tuple = ()
    ascend: tuple = (NCCL,)  # every config that names nccl: Ascend's collective is hccl, and trinity says so
    a100: tuple = ()
    notes: tuple = ()
    ascend_notes: tuple = ()


GSM8K = Expected()
EXPECTED = {
    "alfworld_lora32": Expected(ascend=(), notes=("cluster.gpu_per_node", HISTORY)),
    "alfworld_lora32_speed": Expected(
        # the r72 variant's 72 runners each run one rollout (max_repeat_times_per_runner: 1): 72 sequences at once
        warnings=(("model.max_model_len", "the KV cache for 72 sequences of 8191 tokens"),),
        ascend=(),
        notes=("cluster.gpu_per_node", HISTORY),
    ),
    "dapo_math_boxed": Expected(
        warnings=(
            ("explorer.eval_interval", "10 is not a multiple of synchronizer.sync_interval=16; using 16"),
            ("model.max_model_len", "the KV cache for 128 sequences of 21504 tokens"),
        )
    ),
    "frozen_lake_judge": Expected(
        # its verl passthrough's keys that are trinity's settings, set as those (VERL_TWINS); padding removal with
        # a100's sdpa, which has no variable-length kernel (910B's flash_attention_2 on torch_npu has one)
        a100=(("trainer.use_remove_padding", "is not one of the kernels with variable-length attention on a100"),),
        notes=tuple(f"{TWINS}.{key}" for key in FROZEN_LAKE_TWINS),
        ascend_notes=("algorithm.bypass_old_logprobs",),
    ),
    "gigpo_alfworld": Expected(notes=(HISTORY,)),
    "grpo_verl_math_evals": Expected(
        warnings=(("model.max_model_len", "the KV cache for 128 sequences of 8192 tokens"),),
        ascend=(NCCL, TIGHT),
        notes=(
            "explorer.rollout_model.engine_type",  # vllm_async, upstream's former name of its vLLM engine
            # verl's rollout_correction section is trinity's, its bypass_mode algorithm.bypass_old_logprobs
            "trainer.trainer_config.algorithm.rollout_correction",
            "algorithm.rollout_correction.bypass_mode",
        ),
    ),
    "gsm8k_grpo": GSM8K,
    "gsm8k_judge_grpo": GSM8K,
    "gspo_gsm8k": GSM8K,
    "intercode_sql_own_workflow": Expected(
        warnings=(("explorer.eval_interval", "100 is not a multiple of synchronizer.sync_interval=8; using 96"),),
        ascend=(NCCL, TIGHT),
    ),
    "m2po_gsm8k_explorer": Expected(ascend=()),
    "m2po_gsm8k_trainer": Expected(ascend=()),
    "multi_step_grpo_alfworld": Expected(notes=(HISTORY,)),
    "ppo_critic": Expected(
        ascend=(),
        notes=(
            "synchronizer.wait_for_checkpoint",
            "trainer.trainer_config.trainer.max_actor_ckpt_to_keep",
            "trainer.trainer_config.trainer.max_critic_ckpt_to_keep",
        ),
    ),
    "reinforceplusplus_gsm8k": GSM8K,
    "rlcr_math": Expected(),
    "rloo_gsm8k": GSM8K,
    "sapo_gsm8k": GSM8K,
}
TINKER = "TuFT 0.2.2, samples only on GPUs"  # the reason trinity gives for each Tinker key and value
TINKER_KEYS = {
    "model.tinker.enable": True,
    "model.tinker.base_url": "${oc.env:TINKER_BASE_URL,http://127.0.0.1:10610}",
    "model.tinker.rank": 32,
    "model.tinker.train_unembed": False,
    "explorer.rollout_model.engine_type": "tinker",
    "trainer.trainer_type": "tinker",
}
TINKER_ERRORS = (
    ("model.tinker", TINKER),
    ("explorer.rollout_model.engine_type", TINKER),
    ("trainer.trainer_type", TINKER),
)


@dataclass(frozen=True)
class Refusal:
    """Upstream values trinity refuses: set (dotted keys, numeric list indexes) in a copy of a corpus config, which
    `trinity config validate` then refuses with exactly these errors, each (key, what the message says)."""

    config: str
    sets: dict
    errors: tuple


REFUSALS = {
    # the TuFT examples as upstream writes them: Tinker trains and samples on a remote service
    "tinker_lora32": Refusal(
        "alfworld_lora32", {**TINKER_KEYS, "model.tinker.forward_backward_chunk_bytes": 4500000}, TINKER_ERRORS
    ),
    "tinker_lora32_speed": Refusal(
        "alfworld_lora32_speed", {**TINKER_KEYS, "model.tinker.server_loss_fn": "trinity_ppo"}, TINKER_ERRORS
    ),
    # upstream's test template leaves the model to its tests; trinity needs one in the config
    "empty_model_path": Refusal(
        "ppo_critic", {"model.model_path": ""}, (("model.model_path", "string should have at least 1 character"),)
    ),
    "intercode_sql_workflow": Refusal(
        "intercode_sql_own_workflow",
        {"buffer.explorer_input.taskset.default_workflow_type": "intercode_sql_workflow"},
        (("buffer.explorer_input.taskset.default_workflow_type", "trinity starts no Docker containers"),),
    ),
    # upstream's placeholder for the user's own copy of the data: a folder no machine has
    "placeholder_path": Refusal(
        "grpo_verl_math_evals",
        {"buffer.explorer_input.eval_tasksets.0.path": "/path/to/dapo-validation"},
        (("buffer.explorer_input.eval_tasksets[0].path", "'/path/to/dapo-validation' is not on this machine"),),
    ),
}


def load(path: Path) -> dict:
    """A config as trinity reads it (OmegaConf's YAML loader: `1e-6` is a float), nothing resolved."""
    return yaml.load(path.read_text(), Loader=get_yaml_loader())  # noqa: S506 (OmegaConf's safe loader)


def leaves(node, prefix: str = ""):
    """(dotted key, value) of every leaf; a list of mappings is `key[]`, any other list a value."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list) and node and all(isinstance(item, dict) for item in node):
        for item in node:
            yield from leaves(item, prefix + "[]")
    else:
        yield prefix, node


def pairs(items) -> set:
    """(key, value) pairs compared by value and type: True is not 1, 1.0 is not 1."""
    return {(key, repr(value)) for key, value in items}


def upstream() -> set:
    return pairs((key, value) for key, values in UPSTREAM.items() for value in values)


def refused() -> dict:
    """(key, value) -> the refusals that try it."""
    found: dict = {}
    for name, refusal in REFUSALS.items():
        for key, value in refusal.sets.items():
            found.setdefault((re.sub(r"\.\d+(?=\.|$)", "[]", key), repr(value)), []).append(name)
    return found


def test_every_upstream_key_and_value_is_set_by_a_corpus_config_or_refused_by_a_test():
    written = set().union(*(pairs(leaves(load(path))) for path in CONFIGS))
    wanted, tried = upstream(), refused()
    assert len(UPSTREAM) == 169 and len(wanted) == 340  # the 20 configs' keys and values
    assert sorted(wanted - written - set(tried)) == []
    assert set(tried) <= wanted  # a refusal tries upstream's values only
    assert set(tried).isdisjoint(written)  # and no corpus config writes one
    assert (len(wanted & written), len(set(tried))) == (329, 11)
    # every upstream key is written somewhere, but those whose every value trinity refuses: model.tinker's
    keys_written = {key for key, _ in written}
    assert sorted(set(UPSTREAM) - keys_written) == [
        "model.tinker.base_url",
        "model.tinker.enable",
        "model.tinker.forward_backward_chunk_bytes",
        "model.tinker.rank",
        "model.tinker.server_loss_fn",
        "model.tinker.train_unembed",
    ]


def header(path: Path) -> str:
    """A config's leading comment, as one line."""
    lines = path.read_text().splitlines()
    return " ".join(
        line.lstrip("# ") for line in lines[: next(i for i, s in enumerate(lines) if not s.startswith("#"))]
    )


def test_each_corpus_config_names_the_upstream_configs_it_carries_and_every_one_is_carried():
    assert {path.stem for path in CONFIGS} == set(EXPECTED)
    carried = set()
    for path in CONFIGS:
        said = re.search(r"Carries the (keys|run settings) of Trinity-RFT's (.*)", header(path))
        assert said, f"{path.name}: its header says which upstream configs it carries"
        named = re.findall(r"(?:examples|tests)/[\w/.-]+?\.yaml", said.group(2))
        assert named and set(named) <= set(UPSTREAM_CONFIGS), (path.name, named)
        carried |= set(named)
    assert carried == set(UPSTREAM_CONFIGS)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.stem)
def test_a_corpus_config_passes_the_json_schema_its_first_line_names_to_editors(config):
    """ppo_critic writes `node_num: ${oc.env:NODE_NUM,2}` as upstream's template does: an interpolation passes where
    the field is a number (it is typed by the field it lands in)."""
    first = config.read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    named = (config.parent / first.split("=", 1)[1]).resolve()
    assert named == HERE.parents[1] / "schemas" / "run-config.schema.json"
    errors = jsonschema.Draft7Validator(json.loads(named.read_text())).iter_errors(load(config))
    assert [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors] == []


# Every variable a corpus config reads: unset for the configs ENV does not give it to.
READS = sorted({v for path in CONFIGS for v in re.findall(r"\$\{oc\.env:(\w+)", path.read_text())} - {"TMPDIR"})


@pytest.fixture
def validate(validation_site, monkeypatch, capsys):
    """`trinity config validate` in this process, from the site's folder, with its hub cache and offline; each
    config's ENV set as its user sets it."""
    monkeypatch.chdir(validation_site)
    for var in [v for v in os.environ if v.startswith("TRINITY_")] + READS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(validation_site / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def run(config: Path, profile: str, *args: str) -> tuple[int, str, str]:
        with monkeypatch.context() as env:
            for var, value in ENV.get(Path(config).stem.split(".")[0], {}).items():
                env.setenv(var, value.format(site=validation_site))
            code = main(["config", "validate", "-c", str(config), f"hardware={profile}", *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def lacking_workflows(text: str) -> set[str]:
    """The workflows a config's text names whose packages (config/workflows.py NEEDS) this Python cannot import."""
    return {
        name
        for name, needs in NEEDS.items()
        if name in text and not all(importlib.util.find_spec(p) for p in needs.packages)
    }


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.stem)
def test_a_corpus_config_is_valid_with_the_warnings_it_should_get(validate, validation_site, config, profile):
    code, out, err = validate(config, profile, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["valid"] and report["hardware"] == profile
    expected = EXPECTED[config.stem]
    warnings = [i for i in report["issues"] if i["severity"] == "warning"]
    # a workflow whose packages this Python lacks (an extra the README's test command leaves out: alfworld) is a
    # warning of validate's, here exactly where they are missing
    lacking = [w for w in warnings if "which this Python cannot import" in w["message"]]
    assert {w["message"].split("'")[1] for w in lacking} == lacking_workflows(config.read_text()), lacking
    warnings = [w for w in warnings if w not in lacking]
    wanted = expected.warnings + (expected.ascend if profile == "ascend910b" else expected.a100)
    assert len(warnings) == len(wanted), warnings
    for key, says in wanted:
        assert any(w["key"] == key and says in w["message"] for w in warnings), (key, says, warnings)
    notes = sorted(i["key"] for i in report["issues"] if i["severity"] == "note")
    assert notes == sorted(expected.notes + (expected.ascend_notes if profile == "ascend910b" else ()))
    assert {i["severity"] for i in report["issues"]} <= {"warning", "note"}
    # the memory check is the real one: the model's shape read from its config.json in the hub cache (or, where the
    # config's variable names a local copy, there), and it fits
    [plan] = report["memory"]
    assert plan["fits"] and all(c["status"] != "does not fit" for c in plan["checks"] if c["hard"])
    [model] = plan["models"]
    local = ENV.get(config.stem, {}).get("TRINITY_MODEL_PATH")
    if local:
        assert model["source"] == f"{local}/config.json"  # read where the variable points
    else:
        cached = "models--" + model["name"].replace("/", "--")
        assert model["name"] in MODELS and f"/hf/hub/{cached}/snapshots/" in model["source"]
    assert model["shape"]["vocab"] == MODELS.get(model["name"], MODELS["Qwen/Qwen2.5-3B-Instruct"])["vocab_size"]


# an error and its indented `allowed:` and `hint:` lines
ERROR = re.compile(r"^error: (?P<source>.+?): (?P<key>[\w.\[\]]+): (?P<message>.*(?:\n    .*)*)", re.M)


def with_values(config: dict, sets: dict) -> dict:
    for dotted, value in sets.items():
        *parents, last = [int(p) if p.isdigit() else p for p in dotted.split(".")]
        node = config
        for part in parents:
            node = node[part] if isinstance(part, int) else node.setdefault(part, {})
        node[last] = value
    return config


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", REFUSALS)
def test_a_value_trinity_refuses_is_refused_by_name(validate, tmp_path, name, profile):
    refusal = REFUSALS[name]
    path = tmp_path / f"{refusal.config}.{name}.yaml"
    path.write_text(yaml.safe_dump(with_values(load(HERE / f"{refusal.config}.yaml"), refusal.sets), sort_keys=False))
    code, out, err = validate(path, profile)
    assert code == 2 and out == "", err
    errors = [m.groupdict() for m in ERROR.finditer(err)]
    assert sorted(e["key"] for e in errors) == sorted(key for key, _ in refusal.errors), err
    for key, says in refusal.errors:
        [error] = [e for e in errors if e["key"] == key]
        assert says in error["message"] and error["source"].startswith(str(path)), error
