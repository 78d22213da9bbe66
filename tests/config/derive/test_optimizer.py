"""Rules of trinity/config/derive/optimizer.py, each through `trinity config render/validate`: the schedule under
upstream's deprecated name, and the gradient clip under both of its names."""

import pytest

from tests.conftest import MINIMAL

GRPO = MINIMAL + "algorithm:\n  repeat_times: 4\n"


def test_warmup_style_is_upstreams_deprecated_name_of_the_schedule(render):
    result, cfg = render(GRPO + "  optimizer:\n    warmup_style: cosine\n", "hardware=cpu")
    assert result.code == 0 and cfg["algorithm"]["optimizer"]["lr_scheduler_type"] == "cosine"
    assert (
        "warning: run.yaml:6:5: algorithm.optimizer.warmup_style: is deprecated in Trinity-RFT; lr_scheduler_type is "
        "set to 'cosine'" in result.err
    )


def test_warmup_style_contradicting_the_schedule_is_an_error(cli, write):
    text = GRPO + "  optimizer:\n    warmup_style: cosine\n    lr_scheduler_type: constant\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert (
        result.code == 2
        and "algorithm.optimizer.warmup_style: 'cosine' contradicts lr_scheduler_type='constant' (run.yaml:7:5)"
        in result.err
    )


@pytest.mark.parametrize(
    "written,both", [("  optimizer:\n    clip_grad: 0.5\n", 0.5), ("trainer:\n  grad_clip: 0.3\n", 0.3), ("", 1.0)]
)
def test_the_gradient_clip_is_one_value_under_both_names(render, written, both):
    result, cfg = render(GRPO + written, "hardware=cpu")
    assert result.code == 0 and (cfg["algorithm"]["optimizer"]["clip_grad"], cfg["trainer"]["grad_clip"]) == (
        both,
        both,
    )


def test_two_different_gradient_clips_are_an_error(cli, write):
    text = GRPO + "  optimizer:\n    clip_grad: 0.5\ntrainer:\n  grad_clip: 0.3\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert (
        result.code == 2
        and "run.yaml:8:3: trainer.grad_clip: 0.3 contradicts algorithm.optimizer.clip_grad=0.5 (run.yaml:6:5)"
        in result.err
    )
