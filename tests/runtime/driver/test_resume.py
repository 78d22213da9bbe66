"""Resuming is refused when the saved config describes another run, unless forced."""

import pytest

from tests.conftest import REPO
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.errors import ConfigError
from trinity.runtime.driver.run import _resume_point
from trinity.runtime.records.run_dir import Checkpoint, RunDir


@pytest.fixture
def finished(tmp_path):
    """A run directory holding a complete checkpoint and the config that made it."""
    run = RunDir(tmp_path)
    config = resolve(Request(None, ("hardware=cpu",))).stage("grpo")
    run.write_config(config.model_dump(mode="json"))
    run.save_checkpoint(Checkpoint(tmp_path, 5, "grpo", 1, 5, 9), lambda folder: None, keep=None)
    return run


def config(*overrides):
    return resolve(Request(None, ("hardware=cpu", *overrides))).stage("grpo")


def resume(run, *overrides, force=False):
    """The checkpoint a run with these overrides continues from."""
    resolved = resolve(Request(None, ("hardware=cpu", *overrides)))
    return _resume_point(run, resolved.stage("grpo"), resolved.provenance, force)


def test_the_same_run_resumes_from_its_last_checkpoint(finished):
    assert resume(finished).global_step == 5
    assert resume(finished, "trainer.save_interval=7").global_step == 5  # not a key that changes the run


def test_a_changed_run_is_refused_with_the_keys(finished):
    with pytest.raises(ConfigError) as err:
        resume(finished, "algorithm.optimizer.lr=0.5", "buffer.batch_size=4")
    message = err.value.issues[0].message
    assert "resuming global_step_5 with a config that changes the run" in message
    assert "algorithm.optimizer.lr: 0.0001 -> 0.5" in message and "buffer.batch_size: 16 -> 4" in message
    assert "--force" in err.value.issues[0].hint


def test_a_changed_fused_optimizer_is_refused_for_torch_would_restore_the_saved_one(finished):
    with pytest.raises(ConfigError) as err:
        resume(finished, "trainer.fused_optimizer=false")
    assert "trainer.fused_optimizer: True -> False" in err.value.issues[0].message


def test_a_run_saved_before_a_key_existed_resumes(tmp_path):
    run = RunDir(tmp_path)
    older = config().model_dump(mode="json")
    # keys a newer trinity added
    del (
        older["model"]["repetition_penalty"],
        older["explorer"]["rollout_model"]["chat_template"],
    )
    run.write_config(older)
    run.save_checkpoint(Checkpoint(tmp_path, 5, "grpo", 1, 5, 9), lambda folder: None, keep=None)
    assert resume(run).global_step == 5
    with pytest.raises(ConfigError, match="model.max_response_tokens: 4 -> 3"):  # keys both configs have still count
        resume(run, "model.max_response_tokens=3")
    # a new key you set now counts
    with pytest.raises(ConfigError, match=r"model.repetition_penalty: '\(absent\)' -> 1.3"):
        resume(run, "model.repetition_penalty=1.3")
    demo = (REPO / "examples" / "arith" / "arith.yaml").read_text()
    written = tmp_path / "run.yaml"
    written.write_text(demo.replace("  max_model_len: 12\n", "  max_model_len: 12\n  repetition_penalty: 1.3\n"))
    resolved = resolve(Request(written, ("hardware=cpu",)))
    with pytest.raises(ConfigError, match=r"model.repetition_penalty: '\(absent\)' -> 1.3"):  # in a run file, too
        _resume_point(run, resolved.stage("grpo"), resolved.provenance, False)


def test_force_resumes_anyway(finished):
    assert resume(finished, "algorithm.optimizer.lr=0.5", force=True).global_step == 5


def test_nothing_is_overwritten_when_resuming_is_off(finished):
    with pytest.raises(
        ConfigError, match="already holds checkpoints .last: global_step_5. and continue_from_checkpoint is false"
    ):
        resume(finished, "continue_from_checkpoint=false")
