"""`trinity run` with the keys Trinity-RFT's example configs set (issue 46), on the shortened demo, as a user runs it:
what each key does is read from what the run leaves behind (experiences, metrics.jsonl, TensorBoard events, logs)."""

import json
import math

import pytest

from tests.cli.test_run import GRPO_ONLY, RUN, lines, trinity

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.train]
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

KEPT = "buffer.trainer_input.experience_buffer.storage_type=file"  # the experiences stay readable in the run directory
EXPLORE_KEYS = (
    "mode=explore",
    "buffer.total_steps=2",
    KEPT,
    "explorer.max_repeat_times_per_runner=1",  # each of a task's 4 rollouts a run of its own
    "+buffer.explorer_input.taskset.rollout_args.logprobs=3",
    "+data_processor.experience_pipeline.operators=[{name: mask_response_truncated}, {name: dapo_dynamic_sampling}]",
    "+log.level=DEBUG",
    "+log.group_by_node=true",
    "+explorer.rollout_model.enable_history=true",
    "+data_processor.experience_pipeline.save_input=true",
    "+data_processor.experience_pipeline.input_save_path=explorer_input.jsonl",
)


def test_an_explore_run_splits_tasks_into_runs_records_top_logprobs_filters_and_logs_by_node(run_env, tmp_path):
    proc = trinity(run_env, tmp_path, *GRPO_ONLY, *EXPLORE_KEYS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / RUN
    experiences = [json.loads(line) for line in (run / "arith_experiences.jsonl").read_text().splitlines()]
    groups: dict[str, list[dict]] = {}
    for exp in experiences:
        groups.setdefault(exp["group"], []).append(exp)
    for group in groups.values():
        # whole tasks, each of its 4 runs numbered as upstream numbers them; some right and some wrong (dynamic
        # sampling)
        assert sorted(e["run"] for e in group) == [0, 1, 2, 3]
        assert 0 < sum(e["metrics"]["accuracy"] > 0 for e in group) < 4
    for exp in experiences:
        assert len(exp["top_logprobs"]) == len(exp["response_ids"])
        for token, own, top in zip(exp["response_ids"], exp["logprobs"], exp["top_logprobs"]):
            values = list(top.values())
            assert len(top) == 3 and values == sorted(values, reverse=True)
            assert math.isclose(top.get(str(token), own), own, abs_tol=1e-4)  # the sampled token's, where among them
        # a response cut at max_tokens trains none of its tokens (mask_response_truncated)
        assert (exp["action_mask"] == [0] * len(exp["response_ids"])) == exp["truncated"]
    explored = lines(run, "explorer")
    assert [r["step"] for r in explored] == [1, 2]
    assert sum(r["experiences"] for r in explored) == len(experiences)
    assert all(r["filtered_count"] == 16 - r["experiences"] for r in explored)  # 4 tasks x 4 rollouts a step
    # save_input: every rollout as made, before the operators dropped or masked any
    made = [json.loads(line) for line in (run / "explorer_input.jsonl").read_text().splitlines()]
    assert [e["step"] for e in made] == [1] * 16 + [2] * 16 and any(e["truncated"] for e in made)
    # not yet masked (mask_response_truncated comes after): no mask, every response token trained
    assert all(e["action_mask"] is None or all(e["action_mask"]) for e in made)
    # every cut response was masked, those dynamic sampling dropped after among them
    assert sum(r["masked_truncated_count"] for r in explored) >= sum(e["truncated"] for e in experiences)
    assert sum(r["masked_truncated_count"] for r in explored) > 0  # the demo's 4-token budget cuts some
    # log.group_by_node: the roles' logs under the node's IP, as Ray names the node
    import ray

    node = run / "logs" / ray.util.get_node_ip_address()
    assert (node / "explorer.log").exists() and not (run / "logs" / "explorer.log").exists()


def test_a_run_with_trinity_rfts_example_keys_honours_each_of_them(run_env, tmp_path):
    """The replay buffer serves the trainer; every step's lowest- and highest-reward rollouts are previewed in
    metrics.jsonl and as a TensorBoard text summary; the rest of the tuft examples' keys are accepted."""
    keys = (
        "buffer.total_steps=2",
        "+buffer.trainer_input.experience_buffer.replay_buffer.enable=true",
        "+buffer.trainer_input.experience_buffer.max_read_timeout=600",
        "+trainer.enable_preview=true",
        "+log.level=INFO",
        "+synchronizer.wait_for_checkpoint=false",
        "+cluster.node_num=0",
    )
    proc = trinity(run_env, tmp_path, *GRPO_ONLY, *keys)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / RUN
    assert [(r["step"], r["experiences"]) for r in lines(run, "trainer")] == [(1, 16), (2, 16)]
    previews = lines(run, "preview")
    assert [(r["step"], r["table"], len(r["rows"])) for r in previews] == [
        (1, "rollout_examples", 2),
        (2, "rollout_examples", 2),
    ]  # every synchronizer.sync_interval (1) steps
    for preview in previews:
        low, high = preview["rows"]
        assert low["reward"] <= high["reward"] and low["prompt"] and high["response"] is not None
    events = event_accumulator.EventAccumulator(str(run / "tensorboard"), size_guidance={"tensors": 0})
    events.Reload()
    assert [t.step for t in events.Tensors("rollout_examples")] == [1, 2]


def test_a_train_step_that_waits_longer_than_max_read_timeout_ends_the_run_naming_it(run_env, tmp_path):
    """One explore step makes 16 experiences and the train step takes 32; strictly on-policy, the next explore step
    waits for that train step: after max_read_timeout the run ends, naming the key (not synchronizer.sync_timeout)."""
    waits = (
        "buffer.total_steps=1",
        "buffer.train_batch_size=32",
        "+buffer.trainer_input.experience_buffer.max_read_timeout=5",
    )
    proc = trinity(run_env, tmp_path, *GRPO_ONLY, *waits, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "after 5 s (buffer.trainer_input.experience_buffer.max_read_timeout)" in proc.stderr
    assert not lines(tmp_path / RUN, "trainer")


def test_two_trainer_ranks_train_on_balanced_halves_of_each_batch(run_env, tmp_path):
    """trainer.balance_batch (upstream's default, true) on 2 trainer ranks (3 CPU slots: one engine, two ranks): each
    train step's 16 rollouts are dealt 8 and 8 with about as many tokens each, and the trainer lines carry verl's
    global_seqlen metrics of it, which add up to the step's experiences' tokens."""
    proc = trinity(run_env, tmp_path, *GRPO_ONLY, "buffer.total_steps=2", "cluster.gpu_per_node=3", KEPT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / RUN
    assert (run / "logs" / "trainer_node0.rank1.log").is_file()  # two trainer ranks ran
    experiences = [json.loads(line) for line in (run / "arith_experiences.jsonl").read_text().splitlines()]
    trained = lines(run, "trainer")
    assert [r["step"] for r in trained] == [1, 2] and all(r["experiences"] == 16 for r in trained)
    for record in trained:
        step = [e for e in experiences if e["weight_version"] == record["step"] - 1]  # step s trains version s-1's
        sizes = [len(e["prompt_ids"]) + len(e["response_ids"]) for e in step]
        assert len(step) == 16
        assert record["global_seqlen/mean"] == sum(sizes) / 2
        # the two ranks' tokens: together the batch's, apart by no more than one row's
        assert record["global_seqlen/balanced_min"] + record["global_seqlen/balanced_max"] == sum(sizes)
        assert record["global_seqlen/balanced_max"] - record["global_seqlen/balanced_min"] <= max(sizes)
        assert record["global_seqlen/min"] + record["global_seqlen/max"] == sum(sizes)  # the contiguous deal's
        assert record["global_seqlen/minmax_diff"] == record["global_seqlen/max"] - record["global_seqlen/min"]
