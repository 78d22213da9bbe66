"""Rules of trinity/config/derive/buffer.py, each through `trinity config render/validate`:
tasksets' names, workflows, repeat counts and sampling, the batch size, the engine's log-probs.
"""

SHAPED = (
    "algorithm:\n  repeat_times: 4\nbuffer:\n  explorer_input:\n    default_workflow_type: math_workflow\n"
    "    taskset:\n      path: /data/t\n      rollout_args:\n        temperature: 0.7\n"
)


def test_the_trainer_recomputes_old_logprobs_where_the_engine_returns_raw_ones_and_sampling_shapes_them(render):
    """vllm-ascend builds its sampler without vLLM's logprobs_mode: on Ascend vLLM's log-probs are the logits' own,
    not those of a distribution at temperature 0.7, so the engines' cannot stand for the old policy's."""
    result, cfg = render(SHAPED, "hardware=ascend910b")
    assert cfg["algorithm"]["bypass_old_logprobs"] is False
    assert "note: schema default: algorithm.bypass_old_logprobs: 'vllm' returns the logits' own log-probs" in result.err
    assert (
        "profiles/ascend910b.yaml:24:3), and buffer.explorer_input.taskset.rollout_args sample from another "
        "distribution: the trainer recomputes the old log-probs" in result.err
    )
    assert render(SHAPED, "hardware=a100")[1]["algorithm"]["bypass_old_logprobs"] is True  # vLLM's processed ones
    at_one = render(SHAPED.replace("0.7", "1.0"), "hardware=ascend910b")[1]  # the logits' own distribution
    transformers = render(SHAPED, "hardware=ascend910b", "explorer.rollout_model.engine_type=transformers")[1]
    assert at_one["algorithm"]["bypass_old_logprobs"] is True and transformers["algorithm"]["bypass_old_logprobs"]
    result, cfg = render(SHAPED, "hardware=ascend910b", "algorithm.bypass_old_logprobs=true")
    assert cfg["algorithm"]["bypass_old_logprobs"] is True  # yours stands, warned about
    assert "the update would take wrong old log-probs" in result.err


def test_m2pos_batch_mask_needs_the_rollouts_log_probs_and_token_mean(render):
    """M2PO masks tokens from the current policy's log-ratio to the rollout's own: on Ascend, where shaped sampling
    has the trainer recompute the old log-probs (the rule above), and under any other aggregation, it is refused."""
    m2po = SHAPED.replace("algorithm:\n", "algorithm:\n  algorithm_type: m2po\n")
    assert render(m2po, "hardware=a100")[0].code == 0
    result, _ = render(m2po, "hardware=ascend910b")
    assert result.code == 2
    assert (
        "algorithm.bypass_old_logprobs: policy_loss_fn 'm2po' compares the current policy with the rollout's own "
        "log-probs, and false has the trainer recompute them as the current policy's" in result.err
    )
    result, _ = render(m2po, "hardware=a100", "algorithm.loss_agg_mode=seq-mean-token-mean")
    assert result.code == 2
    assert "algorithm.loss_agg_mode: policy_loss_fn 'm2po' normalises over every valid token of the batch" in result.err
    assert "allowed: 'token-mean'" in result.err


TASKSETS = """\
model:
  model_path: /m
  max_response_tokens: 64
  temperature: 0.7
algorithm:
  repeat_times: 4
buffer:
  explorer_input:
    taskset: {path: /d}
    eval_tasksets: [{path: /d}, {path: /d, default_workflow_type: arith_workflow, rollout_args: {temperature: 0}}]
    default_workflow_type: math_workflow
    default_eval_workflow_type: arith_workflow
  trainer_input:
    experience_buffer: {path: /e}
"""


def test_unnamed_tasksets_and_buffers_get_upstreams_names(render):
    cfg = render(TASKSETS, "hardware=a100")[1]["buffer"]
    assert cfg["explorer_input"]["taskset"]["name"] == "taskset_0"
    assert [t["name"] for t in cfg["explorer_input"]["eval_tasksets"]] == ["eval_taskset_0", "eval_taskset_1"]
    assert cfg["trainer_input"]["experience_buffer"]["name"] == "experience_buffer"
    assert cfg["trainer_input"]["experience_buffer"]["storage_type"] == "queue"  # upstream's default


def test_tasksets_take_the_inputs_workflow_evaluation_first(render):
    # a reward may name only what the taskset's workflow computes: the training set names its own
    text = TASKSETS.replace("taskset: {path: /d}", "taskset: {path: /d, default_reward_fn_type: math_reward}").replace(
        "    default_eval_workflow_type: arith_workflow\n",
        "    default_eval_workflow_type: arith_workflow\n    default_reward_fn_type: exact_match\n",
    )
    cfg = render(text, "hardware=a100")[1]["buffer"]["explorer_input"]
    assert cfg["taskset"]["default_workflow_type"] == "math_workflow"
    assert [t["default_workflow_type"] for t in cfg["eval_tasksets"]] == ["arith_workflow", "arith_workflow"]
    assert cfg["taskset"]["default_reward_fn_type"] == "math_reward"  # its own: the reward math_workflow computes
    assert {t["default_reward_fn_type"] for t in cfg["eval_tasksets"]} == {"exact_match"}


def test_sampling_defaults_come_from_the_model(render):
    cfg = render(TASKSETS, "hardware=a100")[1]["buffer"]["explorer_input"]
    train, first, greedy = (
        cfg["taskset"]["rollout_args"],
        cfg["eval_tasksets"][0]["rollout_args"],
        cfg["eval_tasksets"][1]["rollout_args"],
    )
    assert (train["temperature"], train["top_p"], train["max_tokens"]) == (0.7, 1.0, 64)
    assert (first["temperature"], greedy["temperature"]) == (0.7, 0)  # a taskset's own value wins
    assert (cfg["taskset"]["repeat_times"], cfg["eval_tasksets"][0]["repeat_times"]) == (4, 1)


def test_explain_names_the_model_as_the_source_of_a_tasksets_temperature(cli, write):
    result = cli(
        "config",
        "render",
        "-c",
        write("run.yaml", TASKSETS),
        "hardware=a100",
        "--explain",
        "buffer.explorer_input.taskset.rollout_args.temperature",
    )
    assert (
        result.code == 0 and "rule rollout_args" in result.out and "model.temperature=0.7 (run.yaml:4:3)" in result.out
    )


def test_training_rollouts_cannot_be_greedy_but_evaluation_may_be(render):
    result, _ = render(TASKSETS.replace("temperature: 0.7", "temperature: 0"), "hardware=a100")
    assert result.code == 2 and result.err.count("error:") == 1
    assert (
        "error: run.yaml:4:3: model.temperature: training rollouts are greedy (temperature 0), but the update "
        "divides logits by the temperature\n    allowed: > 0\n" in result.err
    )
    colocated, _ = render(TASKSETS.replace("temperature: 0.7", "temperature: 0"), "hardware=a100", "mode=colocate")
    # colocate trains too
    assert colocated.code == 2 and "model.temperature: training rollouts are greedy" in colocated.err
    assert (
        render(
            TASKSETS.replace("temperature: 0.7", "temperature: 0"),
            "hardware=a100",
            "algorithm.algorithm_type=sft",
            "mode=train",
        )[0].code
        == 0
    )
    assert render(TASKSETS.replace("temperature: 0.7", "temperature: 0"), "hardware=a100", "mode=explore")[0].code == 0


def test_training_tasksets_share_one_temperature(render):
    text = TASKSETS.replace(
        "taskset: {path: /d}", "tasksets: [{path: /d}, {path: /d, rollout_args: {temperature: 1.0}}]"
    )
    result, _ = render(text, "hardware=a100")
    assert result.code == 2
    assert (
        "model.temperature: training tasksets sample at different temperatures (model.temperature=0.7, "
        "buffer.explorer_input.tasksets.1.rollout_args.temperature=1.0)" in result.err
    )
    assert render(text.replace("temperature: 1.0", "temperature: 0.7"), "hardware=a100")[0].code == 0


def test_an_unknown_default_workflow_is_reported_once_where_it_is_written(render):
    result, _ = render(
        TASKSETS.replace("default_workflow_type: math_workflow", "default_workflow_type: mathh_workflow"),
        "hardware=a100",
    )
    assert result.code == 2 and result.err.count("unknown workflow 'mathh_workflow'") == 1
    assert "run.yaml:11:5: buffer.explorer_input.default_workflow_type: unknown workflow 'mathh_workflow'" in result.err


def test_a_taskset_without_a_workflow_is_an_error_unless_its_rows_name_theirs(render):
    text = "algorithm:\n  repeat_times: 4\nbuffer:\n  explorer_input:\n    taskset: {path: /d}\n"
    result, _ = render(text, "hardware=a100")
    assert (
        result.code == 2
        and "error: run.yaml:7:5: buffer.explorer_input.taskset.default_workflow_type: no workflow for this taskset"
        in result.err
    )
    result, cfg = render(text.replace("{path: /d}", "{path: /d, format: {workflow_key: wf}}"), "hardware=a100")
    assert result.code == 0 and cfg["buffer"]["explorer_input"]["taskset"]["format"]["workflow_key"] == "wf"
