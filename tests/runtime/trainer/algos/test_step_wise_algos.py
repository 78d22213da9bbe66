"""The step-wise advantages of multi-turn episodes (multi_step_grpo's step_wise_grpo, gigpo) against values computed
by hand from Trinity-RFT 0.6.0's definitions (advantage_fn/multi_step_grpo_advantage.py, gigpo_advantage.py), reached
the way the trainer reaches them: by their entries, through verl's registry, over a batch of experiences. An
episode's steps are its turns (runs of the model's tokens), in one experience or in several that share an episode
id; GiGPO's anchor state is the token context a step acted on."""

import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trinity.config.algorithms.functions import FUNCTIONS
from trinity.runtime.experience import Experience
from trinity.runtime.trainer import functions
from trinity.runtime.trainer.algos import gigpo

pytest.importorskip("verl.trainer.ppo.core_algos")
EPS = 1e-6


def advantages(name, exps, **args):
    """Each experience's per-token advantages, with the defaults a config fills in for what `args` leaves out."""
    full = FUNCTIONS["advantage_fn"][name](**args).model_dump()
    return functions.advantages_and_returns(exps, SimpleNamespace(advantage_fn=name, advantage_fn_args=full))[0]


def turn(prompt, response, mask=None, reward=0.0, group="a", episode="", turn_rewards=None):
    return Experience(
        prompt, response, [-1.0] * len(response), reward, group, action_mask=mask, episode=episode,
        turn_rewards=turn_rewards,
    )  # fmt: skip


# --- step_wise_grpo ---------------------------------------------------------------------------------------------


def test_episodes_whose_rewards_all_agree_have_nothing_to_learn():
    """16 single-turn episodes of one task, each rewarded 0.7 (not a sum of powers of two): advantage 0 on each, as
    grpo's, not float32's rounding of their mean divided by std + epsilon."""
    exps = [turn([1], [2], reward=0.7, episode=f"e{i}") for i in range(16)]
    assert advantages("step_wise_grpo", exps) == [[0.0]] * 16 == advantages("grpo", exps)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=5), min_size=1, max_size=4))
def test_step_wise_grpo_of_single_experience_episodes_is_grpo(groups):
    exps = [turn([1], [2, 3], reward=r, group=f"t{g}") for g, rewards in enumerate(groups) for r in rewards]
    grpo = advantages("grpo", exps)
    assert advantages("step_wise_grpo", exps) == [pytest.approx(row, abs=1e-5) for row in grpo]


def test_an_episode_of_several_experiences_counts_once_and_each_gets_its_advantage():
    # episode "x" (reward 1) is two experiences, as an agent whose calls broke the chain makes; "y" (reward 0) one
    exps = [
        turn([1], [5, 6], reward=1.0, episode="x"),
        turn([1, 5, 6, 9], [7], reward=1.0, episode="x"),
        turn([1], [4], reward=0.0, episode="y"),
    ]
    spread = 1 / math.sqrt(2)  # the unbiased std of [1, 0]: two episodes, not three experiences
    score = 0.5 / (spread + EPS)
    assert advantages("step_wise_grpo", exps) == [
        pytest.approx([score, score]),
        pytest.approx([score]),
        pytest.approx([-score]),
    ]


def test_the_final_reward_is_the_episodes_last_experiences():
    exps = [
        turn([1], [5], reward=0.0, episode="x"),
        turn([1, 5, 9], [7], reward=1.0, episode="x"),  # the last: its reward is the episode's
        turn([1], [4], reward=0.0, episode="y"),
    ]
    got = advantages("step_wise_grpo", exps, epsilon=1.0)
    score = 0.5 / (1 / math.sqrt(2) + 1.0)
    assert [row[0] for row in got] == pytest.approx([score, score, -score])


def test_step_norm_divides_by_the_episodes_turns_and_only_the_models_tokens_get_it():
    two_turns = turn([1], [5, 9, 6], mask=[1, 0, 1], reward=1.0)
    exps = [two_turns, turn([1], [4], reward=0.0)]
    score = 0.5 / (1 / math.sqrt(2) + EPS)
    assert advantages("step_wise_grpo", exps) == [pytest.approx([score, 0.0, score]), pytest.approx([-score])]
    normed = advantages("step_wise_grpo", exps, enable_step_norm=True)
    assert normed == [pytest.approx([score / 2, 0.0, score / 2]), pytest.approx([-score])]


def test_batch_level_std_takes_every_episodes_final_reward_and_each_tasks_mean():
    exps = [turn([1], [2], reward=r, group=g) for g, r in (("a", 1.0), ("a", 0.0), ("b", 1.0), ("b", 1.0))]
    spread = torch.tensor([1.0, 0.0, 1.0, 1.0]).std().item()  # 0.5
    got = advantages("step_wise_grpo", exps, std_cal_level="batch")
    assert [row[0] for row in got] == pytest.approx([0.5 / (spread + EPS), -0.5 / (spread + EPS), 0.0, 0.0])
    # a task of one episode: mean 0 (as upstream), over the batch's std
    alone = advantages("step_wise_grpo", exps[:2] + [turn([1], [2], reward=1.0, group="c")], std_cal_level="batch")
    assert alone[2][0] == pytest.approx(1.0 / (torch.tensor([1.0, 0.0, 1.0]).std().item() + EPS))


def test_a_task_of_one_episode_keeps_its_reward():
    assert advantages("step_wise_grpo", [turn([1], [2], reward=0.5)]) == [pytest.approx([0.5 / (1 + EPS)])]


# --- gigpo ------------------------------------------------------------------------------------------------------


def test_gigpo_adds_omega_times_the_step_advantage_within_each_anchor_state():
    # three episodes of one task from the same prompt [1]: turn 1 of all three acted on context [1] (one anchor);
    # turn 2 of "ep1" and "ep2" on [1, 5, 9] (both replied 5 and heard 9): a second anchor
    exps = [
        turn([1], [5, 9, 6], mask=[1, 0, 1], reward=1.0, turn_rewards=[0.5, 0.5]),
        turn([1], [5, 9, 7], mask=[1, 0, 1], reward=0.0),
        turn([1], [4], reward=0.0),
    ]
    # gamma 0.5: step returns [0.75, 0.5], [0, 0], [0]; episode returns [1, 0, 0]: A_E = r - 1/3 (fnorm none)
    # anchor [1]: [0.75, 0, 0] - 0.25; anchor [1, 5, 9]: [0.5, 0] - 0.25
    got = advantages("gigpo", exps, omega=2.0, gamma=0.5)
    a_e = [2 / 3, -1 / 3, -1 / 3]
    assert got[0] == pytest.approx([a_e[0] + 2 * 0.5, 0.0, a_e[0] + 2 * 0.25], abs=1e-5)
    assert got[1] == pytest.approx([a_e[1] - 2 * 0.25, 0.0, a_e[1] - 2 * 0.25], abs=1e-5)
    assert got[2] == pytest.approx([a_e[2] - 2 * 0.25], abs=1e-5)


def test_gigpo_with_std_normalisation_and_lone_anchors():
    # two episodes whose second turns saw different feedback: those anchors have one step each (A_S 0)
    exps = [
        turn([1], [5, 9, 6], mask=[1, 0, 1], reward=1.0),
        turn([1], [5, 8, 7], mask=[1, 0, 1], reward=0.0),
    ]
    score = 0.5 / (1 / math.sqrt(2) + EPS)  # both A_E and turn 1's A_S: returns [1, 0] normalised by their std
    got = advantages("gigpo", exps, fnorm="std")
    assert got == [pytest.approx([2 * score, 0.0, score]), pytest.approx([-2 * score, 0.0, -score])]
    assert advantages("gigpo", exps, fnorm="std", omega=0.0) == [
        pytest.approx([score, 0.0, score]),
        pytest.approx([-score, 0.0, -score]),
    ]


def test_gigpo_counts_the_reward_an_agents_broken_chain_repeats_once():
    # episode "x" is two experiences that both carry its reward 1 (episodes.py): its return is 1, not 2. Its first
    # experience has two turns: the reward it repeats comes off its last turn only
    exps = [
        turn([1], [5, 8, 6], mask=[1, 0, 1], reward=1.0, episode="x"),
        turn([1, 5, 8, 6, 9], [7], reward=1.0, episode="x"),
        turn([1], [4], reward=0.0, episode="y"),
    ]
    # A_E [0.5, -0.5]; anchor [1]: x's first step (return 0 + 0 + 1) against y's (0): [0.5, -0.5]; the others alone
    got = advantages("gigpo", exps)
    assert got == [pytest.approx(v, abs=1e-5) for v in ([1.0, 0.0, 0.5], [0.5], [-1.0])]


def test_an_experience_that_rewards_its_turns_is_its_own_part_of_the_episode():
    # x's first experience rewards its turn (0.25) and is not the last: its reward is part of x's, which is 1.25
    exps = [
        turn([1], [5], reward=0.25, episode="x", turn_rewards=[0.25]),
        turn([1, 5, 9], [7], reward=1.0, episode="x"),
        turn([1], [4], reward=0.25, episode="y"),
    ]
    score = 0.5 / (1 / math.sqrt(2) + EPS)  # [1.25, 0.25] normalised
    assert [row[0] for row in advantages("step_wise_grpo", exps)] == pytest.approx([score, score, -score])
    # gigpo, fnorm none: A_E +-0.5; anchor [1]: x's return 1.25 against y's 0.25: +-0.5
    assert [row[0] for row in advantages("gigpo", exps)] == pytest.approx([1.0, 0.5, -1.0], abs=1e-5)


def test_a_kl_penalty_comes_off_each_steps_reward():
    exps = [turn([1], [5, 9, 6], mask=[1, 0, 1], reward=1.0), turn([1], [4], reward=0.0)]
    full = FUNCTIONS["advantage_fn"]["gigpo"]().model_dump()
    algorithm = SimpleNamespace(advantage_fn="gigpo", advantage_fn_args=full)
    penalties = [[0.25, 0.0, 0.25], [0.0]]
    got = functions.advantages_and_returns(exps, algorithm, penalties)[0]
    # returns 1 - 0.5 and 0: A_E +-0.25; anchor [1] (both first turns), step returns 0.5 and 0: +-0.25
    assert [got[0][0], got[0][2], got[1][0]] == pytest.approx([0.5, 0.25, -0.5], abs=1e-5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=6), st.floats(0, 1))
def test_discounted_returns_satisfy_the_bellman_recursion(rewards, gamma):
    got = gigpo.returns(rewards, gamma)
    assert got[-1] == pytest.approx(rewards[-1])
    assert all(got[t] == pytest.approx(rewards[t] + gamma * got[t + 1]) for t in range(len(rewards) - 1))
