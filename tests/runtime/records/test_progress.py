"""Progress: a redrawn bar on a terminal, plain lines elsewhere, nothing with --quiet; the closing summary."""

import io

from trinity.runtime.records import progress
from trinity.runtime.records.progress import Progress, StageSummary, summary_table


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_one_line_redrawn_in_place():
    out = Terminal()
    bar = Progress("grpo", 4, stream=out)
    bar.update(1, reward=0.25)
    bar.update(2, reward=0.5, tok_s=1234.5)
    bar.close()
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    assert "grpo: [##########          ] step 2/4  reward 0.5  tok_s 1.23e+03" in text


def test_a_pipe_gets_plain_lines_now_and_then_and_a_last_one(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.0)
    bar = Progress("sft_warmup", 2, stream=out)
    bar.update(1, loss=1.5)
    bar.update(2, loss=1.25)
    bar.close()
    lines = out.getvalue().splitlines()
    assert [line.split("  ")[0] for line in lines] == [
        "sft_warmup: step 1/2",
        "sft_warmup: step 2/2",
        "sft_warmup: step 2/2",
    ]
    assert "\r" not in out.getvalue() and "loss 1.25" in lines[-1]


def test_quiet_prints_nothing():
    out = Terminal()
    bar = Progress("grpo", 3, quiet=True, stream=out)
    bar.update(3, reward=1.0)
    bar.close()
    assert out.getvalue() == ""


def test_summary_has_a_row_per_stage_with_eval_start_and_end():
    rows = [
        StageSummary(
            "sft_warmup",
            "train",
            steps=400,
            seconds=113.2,
            checkpoint="ckpt/global_step_400",
            setup_s=21.04,
            kept=(0, 3),
        ),
        StageSummary(
            "grpo",
            "both",
            steps=300,
            seconds=119.0,
            setup_s=0.84,
            kept=(5, 5),
            restarts=[{"role": "rollout.engine0", "cause": "rollout.engine0 died", "step": 3}],
            peak_rss_mb={"trainer_node0.rank0": 800.0, "rollout.engine0": 600.0, "explorer": 520.0},
            reward=0.281,
            eval_first={"arith-heldout": 0.63},
            eval_last={"arith-heldout": 0.875},
            checkpoint="ckpt/global_step_700",
        ),
    ]
    table = summary_table(rows).splitlines()
    assert table[0].split() == [
        "STAGE", "MODE", "STEPS", "RESTARTS", "TIME", "SETUP", "KEPT", "MEMORY", "REWARD", "EVAL", "START", "->", "END",
        "CHECKPOINT",
    ]  # fmt: skip
    assert table[2].split() == [
        "grpo",
        "both",
        "300",
        "1",  # a trainer rank's crash restarted it from a checkpoint
        "119s",
        "0.8s",
        "5/5",
        "1.88GiB",  # summed over the stage's role processes
        "0.281",
        "arith-heldout",
        "0.630",
        "->",
        "0.875",
        "ckpt/global_step_700",
    ]
    assert table[1].split()[:9] == ["sft_warmup", "train", "400", "0", "113s", "21.0s", "0/3", "-", "-"]


def test_a_stage_done_earlier_has_no_setup():
    table = summary_table([StageSummary("sft", "train", note="done earlier (global_step_4)")]).splitlines()
    assert table[1].split()[:8] == ["sft", "train", "0", "0", "0s", "-", "-", "-"]


def test_a_stages_restarts_are_counted_in_its_row_and_follow_the_table():
    replaced = [
        {"role": "rollout.engine0", "cause": "rollout.engine0 died: killed by SIGKILL", "step": 3},
        {"role": "explorer", "cause": "explorer died: exit code 1", "step": 7},
    ]
    table = summary_table([StageSummary("grpo", "both", restarts=replaced), StageSummary("sft", "train")])
    assert table.splitlines()[1].split()[:4] == ["grpo", "both", "0", "2"]
    assert table.splitlines()[3:] == [
        "grpo: 2 restarts: rollout.engine0 at step 3 after rollout.engine0 died: killed by SIGKILL; explorer at step 7 "
        "after explorer died: exit code 1"
    ]
