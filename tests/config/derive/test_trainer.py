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
