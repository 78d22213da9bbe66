"""`trinity run` with Trinity-RFT's model and rollout-model keys (issue 46, part D) on the shortened demo, as a user
runs it: what each key does is read from what the run leaves behind (experiences, metrics.jsonl, logs, config.yaml)."""

import json

import pytest

from tests.cli.test_run import GRPO_ONLY, RUN, lines, trinity

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.train]

KEYS = (
    "buffer.total_steps=2",
    "buffer.trainer_input.experience_buffer.storage_type=file",  # the experiences stay readable in the run directory
    "algorithm.bypass_old_logprobs=false",  # the trainer recomputes the old log-probs: how far its model is from theirs
    "model.min_response_tokens=0",  # no end-of-sequence mask in the engine: its log-probs are the model's own
    "+model.rope_theta=2.0",  # far from the demo model's 10000
    "+model.rope_scaling={rope_type: linear, factor: 2.0}",
    "+explorer.rollout_model.ignore_eos=true",
    "+explorer.rollout_model.enable_log_requests=true",
    "+monitor.detailed_stats=true",
    "+synchronizer.group_name=arith_sync",
    "+explorer.rollout_model.weight_sync_buffer_size=1",
    "+explorer.runner_num=4",
    "+trainer.fix_actor_microbatch_loss_scale=true",
)


def test_a_run_with_the_model_keys_of_trinity_rft_honours_each_of_them(run_env, tmp_path):
    proc = trinity(run_env, tmp_path, *GRPO_ONLY, *KEYS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / RUN
    # the trainer's model and the engine's run the same rope: recomputed log-probs are the engine's own
    diffs = [r["logprob_diff"] for r in lines(run, "trainer")]
    assert len(diffs) == 2 and all(d < 1e-5 for d in diffs), diffs  # measured ~1e-7; 6e-3 with the trainer's own
    # ignore_eos: every reply runs to max_tokens (the demo's 4), past any end of sequence
    experiences = [json.loads(line) for line in (run / "arith_experiences.jsonl").read_text().splitlines()]
    assert len(experiences) == 32 and all(len(e["response_ids"]) == 4 for e in experiences)
    # detailed_stats: max, min and std over the eval taskset's tasks beside each mean
    evals = lines(run, "eval")
    assert evals and all({"accuracy_std", "accuracy_max", "reward_min"} <= set(r) for r in evals)
    assert all(r["accuracy_min"] <= r["accuracy"] <= r["accuracy_max"] for r in evals)
    # the weight-sync group named as configured formed on both sides: every step synced
    assert [r["step"] for r in lines(run, "synchronizer")] == [1, 2]
    saved = (run / "config.yaml").read_text()
    assert "  group_name: arith_sync\n" in saved and "  sync_bucket_mib: 1\n" in saved
    # enable_log_requests: each request in the engine's log, with its sampling
    assert "request: " in (run / "logs" / "rollout.engine0.log").read_text()
    assert "explorer.runner_num: changes nothing" in proc.stderr
