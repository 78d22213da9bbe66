"""The multi-turn examples through the real CLI: arith_feedback_workflow's and calculator_workflow's episodes on the
real transformers engine, about one engine call per turn, and react_agent_workflow's `openai` agent over the engine's
OpenAI endpoint (listed in the launch output), written to the buffer with their action masks, trained by a real verl
rank: the feedback game with gigpo's step advantages, the agent's episodes with multi_step_grpo's."""

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_process

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "arith_feedback_workflow": ("arith_feedback", "model-feedback", "<>?"),  # feedback: "<", ">" or "?"
    "calculator_workflow": ("arith_tools", "model-tools", "="),  # a tool's result follows "="
    "react_agent_workflow": ("arith_react", "model-tools", "="),  # over the OpenAI endpoint
}
# workflow -> the algorithm keys its run trains with (the examples' own: grpo)
ALGORITHMS = {
    "arith_feedback_workflow": {
        "algorithm_type": "gigpo",
        "advantage_fn_args": {"omega": 0.5, "gamma": 0.9, "fnorm": "std"},
    },
    "calculator_workflow": {},
    "react_agent_workflow": {
        "algorithm_type": "multi_step_grpo",
        "advantage_fn_args": {"enable_step_norm": True, "std_cal_level": "batch"},
    },
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
    config["algorithm"] |= {"repeat_times": 4, **ALGORITHMS[workflow]}
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
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    made = [r["experiences"] for r in explored]
    if workflow == "react_agent_workflow":  # HTTP calls to the endpoint, none through the explorer's gatherer
        assert re.search(
            r"OpenAI endpoints \(listed in .*endpoints\.json\):\n  engine 0: http://[\d.]+:\d+/v1", result.err
        )
        assert all(r["engine_calls"] == 0 for r in explored)
        # an episode whose replies the template cannot render back as written (the untrained model writes text
        # around its calls, and <unk>) is more than one experience; the trainer takes train_batch_size a step
        assert all(m >= 8 for m in made) and not (run_dir / "endpoints.json").exists()  # gone with its stage
        assert [r["experiences"] for r in trained] == [8, 8]
        # each of a task's 4 runs is an episode of its own id, whatever experiences its calls made
        by_task: dict[str, set] = {}
        for e in episodes:
            by_task.setdefault(e["group"], set()).add(e["episode"])
        assert all(len(ids) == 4 and "" not in ids for ids in by_task.values()), by_task
    else:
        # a call per turn (three at most), or two where the gatherer's 50 ms hold ends before a slow workflow asks
        # (1 step in 4 on this machine, before and after 2026-12-04): one call per run would be 8 in the first turn
        calls = [r["engine_calls"] for r in explored]
        assert made == [8, 8] and all(1 <= c <= 2 * 3 for c in calls), (made, calls)
        assert [r["experiences"] for r in trained] == made
    assert all(r["loss"] is not None for r in trained)
    assert len(episodes) == sum(made)
    # the workflows' own metrics, averaged on the explorer's line: step 1's experiences are the file's first ones
    assert explored[0]["turns_mean"] == pytest.approx(sum(e["metrics"]["turns"] for e in episodes[: made[0]]) / made[0])

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
