"""trinity/config/algorithms/queries.py: one predicate per question, answered from the entries."""

from trinity.config.algorithms.presets import ALGORITHMS


def test_one_predicate_says_whether_an_algorithm_reads_rollouts():
    from trinity.config.algorithms.queries import needs_rollout

    assert [name for name in ALGORITHMS if not needs_rollout(name)] == ["sft", "dpo", "cpt"]  # data sets, no explorer
    assert needs_rollout("grpo") and needs_rollout("raft")  # RAFT: SFT on the explorer's rollouts
    assert needs_rollout("no_such_algorithm") and needs_rollout(None)  # refused by the preset rule, counted as RL


def test_whether_a_loss_trains_on_advantages_is_the_loss_entrys_answer():
    from trinity.config.algorithms.losses import POLICY_LOSSES
    from trinity.config.algorithms.queries import is_rl_loss

    assert [name for name in POLICY_LOSSES if not is_rl_loss(name)] == ["sft", "dpo", "sft_is", "sft_phi"]
    assert is_rl_loss("ppo") and is_rl_loss("no_such_loss")
    # an RL or pairs loss names the verl loss mode verl's ppo_loss calls; SFT's verl sft_loss reads none
    assert all((loss.batch != "sft") == (loss.loss_mode is not None) for loss in POLICY_LOSSES.values())


def test_a_step_reads_the_old_policy_before_its_update_only_for_these_readers():
    """Each reader alone makes the trainer compute the old policy before the update; without one, the update's own
    forward pass gives it (trainer/old_policy.py)."""
    from types import SimpleNamespace

    from trinity.config.algorithms.queries import reads_old_policy_before_update

    plain = dict(kl_penalty_fn="none", rollout_correction=None, advantage_fn="grpo", policy_loss_fn="ppo")
    readers = {
        "kl_penalty_fn": "k2",  # the penalty in the reward: KL(old, reference)
        "rollout_correction": object(),  # IS weights from the old policy against the engines'
        "advantage_fn": "clipb",  # the actor's entropy from the old policy's pass
        "policy_loss_fn": "m2po",  # the batch mask's log-ratio
    }
    assert not reads_old_policy_before_update(SimpleNamespace(**plain))
    assert not reads_old_policy_before_update(SimpleNamespace(**plain | {"kl_penalty_fn": None}))
    for key, value in readers.items():
        assert reads_old_policy_before_update(SimpleNamespace(**plain | {key: value})), key
    assert reads_old_policy_before_update(SimpleNamespace(**plain | {"advantage_fn": "on_policy_distill"}))
