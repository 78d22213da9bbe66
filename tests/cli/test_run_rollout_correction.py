"""`trinity run` with verl's rollout correction, written where Trinity-RFT's users write it
(trainer.trainer_config.algorithm.rollout_correction): the shortened demo's GRPO for 2 steps with the old log-probs
recomputed (bypass_mode: false), token IS weights and token_k1 rejection. As test_run.py's
test_recomputed_old_logprobs_report_how_far_the_engine_was, read from what the run leaves behind: each trainer line
carries verl's rollout_corr/* metrics beside logprob_diff, and the update trained."""

import pytest
import yaml

from tests.cli.test_run import GRPO_ONLY, RUN, lines, trinity

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = pytest.mark.ray

VERL = "+trainer.trainer_config.algorithm.rollout_correction"


@pytest.mark.train
def test_a_corrected_run_trains_and_logs_verls_metrics(run_env, tmp_path):
    proc = trinity(
        run_env,
        tmp_path,
        *GRPO_ONLY,
        "buffer.total_steps=2",
        f"{VERL}.bypass_mode=false",
        f"{VERL}.rollout_is=token",
        f"{VERL}.rollout_is_threshold=2.0",
        f"{VERL}.rollout_rs=token_k1",
        f"{VERL}.rollout_rs_threshold=1.5",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = yaml.safe_load((tmp_path / RUN / "config.yaml").read_text())
    assert saved["algorithm"]["bypass_old_logprobs"] is False
    assert saved["algorithm"]["rollout_correction"]["rollout_is"] == "token"
    trainer = lines(tmp_path / RUN, "trainer")
    assert [r["step"] for r in trainer] == [1, 2]
    for record in trainer:
        assert record["loss"] is not None and record["grad_norm"] is not None, record
        # both float32 on the CPU: close, not equal (as test_recomputed_old_logprobs_report_how_far_the_engine_was)
        assert 0 < record["logprob_diff"] < 0.5, record
        assert 0 < record["rollout_corr/rollout_is_mean"] <= record["rollout_corr/rollout_is_max"] <= 2.0, record
        assert 0 <= record["rollout_corr/rollout_rs_masked_fraction"] < 1, record
        assert 0 <= record["rollout_corr/rollout_rs_token_k1_masked_fraction"] < 1, record
        assert record["rollout_corr/k3_kl"] >= 0 and record["rollout_corr/training_ppl"] >= 1, record
        assert {"rollout_corr/kl", "rollout_corr/chi2_token", "rollout_corr/rollout_is_eff_sample_size"} <= set(record)
