"""The multi-turn examples through the real CLI: arith_feedback_workflow's and calculator_workflow's episodes on the
real transformers engine, one engine call per turn, written to the buffer with their action masks, trained by a real
verl rank."""

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_process

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "arith_feedback_workflow": ("arith_feedback", "model-feedback", "<>?"),  # feedback: "<", ">" or "?"
    "calculator_workflow": ("arith_tools", "model-tools", "="),  # a tool's result follows "="
}


def env_runs(mask: list[int], ids: list[int]) -> list[list[int]]:
    """The environment's turns: each maximal run of tokens the mask leaves out."""
    runs, current = [], []
    for token, trained in zip(ids, mask):
        if trained and current:
            runs, current = [*runs, current], []
        elif not trained:
            current.append(token)
    return runs + ([current] if current else [])


@pytest.mark.parametrize("workflow", EXAMPLES)
def test_a_multi_turn_example_trains_whole_episodes_on_the_models_turns_only(run_env, tmp_path, workflow):
    example, model, marks = EXAMPLES[workflow]
    config = yaml.safe_load((REPO / "examples" / example / f"{example}.yaml").read_text())
    config.pop("stages")  # the RL stage alone, on the untrained model: its answers are mostly wrong, so it goes on
    config["buffer"] |= {"batch_size": 2, "total_steps": 2}
    config["algorithm"]["repeat_times"] = 4
    config["buffer"]["trainer_input"]["experience_buffer"] |= {"storage_type": "file", "path": "episodes.jsonl"}
    config["explorer"] |= {"eval_on_startup": False}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    result = run_process("run", "-c", "run.yaml", "hardware=cpu", cwd=tmp_path, env=run_env, timeout=600)
    assert result.code == 0, result.err[-6000:]
    assert config["buffer"]["explorer_input"]["default_workflow_type"] == workflow
    run_dir = tmp_path / "ckpt" / "trinity-demo" / config["name"]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    explored = [r for r in records if r["role"] == "explorer"]
    trained = [r for r in records if r["role"] == "trainer"]
    assert [r["experiences"] for r in explored] == [8, 8] and all(1 <= r["engine_calls"] <= 3 for r in explored)
    assert [r["experiences"] for r in trained] == [8, 8] and all(r["loss"] is not None for r in trained)
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 16
    # the workflows' own metrics, averaged on the explorer's line: step 1's eight episodes are the file's first eight
    assert explored[0]["turns_mean"] == sum(e["metrics"]["turns"] for e in episodes[:8]) / 8

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(Path(run_env["TRINITY_DEMO_DIR"]) / model)
    opening = set(tokenizer.convert_tokens_to_ids(list(marks))) | {tokenizer.eos_token_id}
    for e in episodes:
        mask, ids = e["action_mask"], e["response_ids"]
        assert len(mask) == len(ids) == len(e["logprobs"]) and mask[-1] == 1, e
        runs = env_runs(mask, ids)
        assert len(runs) == e["metrics"]["turns"] - 1, e  # one environment turn between two of the model's
        # it opens with the template's closing of a cut reply (<eos>) or the environment's mark
        assert all(run[0] in opening for run in runs), e
        assert all(lp == 0.0 for lp, m in zip(e["logprobs"], mask) if not m)
        assert len(e["prompt_ids"]) + len(ids) <= config["model"]["max_model_len"]
