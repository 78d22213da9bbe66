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
