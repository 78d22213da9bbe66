"""GRPO's advantages for the whole batch at once: verl's grpo estimator's values for any rewards, tasks and masks,
with and without dividing by the std; a task is its label."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")

# rollouts as (task, reward, response length): tasks of one rollout too; rewards of 0.25 steps, which both sum exactly
ROLLOUTS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "1", "01"]), st.integers(-12, 12).map(lambda q: q / 4), st.integers(1, 4)
    ),
    min_size=1,
    max_size=24,
)


def batch(rollouts):
    """The estimators' inputs: each reward on its response's last token, the mask covering the response."""
    width = max(length for *_, length in rollouts)
    rewards, mask = torch.zeros(len(rollouts), width), torch.zeros(len(rollouts), width)
    for row, (_, reward, length) in enumerate(rollouts):
        rewards[row, length - 1], mask[row, :length] = reward, 1.0
    return rewards, mask, np.array([task for task, *_ in rollouts], dtype=object)


@settings(max_examples=120, deadline=None)
@given(rollouts=ROLLOUTS, norm=st.booleans(), epsilon=st.sampled_from([1e-6, 1.0]))
def test_the_advantages_are_verls_grpo_estimators(rollouts, norm, epsilon):
    from trinity.runtime.trainer.algos.grpo import grpo_advantage

    rewards, mask, index = batch(rollouts)
    ours, returns = grpo_advantage(rewards, mask, index, epsilon=epsilon, norm_adv_by_std=norm)
    verls, _ = core_algos.compute_grpo_outcome_advantage(
        rewards.clone(), mask, index, epsilon=epsilon, norm_adv_by_std_in_grpo=norm
    )
    assert torch.allclose(ours, verls, rtol=1e-6, atol=1e-6)
    assert torch.equal(returns, ours)


def test_each_task_is_its_label_and_a_task_of_one_is_not_normalised():
    """Tasks "1" and "01" are two (verl's vectorized estimator reads both as 1, in a batch of labels that all parse as
    integers); a task of one rollout keeps its reward (mean 0, std 1); the advantage is on every response token, 0
    past it."""
    from trinity.runtime.trainer.algos.grpo import grpo_advantage

    rewards, mask, index = batch([("1", 1.0, 2), ("1", 0.0, 1), ("01", 0.0, 1), ("01", 1.0, 2), ("7", 0.5, 1)])
    got, _ = grpo_advantage(rewards, mask, index)
    spread = 0.5 / (0.5**0.5 + 1e-6)  # (r - 0.5) / (the unbiased std of [1, 0]: 0.707 + epsilon)
    expected = [[spread, spread], [-spread, 0.0], [-spread, 0.0], [spread, spread], [0.5 / (1 + 1e-6), 0.0]]
    assert torch.allclose(got, torch.tensor(expected), rtol=1e-6)
    plain, _ = grpo_advantage(rewards, mask, index, norm_adv_by_std=False)
    assert plain[:, 0].tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.5])


@pytest.mark.parametrize("reward", [0.7, 2.2, 1 / 3])
def test_a_task_whose_rewards_agree_has_nothing_to_learn(reward):
    """100 rollouts of one task, each rewarded `reward` (not a sum of powers of two): advantage 0 on every one, not
    the few ulps of a float32 sum made large by the division by std + epsilon."""
    from trinity.runtime.trainer.algos.grpo import grpo_advantage

    rewards, mask, index = batch([("t", reward, 1)] * 100 + [("u", 0.0, 1), ("u", 1.0, 1)])
    got, _ = grpo_advantage(rewards, mask, index)
    assert torch.equal(got[:100], torch.zeros(100, 1)) and got[100:].abs().min() > 0.7
