"""`trinity run` with data selectors on the shortened demo, as a user runs it: two training tasksets, one read by
difficulty_based (learning from pass_rate_calculator's pass rates) and one by offline_easy2hard, an evaluation taskset
by random; stopped by SIGTERM after a checkpoint and run again, the resumed run reads on as the unbroken one would.
What was read is taken from what the run leaves behind: the pass rates the explorer fed back, per step
(<run dir>/selectors/stage_0.jsonl), and metrics.jsonl."""

import json

import pytest

from tests.cli.test_run import GRPO_ONLY, RUN, lines, stopped_after_checkpoint, trinity

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.train]

ROWS = [
    {"prompt": f"{a}+{b}=", "response": str(a + b), "weak": (a % 4) / 4, "strong": min(1.0, (a % 4) / 4 + 0.4)}
    for a, b in zip(range(10), range(3, 13))
]
DIFFICULTY = "{selector_type: difficulty_based, feature_keys: [weak, strong], kwargs: {tau: 0}}"
EASY2HARD = "{selector_type: offline_easy2hard, feature_keys: [weak]}"


def selecting(rows):
    second = f"[{{name: easy2hard, path: {rows}, default_workflow_type: arith_workflow, data_selector: {EASY2HARD}}}]"
    return (
        "buffer.total_steps=6",
        "trainer.save_interval=2",
        f"buffer.explorer_input.taskset.path={rows}",
        f"+buffer.explorer_input.taskset.data_selector={DIFFICULTY}",
        f"+buffer.explorer_input.tasksets={second}",
        "+buffer.explorer_input.eval_tasksets.0.data_selector={selector_type: random, seed: 5}",
        "+data_processor.experience_pipeline.operators=[{name: pass_rate_calculator}]",
    )


def schedule(fed):
    """What the run's two tasksets read, fed the pass rates `fed` (log lines), rebuilt from the same settings."""
    from trinity.config.schema.buffer import DataSelectorConfig
    from trinity.runtime.data.selectors import build
    from trinity.runtime.explorer.schedule import Schedule

    learner = build(
        ROWS, DataSelectorConfig(selector_type="difficulty_based", feature_keys=["weak", "strong"], kwargs={"tau": 0})
    )
    easy = build(ROWS, DataSelectorConfig(selector_type="offline_easy2hard", feature_keys=["weak"]))
    out = Schedule([learner, easy], 4)
    for line in fed:
        out.feedback({(t, row): rate for t, row, rate in line["rates"]})
    return out


def test_a_resumed_run_reads_the_rows_its_selectors_would_have_read_unbroken(run_env, tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    args = (*GRPO_ONLY, *selecting(rows))
    done = stopped_after_checkpoint(run_env, tmp_path, *args)
    resumed = trinity(run_env, tmp_path, *args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    log = [json.loads(line) for line in (tmp_path / RUN / "selectors" / "stage_0.jsonl").read_text().splitlines()]
    assert [line["step"] for line in log] == [1, 2, 3, 4, 5, 6]  # the steps after the checkpoint's, once each
    for step, line in enumerate(log, 1):
        # each step read what its selectors pick after the pass rates of the steps before it, across the restart
        read = sorted((t, row) for t, row, _ in line["rates"])
        assert read == sorted(schedule(log[: step - 1]).batch(step)), step
        assert all(rate in (0.0, 0.25, 0.5, 0.75, 1.0) for _, _, rate in line["rates"])  # 4 rollouts' mean reward
    after = done + 1
    assert schedule(log[:done]).batch(after) != schedule([]).batch(after)  # what it had learnt is what chose them
    explorer = lines(tmp_path / RUN, "explorer")
    assert all(0 <= r["selection/valid_ratio"] <= 1 for r in explorer)  # pass_rate_calculator's metrics
    evaluations = [r for r in lines(tmp_path / RUN, "eval") if r.get("taskset") == "arith-heldout"]
    assert evaluations and all(r["tasks"] == evaluations[0]["tasks"] for r in evaluations)
