"""Rules of trinity/config/derive/trainer.py, each through `trinity config render/validate`:
checkpoints kept, verl's keys that are trinity's settings, the verl passthrough's shape, the critic warm-up.
"""

import pytest
import yaml

from tests.conftest import MINIMAL
from trinity.config.derive.trainer import VERL_TWINS


@pytest.mark.parametrize("keep,want", [(0, None), (3, 3)])
def test_checkpoints_kept_follow_upstreams_key(render, keep, want):
    cfg = render(f"trainer:\n  max_checkpoints_to_keep: {keep}\n", "hardware=a100")[1]
    assert cfg["trainer"]["max_actor_ckpt_to_keep"] == want


def test_the_runtimes_checkpoint_count_is_derived_not_set(render):
    result, _ = render("trainer:\n  max_actor_ckpt_to_keep: 2\n", "hardware=a100")
    assert (
        result.code == 2
        and "trainer.max_actor_ckpt_to_keep: is derived from trainer.max_checkpoints_to_keep (None) and must not be "
        "set to 2"
        in result.err
    )


TWIN_VALUES = {"bool": "true", "int": "2", "float": "0.5"}


def _twin_value(ours: str) -> str:
    return TWIN_VALUES["int" if "ulysses" in ours else "float" if "clip" in ours else "bool"]


@pytest.mark.parametrize("under", ["", "actor_rollout_ref."])
@pytest.mark.parametrize("verl_key,ours", sorted(VERL_TWINS.items()))
def test_a_verl_key_that_is_a_trinity_setting_sets_it_with_a_note(cli, write, under, verl_key, ours):
    """Trinity-RFT's examples write these in trainer_config (frozen_lake: param_offload, use_remove_padding, ...);
    each sets trinity's key, located at its line, and leaves the passthrough."""
    value = _twin_value(ours)
    tree: object = yaml.safe_load(value)
    for part in reversed(f"trainer.trainer_config.{under}{verl_key}".split(".")):
        tree = {part: tree}
    path = write("run.yaml", MINIMAL + yaml.safe_dump(tree))
    result = cli("config", "render", "-c", path, "hardware=cpu", "--format", "json", "--explain", ours)
    assert result.code == 0, result.err
    assert (
        f"trainer.trainer_config.{under}{verl_key}: verl's actor_rollout_ref.{verl_key} is trinity's {ours}: "
        f"{ours}={value}"
        in result.err
        and f"hint: write {ours}: {value}" in result.err
    )
    rendered = yaml.safe_load(cli("config", "render", "-c", path, "hardware=cpu", "--format", "json").out)
    section, name = ours.split(".")
    assert str(rendered[section][name]).lower() == value and rendered["trainer"]["trainer_config"] == {}


def test_a_twin_keeps_the_passthroughs_other_keys_and_its_line(cli, write):
    path = write(
        "run.yaml",
        MINIMAL + "trainer:\n  trainer_config:\n    actor_rollout_ref:\n      actor:\n        fsdp_config:\n"
        "          param_offload: true\n        entropy_checkpointing: true\n      ref:\n"
        "        fsdp_config: {param_offload: true}\n",
    )
    result = cli("config", "render", "-c", path, "hardware=cpu", "--explain", "trainer.param_offload")
    assert result.code == 0 and "trainer.param_offload = True" in result.out and "run.yaml:8:11" in result.out
    cfg = yaml.safe_load(cli("config", "render", "-c", path, "hardware=cpu").out)
    # the ref's offload is verl's alone (trinity sets no ref offload): it stays for verl
    assert cfg["trainer"]["trainer_config"] == {
        "actor_rollout_ref": {"actor": {"entropy_checkpointing": True}, "ref": {"fsdp_config": {"param_offload": True}}}
    }


def test_a_twin_contradicting_its_trinity_key_is_an_error(cli, write):
    path = write(
        "run.yaml",
        MINIMAL
        + "trainer:\n  param_offload: false\n  trainer_config:\n    actor:\n      fsdp_config: {param_offload: true}\n",
    )
    result = cli("config", "validate", "-c", path, "hardware=cpu")
    assert result.code == 2 and (
        "run.yaml:7:21: trainer.trainer_config.actor.fsdp_config.param_offload: true contradicts "
        "trainer.param_offload=false (run.yaml:4:3): verl's actor_rollout_ref.actor.fsdp_config.param_offload is "
        "that setting" in result.err
    )


def test_a_twin_is_held_to_trinitys_rules_at_its_own_line(cli, write):
    """use_remove_padding written in the passthrough meets the same check as trinity's key (an attention without a
    variable-length kernel on a100), located where it was written."""
    path = write("run.yaml", MINIMAL + "trainer:\n  trainer_config:\n    model: {use_remove_padding: true}\n")
    result = cli("config", "validate", "-c", path, "hardware=a100")
    assert result.code == 0 and "warning: run.yaml:5:13: trainer.use_remove_padding: true packs each micro-batch" in (
        result.err
    )


def test_trainer_config_takes_verls_actor_rollout_ref_sections(render):
    result, cfg = render(
        "trainer:\n  trainer_config:\n    actor: {entropy_checkpointing: true}\n    actor_rollout_ref:\n      ref: "
        "{log_prob_use_dynamic_bsz: false}\n",
        "hardware=a100",
    )
    assert result.code == 0 and cfg["trainer"]["trainer_config"]["actor"] == {"entropy_checkpointing": True}


@pytest.mark.parametrize(
    "section,why",
    [
        ("critic", "this algorithm trains no critic (its advantage function reads no values)"),
        ("trainer", "trinity passes verl's actor_rollout_ref sections and, for a critic, critic"),
    ],
)
def test_trainer_config_sections_trinity_would_drop_are_errors(render, section, why):
    """The critic section only where the algorithm trains a critic (PPO: tests/config/test_algorithm.py)."""
    result, _ = render(f"trainer:\n  trainer_config:\n    {section}:\n      x: 1\n", "hardware=a100")
    assert (
        result.code == 2
        and f"run.yaml:5:5: trainer.trainer_config.{section}: not a verl section trinity passes on: {why}" in result.err
    )


def test_balance_batch_is_upstreams_default_and_a_bad_value_is_refused_where_it_is_written(render):
    _, cfg = render("", "hardware=a100")
    assert cfg["trainer"]["balance_batch"] is True and cfg["explorer"]["bench_on_latest_checkpoint"] is False
    result, _ = render("trainer:\n  balance_batch: sometimes\n", "hardware=a100")
    assert result.code == 2 and "error: run.yaml:4:3: trainer.balance_batch: " in result.err
    result, _ = render("explorer:\n  bench_on_latest_checkpoint: 3\n", "hardware=a100")
    assert result.code == 2 and "error: run.yaml:4:3: explorer.bench_on_latest_checkpoint: " in result.err


def test_balance_batch_written_for_dpo_is_noted_as_changing_nothing(render, tmp_path):
    from tests.config.test_algorithm import DATA_SET

    (tmp_path / "d.jsonl").write_text("{}\n")
    base = DATA_SET.format(path=tmp_path / "d.jsonl") + "algorithm:\n  algorithm_type: dpo\n"
    result, cfg = render(base + "trainer:\n  balance_batch: true\n", "hardware=cpu")
    assert result.code == 0 and cfg["trainer"]["balance_batch"] is True
    assert "trainer.balance_batch: changes nothing here: a DPO batch's chosen and rejected rows stay together" in (
        result.err
    )
    quiet, _ = render(base, "hardware=cpu")  # upstream's default, not written: no note
    assert quiet.code == 0 and "balance_batch" not in quiet.err
    grpo, _ = render("trainer:\n  balance_batch: true\n", "hardware=cpu")
    assert grpo.code == 0 and "balance_batch" not in grpo.err


def test_bench_on_latest_checkpoint_outside_bench_is_noted(render):
    result, _ = render("explorer:\n  bench_on_latest_checkpoint: true\n", "hardware=cpu")
    assert result.code == 0
    assert "explorer.bench_on_latest_checkpoint: changes nothing in mode 'both': only mode bench evaluates" in (
        result.err
    )
    bench, _ = render("mode: bench\nexplorer:\n  bench_on_latest_checkpoint: true\n", "hardware=cpu")
    assert bench.code == 0 and "bench_on_latest_checkpoint" not in bench.err


def test_verls_checkpoint_counts_upstream_overwrites_are_noted_as_changing_nothing(render):
    """Trinity-RFT's test template writes verl's trainer section; its verl config overwrites both keys from
    trainer.max_checkpoints_to_keep. Any other key of that section is still refused."""
    text = "trainer:\n  trainer_config:\n    trainer: {max_actor_ckpt_to_keep: 1, max_critic_ckpt_to_keep: 1}\n"
    result, cfg = render(text, "hardware=a100")
    assert result.code == 0 and cfg["trainer"]["max_actor_ckpt_to_keep"] is None  # all kept, max_checkpoints_to_keep 0
    for key in ("max_actor_ckpt_to_keep", "max_critic_ckpt_to_keep"):
        assert f"trainer.trainer_config.trainer.{key}: changes nothing: Trinity-RFT writes it from" in result.err
    result, _ = render(text.replace("}", ", logger: [console]}"), "hardware=a100")
    assert result.code == 2 and "trainer.trainer_config.trainer: not a verl section trinity passes on" in result.err
