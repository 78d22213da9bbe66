"""Rules of trinity/config/derive/trainer.py, each through `trinity config render/validate`:
checkpoints kept, the verl passthrough's shape, the critic warm-up.
"""

import pytest


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
