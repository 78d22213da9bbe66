"""Stages deep-merge into the root config (upstream replaced whole sections and lost values)."""

from pathlib import Path

from tests.conftest import MINIMAL

STAGED = (
    MINIMAL
    + """\
algorithm:
  algorithm_type: grpo
  repeat_times: 8
  optimizer:
    lr: 1.0e-5
buffer:
  batch_size: 96
stages:
  - stage_name: sft_warmup
    mode: train
    algorithm:
      algorithm_type: sft
    buffer:
      trainer_input:
        experience_buffer:
          name: sft
          storage_type: file
          path: SFT_DATA
      train_batch_size: 128
  - stage_name: rft
"""
).replace("SFT_DATA", str(Path(__file__).with_name("stage_sft.jsonl")))  # an SFT stage reads a data set


def test_stage_merges_into_the_root_without_losing_values(cli, write):
    path = write("run.yaml", STAGED)
    cfg = cli("config", "render", "-c", path, "hardware=a100", "--stage", "sft_warmup", "--format", "json").json()
    assert cfg["algorithm"]["algorithm_type"] == "sft"
    assert cfg["algorithm"]["repeat_times"] == 8 and cfg["algorithm"]["optimizer"]["lr"] == 1e-5  # kept from the root
    assert cfg["buffer"]["batch_size"] == 96 and cfg["buffer"]["train_batch_size"] == 128
    assert cfg["mode"] == "train" and cfg["stages"] == []


def test_stage_is_derived_for_its_own_mode(cli, write):
    path = write("run.yaml", STAGED)
    result = cli("config", "render", "-c", path, "hardware=a100", "--stage", "sft_warmup", "--format", "json")
    cfg = result.json()
    assert cfg["synchronizer"]["sync_method"] == "checkpoint" and cfg["cluster"]["trainer_gpu_num"] == 8
    assert "(in stage 'sft_warmup')" not in result.err  # SFT syncs nothing: no note about how it would
    rft = cli("config", "render", "-c", path, "hardware=a100", "--stage", "rft", "--format", "json").json()
    assert rft["algorithm"]["algorithm_type"] == "grpo" and rft["synchronizer"]["sync_method"] == "nccl"


def test_root_render_keeps_the_stages_as_written(cli, write):
    path = write("run.yaml", STAGED)
    cfg = cli("config", "render", "-c", path, "hardware=a100", "--format", "json").json()
    assert [s["stage_name"] for s in cfg["stages"]] == ["sft_warmup", "rft"]
    assert cfg["stages"][0]["algorithm"] == {"algorithm_type": "sft"}


def test_validate_counts_stages(cli, write):
    path = write("run.yaml", STAGED)
    assert "2 stage(s)" in cli("config", "validate", "-c", path, "hardware=a100").out


def test_unknown_stage_name(cli, write):
    path = write("run.yaml", STAGED)
    result = cli("config", "render", "-c", path, "--stage", "warmup")
    assert (
        result.code == 2
        and "stages: no stage named 'warmup'" in result.err
        and "allowed: sft_warmup, rft" in result.err
    )


def test_stage_that_breaks_a_hardware_fact(cli, write):
    path = write("run.yaml", STAGED + "    trainer:\n      use_torch_compile: true\n")
    result = cli("config", "validate", "-c", path, "hardware=ascend910b")
    assert result.code == 2
    assert (
        "run.yaml:24:7: trainer.use_torch_compile: torch.compile cannot be used for training on ascend910b"
        in result.err
    )
    assert "(in stage 'rft')" in result.err


def test_a_stage_that_hands_on_its_checkpoint_keeps_hugging_face_weights(cli, write):
    """The next stage starts from the last checkpoint of this one: `never` there is refused where it is written."""
    path = write(
        "run.yaml",
        STAGED.replace(
            "      train_batch_size: 128\n",
            "      train_batch_size: 128\n    trainer:\n      save_hf_checkpoint: never\n",
        ),
    )
    result = cli("config", "validate", "-c", path, "hardware=a100")
    assert result.code == 2
    assert (
        "run.yaml:23:7: trainer.save_hf_checkpoint: 'never' leaves stage 'sft_warmup' without Hugging Face weights, "
        "but the next stage starts from its last checkpoint" in result.err
    )
    assert "allowed: last, always" in result.err
    # the final stage hands nothing on
    last = write("last.yaml", STAGED + "    trainer:\n      save_hf_checkpoint: never\n")
    assert cli("config", "validate", "-c", last, "hardware=a100").code == 0


def test_a_stages_data_processor_is_its_own_experience_pipeline(cli, write):
    """stages[].data_processor (Trinity-RFT's StageConfig has it): the stage's operators and saved input, merged into
    the root's for that stage alone."""
    stage = (
        "  - stage_name: second\n    data_processor:\n      experience_pipeline:\n"
        "        operators: [{name: mask_response_truncated}]\n        save_input: true\n"
    )
    path = write("run.yaml", MINIMAL + "stages:\n  - stage_name: first\n" + stage)
    rendered = {}
    for name in ("first", "second"):
        result = cli("config", "render", "-c", path, "hardware=cpu", "--stage", name, "--format", "json")
        assert result.code == 0, result.err
        rendered[name] = result.json()["data_processor"]["experience_pipeline"]
    assert rendered["first"] == {"operators": [], "save_input": False, "input_save_path": None}
    assert rendered["second"] == {
        "operators": [{"name": "mask_response_truncated", "args": {}}],
        "save_input": True,
        "input_save_path": "sqlite:///explorer_output.db",
    }
