"""Clip_B (advantage_fn clipb, Trinity-RFT's clipb_advantage.py) in a real `trinity run`: the demo's tiny model
trained 2 steps with grpo_verl on rollouts of the demo's problems written beforehand, whose log-probs are chosen so that
the mask is known without knowing the model. Every task has two right rollouts (advantage +0.87) and two wrong ones
(-0.87); every token's rollout log-prob is -0.01 (p about 1), but two of the four tokens of each wrong rollout, at
-20 (p about 0). The signal p (H + log p) is then about the model's entropy H (at most ln 15 = 2.7, the demo's
vocabulary) on 24 of the step's 32 tokens and about 0 on the other 8: mean 0.75 H, population std 0.43 H, so those 8
sit 1.73 std below the mean. At mu 1 the trainer takes exactly them out of the loss: a quarter of the tokens, half
of the negative ones, no positive one."""

import json

import pytest
import yaml

from tests.conftest import REPO, run_process
from trinity.runtime.experience import Experience

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.train]

PROMPT, RESPONSE = [3, 13, 4, 10, 11, 5], [11, 8, 9, 1]  # "12+34=" and four tokens of the demo's vocabulary
SURE, UNSURE = -0.01, -20.0


def rollouts(steps: int = 2, tasks: int = 2) -> list[Experience]:
    """Each step's tasks, four rollouts each: rewards [1, 1, 0, 0]; a wrong rollout's tokens 2 and 4 improbable."""
    out = []
    for step in range(1, steps + 1):
        for task in range(tasks):
            for run, reward in enumerate((1.0, 1.0, 0.0, 0.0)):
                logprobs = [SURE] * 4 if reward else [SURE, UNSURE, SURE, UNSURE]
                out.append(Experience(PROMPT, RESPONSE, logprobs, reward, f"s{step}t{task}", step=step, run=run))
    return out


def run_config() -> dict:
    config = yaml.safe_load((REPO / "examples" / "arith" / "arith.yaml").read_text())
    config.pop("stages")
    config |= {"name": "clipb", "mode": "train"}
    config["algorithm"] = {
        "algorithm_type": "grpo_verl",
        "advantage_fn": "clipb",
        "advantage_fn_args": {"mu": 1.0},
        "repeat_times": 4,
        "kl_loss_fn": "none",
    }
    config["buffer"] |= {"batch_size": 2, "total_steps": 2}
    config["buffer"]["explorer_input"]["eval_tasksets"] = []
    config["buffer"]["trainer_input"]["experience_buffer"] |= {"storage_type": "file", "path": "rollouts.jsonl"}
    config["explorer"] |= {"eval_on_startup": False}
    return config


def test_clipb_takes_the_negative_tokens_of_lowest_signal_out_of_a_real_update(run_env, tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run_config()))
    (tmp_path / "rollouts.jsonl").write_text("".join(e.to_json() + "\n" for e in rollouts()))
    args = ("run", "-c", "run.yaml", "hardware=cpu", "cluster.ray_address=local")  # run_env's RAY_ADDRESS wins
    result = run_process(*args, cwd=tmp_path, env=run_env, timeout=600)
    assert result.code == 0, result.err[-6000:]
    run_dir = tmp_path / "ckpt" / "trinity-demo" / "clipb"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if r["role"] == "trainer"]
    assert [r["step"] for r in trained] == [1, 2] and all(r["experiences"] == 8 for r in trained)
    for r in trained:
        assert r["loss"] is not None and r["grad_norm"] is not None
        assert r["clipb_frac_clipped"] == pytest.approx(0.25) and r["clipb_frac_clipped_neg"] == pytest.approx(0.5)
        assert r["clipb_frac_clipped_pos"] == 0.0
        # the signal's mean is 0.75 H (H the model's entropy, between 0 and ln 15), its variance 0.1875 H^2 = ES^2 / 3
        assert 0.1 < r["clipb_ES"] < 0.75 * 2.71 and r["clipb_varS"] == pytest.approx(r["clipb_ES"] ** 2 / 3, rel=0.05)
