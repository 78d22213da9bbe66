"""The multi-turn example through the real CLI: arith_feedback_workflow's episodes on the real transformers engine,
one engine call per turn, written to the buffer with their action masks, trained by a real verl rank."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "arith_feedback" / "arith_feedback.yaml"


def test_the_feedback_game_trains_whole_episodes_on_the_models_turns_only(run_env, tmp_path):
    config = yaml.safe_load(EXAMPLE.read_text())
    config.pop("stages")  # the RL stage alone, on the untrained model: its answers are mostly wrong, so it retries
    config["buffer"] |= {"batch_size": 2, "total_steps": 2}
    config["algorithm"]["repeat_times"] = 4
    config["buffer"]["trainer_input"]["experience_buffer"] |= {"storage_type": "file", "path": "episodes.jsonl"}
    config["explorer"] |= {"eval_on_startup": False}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "trinity", "run", "-c", "run.yaml", "hardware=cpu"],
        cwd=tmp_path,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    run_dir = tmp_path / "ckpt" / "trinity-demo" / "arith-feedback"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    explored = [r for r in records if r["role"] == "explorer"]
    trained = [r for r in records if r["role"] == "trainer"]
    assert [r["experiences"] for r in explored] == [8, 8] and all(1 <= r["engine_calls"] <= 3 for r in explored)
    assert [r["experiences"] for r in trained] == [8, 8] and all(r["loss"] is not None for r in trained)
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 16

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(Path(run_env["TRINITY_DEMO_DIR"]) / "model-feedback")
    feedback = set(tokenizer.convert_tokens_to_ids(list("<>?")))
    for e in episodes:
        mask, ids = e["action_mask"], e["response_ids"]
        assert len(mask) == len(ids) == len(e["logprobs"]) and mask[-1] == 1
        env = [t for t, m in zip(ids, mask) if not m]
        # each retry follows feedback: "<", ">" or "?" after the reply's end (or the template's closing of a cut one)
        assert sum(t in feedback for t in env) == e["metrics"]["turns"] - 1, e
        assert all(t in feedback or t == tokenizer.eos_token_id for t in env), e
        assert all(lp == 0.0 for lp, m in zip(e["logprobs"], mask) if not m)
        assert len(e["prompt_ids"]) + len(ids) <= config["model"]["max_model_len"]
