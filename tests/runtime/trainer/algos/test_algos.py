"""trinity's own advantage estimators and policy losses, and verl's that Trinity-RFT's presets name, against values
computed by hand from Trinity-RFT 0.6.0's definitions (trinity/algorithm/advantage_fn/*.py and
policy_loss_fn/*.py of its wheel; the papers they cite are named in each module). Every function is reached the way
the trainer reaches it: by its entry, through verl's registries, with the arguments a run config gives it.
Gradients are checked where a definition stops one (a detached weight or mask)."""

import math
from types import SimpleNamespace

import pytest
import torch

from trinity.config.algorithms.advantages import ADVANTAGES
from trinity.config.algorithms.functions import FUNCTIONS
from trinity.config.algorithms.losses import POLICY_LOSSES
from trinity.runtime.experience import Experience
from trinity.runtime.trainer import functions

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")


def advantage_rows(*args, **kwargs):
    """The advantages of functions.advantages_and_returns."""
    return functions.advantages_and_returns(*args, **kwargs)[0]


def exp(reward, group="a", tokens=1):
    return Experience([1], [2] * tokens, [-1.0] * tokens, float(reward), group)


def advantages(name, rewards, tokens=1, **args):
    """The first-token advantage of each rollout; `rewards` maps a task to its rollouts' rewards."""
    exps = [exp(r, g, tokens) for g, rs in rewards.items() for r in rs]
    full = FUNCTIONS["advantage_fn"][name](**args).model_dump()  # the defaults a config would fill
    got = advantage_rows(exps, SimpleNamespace(advantage_fn=name, advantage_fn_args=full))
    assert all(len(row) == tokens and len(set(row)) == 1 for row in got)  # one value on every response token
    return [row[0] for row in got]


# --- advantages ------------------------------------------------------------------------------------------------


def test_rloo_is_the_reward_minus_the_mean_of_the_other_rollouts():
    # [1, 0, 0, 1]: 1 - 1/3 = 2/3, 0 - 2/3 = -2/3; a lone rollout keeps its reward
    got = advantages("rloo", {"a": [1, 0, 0, 1], "b": [1]})
    assert got == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3, 1.0])


def test_reinforceplusplus_whitens_the_discounted_return_over_the_batch():
    # gamma 1: every token's return is the reward, [[1, 1], [0, 0]]; whitened by the batch's (unbiased) token std
    spread = 0.5 / math.sqrt(1 / 3)
    assert advantages("reinforceplusplus", {"a": [1], "b": [0]}, tokens=2) == pytest.approx([spread, -spread])


def test_reinforceplusplus_discounts_by_gamma():
    exps = [exp(1, "a", tokens=2), exp(0, "b", tokens=2)]
    got = advantage_rows(exps, SimpleNamespace(advantage_fn="reinforceplusplus", advantage_fn_args={"gamma": 0.5}))
    # returns [[0.5, 1], [0, 0]]: mean 0.375, unbiased variance (0.015625 + 0.390625 + 2 * 0.140625) / 3
    mean, std = 0.375, math.sqrt((0.125**2 + 0.625**2 + 2 * 0.375**2) / 3)
    assert got[0] + got[1] == pytest.approx([(0.5 - mean) / std, (1 - mean) / std, -mean / std, -mean / std], rel=1e-5)


def test_reinforce_is_the_reward_itself():
    assert advantages("reinforce", {"a": [1, 0, 0.5]}) == pytest.approx([1.0, 0.0, 0.5])


def test_opmd_subtracts_the_group_mean():
    assert advantages("opmd", {"a": [1, 0, 0, 1], "b": [0.5]}) == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.5])


def test_opmd_logavgexp_baseline():
    # tau * log(mean(exp(r / tau))) of [1, 0, 0, 1] at tau 2: 2 * log((2 e^0.5 + 2) / 4)
    base = 2 * math.log((math.exp(0.5) + 1) / 2)
    got = advantages("opmd", {"a": [1, 0, 0, 1]}, opmd_baseline="logavgexp", tau=2.0)
    assert got == pytest.approx([1 - base, -base, -base, 1 - base])


def test_asymre_shifts_the_baseline():
    # baseline = mean 0.5 + shift -0.1 = 0.4; a group of one has baseline 0
    got = advantages("asymre", {"a": [1, 0, 0, 1], "b": [1]})
    assert got == pytest.approx([0.6, -0.4, -0.4, 0.6, 1.0])
    assert advantages("asymre", {"a": [1, 0]}, baseline_shift=0.25) == pytest.approx([0.25, -0.75])


def test_rec_centres_and_optionally_normalises():
    assert advantages("rec", {"a": [1, 0, 0, 1]}) == pytest.approx([0.5, -0.5, -0.5, 0.5])
    # population std of [1, 0, 0, 1] is 0.5
    got = advantages("rec", {"a": [1, 0, 0, 1]}, std_normalize=True, epsilon=0.5)
    assert got == pytest.approx([0.5, -0.5, -0.5, 0.5])  # 0.5 / (0.5 + 0.5)


def test_rec_balance_drops_surplus_below_mean_rollouts():
    # [1, 0, 0, 0]: three below the mean, one above: two of the zeros are dropped (advantage 0); the kept pair
    # [1, 0] has mean 0.5
    got = advantages("rec", {"a": [1, 0, 0, 0]}, drop="balance")
    assert got[0] == pytest.approx(0.5)
    assert sorted(got[1:]) == pytest.approx([-0.5, 0.0, 0.0])
    assert advantages("rec", {"a": [1, 0, 0, 0]}, drop="balance") == got  # seeded by the task: the same ones


@pytest.mark.parametrize(
    "lam, raw, returns",
    [
        # lam 1: the return to go minus the value, [[0.5, 0.75], [-0.5, -0.25]]; returns = advantage + value
        (1.0, [0.5, 0.75, -0.5, -0.25], [[1.0, 1.0], [0.0, 0.0]]),
        # lam 0: one-step TD errors, r_t + V_{t+1} - V_t
        (0.0, [-0.25, 0.75, -0.25, -0.25], [[0.25, 1.0], [0.25, 0.0]]),
    ],
)
def test_ppos_gae_over_the_critics_values_whitened_over_the_batch(lam, raw, returns):
    exps = [exp(1, "a", tokens=2), exp(0, "b", tokens=2)]
    values = [[0.5, 0.25], [0.5, 0.25]]
    algorithm = SimpleNamespace(advantage_fn="ppo", advantage_fn_args={"gamma": 1.0, "lam": lam})
    got, got_returns = functions.advantages_and_returns(exps, algorithm, values=values)
    mean = sum(raw) / 4
    std = math.sqrt(sum((a - mean) ** 2 for a in raw) / 3)  # unbiased, over the batch's response tokens
    assert got[0] + got[1] == pytest.approx([(a - mean) / std for a in raw], rel=1e-5)
    assert got_returns == [pytest.approx(r) for r in returns]  # the critic's targets are not whitened


def test_gae_discounts_by_gamma():
    exps = [exp(1, "a", tokens=2), exp(0, "b", tokens=2)]
    algorithm = SimpleNamespace(advantage_fn="ppo", advantage_fn_args={"gamma": 0.5, "lam": 1.0})
    _, got_returns = functions.advantages_and_returns(exps, algorithm, values=[[0.0, 0.0], [0.0, 0.0]])
    assert got_returns == [pytest.approx([0.5, 1.0]), pytest.approx([0.0, 0.0])]


def test_gae_without_a_critics_values_names_what_is_missing():
    with pytest.raises(TypeError, match=r"needs \['values'\]"):
        advantage_rows([exp(1)], SimpleNamespace(advantage_fn="ppo", advantage_fn_args={"gamma": 1, "lam": 1}))


def test_remax_is_the_return_minus_the_tasks_greedy_reward():
    exps = [exp(1.0, "a", tokens=2), exp(0.0, "a", tokens=2)]
    exps = [Experience(e.prompt_ids, e.response_ids, e.logprobs, e.reward, e.group, baseline=0.25) for e in exps]
    got = advantage_rows(exps, SimpleNamespace(advantage_fn="remax", advantage_fn_args={}))
    assert got == [pytest.approx([0.75, 0.75]), pytest.approx([-0.25, -0.25])]  # the return to go is the reward


def test_remax_without_the_greedy_baselines_names_what_is_missing():
    with pytest.raises(TypeError, match=r"needs \['reward_baselines'\]"):
        advantage_rows([exp(1.0)], SimpleNamespace(advantage_fn="remax", advantage_fn_args={}))


def test_the_deprecated_verl_names_compute_the_same_values():
    for old, new in (("grpo_verl", "grpo"), ("opmd_verl", "opmd"), ("asymre_verl", "asymre")):
        assert ADVANTAGES[old] == ADVANTAGES[new]


# --- policy losses ----------------------------------------------------------------------------------------------


def loss(name, log_prob, old, adv, agg="token-mean", config=None, **args):
    """(loss, d loss / d log_prob) of one row of tokens through verl's registry, bound to `args`."""
    full = FUNCTIONS["policy_loss_fn"][name](**args).model_dump()
    fn = core_algos.get_policy_loss_fn(functions.loss_mode(name, full))
    log_prob = torch.tensor([log_prob], requires_grad=True)
    value, metrics = fn(
        old_log_prob=torch.tensor([old]),
        log_prob=log_prob,
        advantages=torch.tensor([adv]),
        response_mask=torch.ones(1, len(adv), dtype=torch.bool),
        loss_agg_mode=agg,
        config=config,
    )
    value.backward()
    return value.item(), log_prob.grad[0].tolist()


def test_opmd_loss_is_the_policy_gradient_damped_by_one_plus_tau():
    value, grad = loss("opmd", [-1.0, -2.0], [-9.0, -9.0], [1.0, 1.0])  # the old log-probs are not read
    assert value == pytest.approx((1 + 2) / 2 / 2)
    assert grad == pytest.approx([-0.25, -0.25])  # -A / n / (1 + tau)
    assert loss("opmd", [-1.0, -2.0], [0.0, 0.0], [1.0, 1.0], tau=0.0)[0] == pytest.approx(1.5)


def test_topr_tapers_only_the_rollouts_at_or_below_the_threshold():
    ratios = [math.exp(0.5), math.exp(-1.0)]  # log pi - log mu = [0.5, -1]
    value, grad = loss("topr", [-0.5, -2.0], [-1.0, -1.0], [1.0, -1.0])
    # alpha = [1 (A > 0), clip(ratio, 0, 1) = e^-1]; loss tokens -alpha * A * log pi = [0.5, -2 e^-1]
    assert value == pytest.approx((0.5 - 2 * ratios[1]) / 2)
    assert grad == pytest.approx([-0.5, ratios[1] / 2])  # alpha is not differentiated
    # a threshold above both advantages tapers both (the first ratio clipped to 1)
    assert loss("topr", [-0.5, -2.0], [-1.0, -1.0], [1.0, -1.0], advantage_threshold=2.0)[0] == pytest.approx(
        (0.5 - 2 * ratios[1]) / 2
    )
    assert loss("topr", [-1.5, -2.0], [-1.0, -1.0], [1.0, -1.0], advantage_threshold=2.0)[0] == pytest.approx(
        (-(math.exp(-0.5) * -1.5) - 2 * ratios[1]) / 2
    )


def test_sppo_trains_the_log_ratio_inside_its_range_only():
    # log-ratios [0.1, -0.1, 0.5]: ratios 1.105 and 0.905 lie in [1/1.3, 1.3]; 1.649 does not
    value, grad = loss("sppo", [-0.9, -1.1, -0.5], [-1.0, -1.0, -1.0], [1.0, -1.0, 1.0])
    assert value == pytest.approx((-0.1 - 0.1 + 0.0) / 3)
    assert grad == pytest.approx([-1 / 3, 1 / 3, 0.0])
    assert loss("sppo", [-0.9, -1.1, -0.5], [-1.0, -1.0, -1.0], [1.0, -1.0, 1.0], epsilon=1.0)[0] == pytest.approx(
        (-0.1 - 0.1 - 0.5) / 3
    )


def test_sapo_gates_softly_with_a_temperature_per_sign():
    # ratio 1: gate = sigmoid(0) * 4 / tau = 2 / tau; tokens -A * gate * log pi with log pi = -1
    value, grad = loss("sapo", [-1.0, -1.0], [-1.0, -1.0], [1.0, -1.0])
    assert value == pytest.approx((2.0 - 2 / 1.05) / 2, rel=1e-5)
    assert grad == pytest.approx([-1.0, 1 / 1.05], rel=1e-5)  # -A * gate / n: the gate is not differentiated
    gate = 1 / (1 + math.exp(-2 * (math.exp(0.5) - 1))) * 4 / 2  # tau_pos 2 at ratio e^0.5
    assert loss("sapo", [-0.5], [-1.0], [1.0], tau_pos=2.0, tau_neg=2.0)[0] == pytest.approx(gate * 0.5)


def test_rec_masks_by_its_clip_mode_and_weights_by_its_weight():
    ratios = [math.exp(0.5), math.exp(-0.5), 1.0, math.exp(-1.0), 0.7]
    lp, adv = [-1.0 + math.log(r) for r in ratios], [1.0, -1.0, 2.0, 1.0, 1.0]
    old, tokens = [-1.0] * 5, [-a * p for a, p in zip(adv, lp)]

    def kept(*rows):
        return pytest.approx(sum(tokens[i] for i in rows) / 5)

    assert loss("rec", lp, old, adv)[0] == kept(0, 1, 2, 3, 4)  # none: plain REINFORCE
    assert loss("rec", lp, old, adv, clip_mode="two-side")[0] == kept(2)  # ratio within [0.8, 1.2]
    # one-side: A >= 0 needs ratio <= 1.2, A <= 0 needs ratio >= 0.8
    assert loss("rec", lp, old, adv, clip_mode="one-side")[0] == kept(2, 3, 4)
    # ring: within [0.8, 1.2], or A >= 0 with ratio <= 1 - 0.6, or A <= 0 with ratio >= 1 + 2
    assert loss("rec", lp, old, adv, clip_mode="ring")[0] == kept(2, 3)
    assert loss("rec", lp, old, adv, clip_mode="ring", epsilon_low_prime=0.2)[0] == kept(2, 3, 4)
    value, grad = loss("rec", lp, old, adv, weight="importance_sampling")
    assert value == pytest.approx(sum(t * r for t, r in zip(tokens, ratios)) / 5, rel=1e-5)
    assert grad == pytest.approx([-a * r / 5 for a, r in zip(adv, ratios)], rel=1e-5)  # the weight: no gradient
    assert loss("rec", [-1.0], [-1.0], [2.0], weight="advantage", temp=2.0)[0] == pytest.approx(2 * math.e)


def test_rec_regularisers():
    lp, old, adv = [-0.5], [-1.0], [0.0]
    assert loss("rec", lp, old, adv, regularizer="k2", regularizer_coef=2.0)[0] == pytest.approx(2 * 0.25)
    assert loss("rec", lp, old, adv, regularizer="forward-kl", regularizer_coef=2.0)[0] == pytest.approx(1.0)


def test_rec_gspo_one_side_judges_and_averages_whole_sequences():
    lp = torch.tensor([[-0.5, -1.5], [-1.0, -1.0]])
    fn = core_algos.get_policy_loss_fn(
        functions.loss_mode("rec", FUNCTIONS["policy_loss_fn"]["rec"](clip_mode="gspo-one-side").model_dump())
    )
    value, _ = fn(
        old_log_prob=torch.full((2, 2), -1.0),
        log_prob=lp,
        advantages=torch.tensor([[1.0, 1.0], [1.0, 1.0]]),
        response_mask=torch.tensor([[1, 1], [1, 0]], dtype=torch.bool),
        loss_agg_mode="token-mean",
        config=None,
    )
    # sequence ratios: exp(mean(0.5, -0.5)) = 1 and 1: both kept; per-sequence means 1.0 and 1.0
    assert value.item() == pytest.approx((1.0 + 1.0) / 2)


@pytest.mark.parametrize("name", ["opmd", "topr", "sppo", "sapo", "importance_sampling"])
def test_each_own_loss_aggregates_by_loss_agg_mode_over_the_global_batch(name):
    lp, old, adv = [-0.9, -1.1], [-1.0, -1.0], [1.0, 1.0]
    token_mean, _ = loss(name, lp, old, adv)
    token_sum, _ = loss(name, lp, old, adv, agg="seq-mean-token-sum")
    assert token_sum == pytest.approx(2 * token_mean)  # one sequence of two tokens
    # verl's ppo_loss hands the global batch: 2 ranks, 8 tokens in all; this rank's 2 count for 2/8 of the mean
    config = SimpleNamespace(global_batch_info={"dp_size": 2, "batch_num_tokens": 8, "global_batch_size": 4})
    assert loss(name, lp, old, adv, config=config)[0] == pytest.approx(token_mean * 2 / 8 * 2)


def test_an_own_loss_is_bound_to_the_runs_arguments_each_time():
    assert loss("opmd", [-2.0], [0.0], [1.0], tau=1.0)[0] == pytest.approx(1.0)
    assert loss("opmd", [-2.0], [0.0], [1.0], tau=3.0)[0] == pytest.approx(0.5)  # rebound, not the first binding


def test_a_bound_loss_never_replaces_a_loss_of_verls():
    with pytest.raises(ValueError, match="'vanilla' is already registered"):
        functions.OWN_LOSSES["vanilla"] = functions.OWN_LOSSES["trinity_opmd"]
        try:
            functions.bind_loss("vanilla", {})
        finally:
            del functions.OWN_LOSSES["vanilla"]
    assert core_algos.get_policy_loss_fn("vanilla") is core_algos.compute_policy_loss_vanilla


def test_every_own_loss_entry_names_a_declared_loss():
    own = {e.loss_mode for e in POLICY_LOSSES.values() if e.module and e.actor_loss is None}
    for name in (n for n, e in POLICY_LOSSES.items() if e.module):
        functions.loss_mode(name)  # imports its module
    assert own <= set(functions.OWN_LOSSES)
    # a loss that replaces verl's actor loss is a function of its module, and a mixing one runs verl's PPO part
    import importlib

    for entry in (e for e in POLICY_LOSSES.values() if e.actor_loss):
        assert callable(getattr(importlib.import_module(entry.module), entry.actor_loss))
        assert entry.batch == "sft" or core_algos.get_policy_loss_fn(entry.loss_mode)


# --- DPO: pairs of rows, the reference's log-probs where an RL batch has the old policy's ------------------------


def dpo(log_prob, ref, mask, config=None, **args):
    full = FUNCTIONS["policy_loss_fn"]["dpo"](**args).model_dump()
    fn = core_algos.get_policy_loss_fn(functions.loss_mode("dpo", full))
    log_prob = torch.tensor(log_prob, requires_grad=True)
    value, metrics = fn(
        old_log_prob=torch.tensor(ref),
        log_prob=log_prob,
        advantages=torch.zeros(len(ref), len(ref[0])),
        response_mask=torch.tensor(mask, dtype=torch.bool),
        loss_agg_mode="token-mean",  # DPO's loss is a mean over pairs whatever the mode
        config=config,
    )
    value.backward()
    return value.item(), log_prob.grad.tolist(), metrics


def test_dpo_compares_the_chosen_and_rejected_log_ratios_to_the_reference():
    # chosen: log-ratio 0.5 + 0.5 = 1; rejected (one token): -2 - -1 = -1; z = 0.1 * (1 - -1) = 0.2
    lp, ref, mask = [[-1.0, -1.0], [-2.0, 0.0]], [[-1.5, -1.5], [-1.0, 0.0]], [[1, 1], [1, 0]]
    value, grad, metrics = dpo(lp, ref, mask)
    assert value == pytest.approx(math.log(1 + math.exp(-0.2)), rel=1e-5)  # -logsigmoid(0.2)
    step = 0.1 / (1 + math.exp(0.2))  # beta * sigmoid(-z)
    assert grad == [pytest.approx([-step, -step], rel=1e-4), pytest.approx([step, 0.0], rel=1e-4)]
    assert metrics["actor/dpo_accuracy"] == 1.0
    smoothed, _, _ = dpo(lp, ref, mask, label_smoothing=0.25, beta=0.5)  # z = 1
    assert smoothed == pytest.approx(0.75 * math.log(1 + math.exp(-1)) + 0.25 * math.log(1 + math.exp(1)), rel=1e-5)


def test_dpo_averages_over_pairs_of_the_whole_batch():
    one = [[-1.0], [-2.0]], [[-1.0], [-1.0]], [[1], [1]]  # z = 0.1 * (0 - -1) = 0.1
    two = [[-1.0], [-2.0], [-3.0], [-1.0]], [[-1.0], [-1.0], [-1.0], [-1.0]], [[1], [1], [1], [1]]  # z = 0.1, -0.2
    expected = (math.log(1 + math.exp(-0.1)) + math.log(1 + math.exp(0.2))) / 2
    assert dpo(*one)[0] == pytest.approx(math.log(1 + math.exp(-0.1)), rel=1e-5)
    assert dpo(*two)[0] == pytest.approx(expected, rel=1e-5)
    # this rank's 2 pairs of 8 sequences on 2 ranks: its share of the global pair mean, scaled by dp as verl's
    config = SimpleNamespace(global_batch_info={"dp_size": 2, "batch_num_tokens": 8, "global_batch_size": 8})
    assert dpo(*two, config=config)[0] == pytest.approx(expected * 2 / 4 * 2, rel=1e-5)


# --- boundaries: each case below tells one comparison or aggregation from its neighbour ------------------------


def test_topr_tapers_a_rollout_exactly_at_the_threshold():
    # A == threshold: tapered (<=), weight = ratio e^-1; untapered it would be 1
    assert loss("topr", [-2.0], [-1.0], [1.0], advantage_threshold=1.0)[0] == pytest.approx(2 * math.exp(-1), rel=1e-5)


def test_sapo_gives_a_zero_advantage_the_negative_temperature():
    fn = core_algos.get_policy_loss_fn(functions.loss_mode("sapo", {"tau_pos": 1.0, "tau_neg": 2.0}))
    _, metrics = fn(
        old_log_prob=torch.tensor([[-1.0]]),
        log_prob=torch.tensor([[-1.0]]),
        advantages=torch.tensor([[0.0]]),
        response_mask=torch.ones(1, 1, dtype=torch.bool),
        loss_agg_mode="token-mean",
        config=None,
    )
    assert metrics["actor/sapo_gate"] == pytest.approx(2 / 2.0)  # 4 sigmoid(0) / tau_neg, not / tau_pos


def test_sppos_lower_edge_is_one_over_one_plus_epsilon():
    # ratio 0.75: inside [1 - 0.3, 1.3] but outside [1 / 1.3, 1.3]
    assert loss("sppo", [-1.0 + math.log(0.75)], [-1.0], [1.0])[0] == 0.0


def test_rec_gspo_one_side_takes_the_mean_of_each_sequence():
    fn = core_algos.get_policy_loss_fn(functions.loss_mode("rec", {"clip_mode": "gspo-one-side"}))
    value, _ = fn(
        old_log_prob=torch.full((2, 2), -1.0),
        log_prob=torch.tensor([[-0.5, -2.5], [-1.0, 0.0]]),
        advantages=torch.ones(2, 2),
        response_mask=torch.tensor([[1, 1], [1, 0]], dtype=torch.bool),
        loss_agg_mode="token-mean",
        config=None,
    )
    assert value.item() == pytest.approx(((0.5 + 2.5) / 2 + 1.0) / 2)  # 1.25 per sequence; by token 4 / 3


def test_rec_balance_leaves_rewards_at_the_mean_alone():
    # mean 0.5: one rollout below it, three at or above: nothing to drop
    assert advantages("rec", {"a": [1, 0.5, 0, 0.5]}, drop="balance") == pytest.approx([0.5, 0.0, -0.5, 0.0])


def test_rec_a_group_of_one_keeps_its_reward():
    assert advantages("rec", {"a": [1.0]}) == pytest.approx([1.0])  # mean 0, std 1
    assert advantages("rec", {"a": [1.0]}, std_normalize=True, epsilon=0.5) == pytest.approx([1 / 1.5])


def test_rec_regularisers_carry_their_gradients():
    assert loss("rec", [-0.5], [-1.0], [0.0], regularizer="k2", regularizer_coef=2.0)[1] == pytest.approx([2.0])
    assert loss("rec", [-0.5], [-1.0], [0.0], regularizer="forward-kl", regularizer_coef=2.0)[1] == pytest.approx(
        [-2.0]
    )


# --- distillation: a teacher's log-probs against the student's (Trinity-RFT's on_policy_distill and jsd) ----------


def distill(name, student, teacher, **args):
    """Per-token advantages of one response per row, through the trainer's path with the log-prob columns."""
    exps = [exp(0.0, "a", tokens=len(row)) for row in student]
    full = FUNCTIONS["advantage_fn"][name](**args).model_dump()
    algorithm = SimpleNamespace(advantage_fn=name, advantage_fn_args=full)
    return advantage_rows(exps, algorithm, old_log_probs=student, teacher_log_probs=teacher)


def test_on_policy_distill_is_the_teachers_log_prob_minus_the_students():
    got = distill("on_policy_distill", [[-1.0, -2.0], [-0.5]], [[-0.5, -3.0], [-0.5]], kl_coef=2.0)
    assert got == [pytest.approx([1.0, -2.0]), pytest.approx([0.0])]  # 2 * (t - s); rewards are not read


def test_jsd_is_minus_the_mixture_divergence_per_token():
    s, t = -1.0, -2.0
    m = math.log(0.5 * math.exp(s) + 0.5 * math.exp(t))  # lambda 0.5: the even mixture
    want = -(0.5 * (t - m) + 0.5 * (s - m))
    assert distill("jsd", [[s]], [[t]]) == [pytest.approx([want])]
    m3 = math.log(0.3 * math.exp(t) + 0.7 * math.exp(s))  # lambda weighs the teacher
    assert distill("jsd", [[s]], [[t]], lambda_coef=0.3) == [pytest.approx([-(0.3 * (t - m3) + 0.7 * (s - m3))])]


def test_jsd_at_its_ends_is_a_plain_log_ratio_scaled_by_temperature_and_kl_coef():
    assert distill("jsd", [[-1.0]], [[-3.0]], lambda_coef=0.0) == [pytest.approx([-2.0])]  # -(s - t)
    assert distill("jsd", [[-1.0]], [[-3.0]], lambda_coef=1.0, kl_coef=0.5, temperature=2.0) == [
        pytest.approx([0.5])  # -0.5 * (t - s) / 2
    ]


def test_jsd_in_chunks_gives_the_same_values():
    student, teacher = [[-1.0, -0.2, -3.0], [-0.7]], [[-2.0, -0.1, -1.0], [-0.9]]
    assert distill("jsd", student, teacher, chunk_size=1) == distill("jsd", student, teacher)


def test_distillation_without_a_teachers_log_probs_names_what_is_missing():
    algorithm = SimpleNamespace(advantage_fn="on_policy_distill", advantage_fn_args={"kl_coef": 1.0})
    with pytest.raises(TypeError, match=r"needs \['old_log_probs', 'teacher_log_probs'\]"):
        advantage_rows([exp(1)], algorithm)


def test_importance_sampling_loss_is_the_unclipped_ratio_times_the_advantage():
    value, grad = loss("importance_sampling", [math.log(3.0), -1.0], [0.0, -1.0], [1.0, -2.0])
    assert value == pytest.approx((-3.0 + 2.0) / 2)  # ratios 3 (no clip at 1.2) and 1
    assert grad == pytest.approx([-3.0 / 2, 2.0 / 2])  # d(-A r)/d log pi = -A r, token-mean
    assert loss("importance_sampling", [30.0], [0.0], [1.0])[0] == pytest.approx(-math.exp(20.0))  # clamped


# --- RAFT: the SFT loss on each task's best rollout --------------------------------------------------------------


def test_raft_selects_each_tasks_best_rollout_the_first_of_equals():
    got = advantages("raft", {"a": [0.2, 0.9, 0.9], "b": [-1.0, -3.0], "c": [0.0]}, tokens=2)
    assert got == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


def test_raft_keeps_a_best_rollout_only_if_it_reaches_min_reward():
    rewards = {"a": [0.5, 1.0], "b": [0.0, 0.99]}
    assert advantages("raft", rewards, min_reward=1.0) == [0.0, 1.0, 0.0, 0.0]  # b's best falls short
    assert advantages("raft", rewards, min_reward=0.99) == [0.0, 1.0, 0.0, 1.0]  # reaching it is enough


# --- SFT samples mixed into RL batches (Trinity-RFT's mix, CHORD's mix_chord), weighted SFT -----------------------


def mixed_batch(lp, old, adv, expert, config_kl=False):
    """verl's unpadded batch of one-token prompts and the given responses (rows of per-token values), as the trainer
    builds it, and the model output whose response log-probs are `lp` (a leaf to take gradients of)."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    from trinity.runtime.trainer import batch as batches

    exps = [Experience([1], [2] * len(row), expert=e) for row, e in zip(lp, expert)]
    tensors = batches.padded(exps, 0)
    width = tensors["responses"].shape[1]
    tensors |= {
        "old_log_probs": batches.per_token(old, width),
        "advantages": batches.per_token(adv, width),
        "expert_mask": batches.expert_mask(exps, tensors["response_mask"]),
    }
    td = left_right_2_no_padding(TensorDict(tensors, batch_size=[len(exps)]))
    tokens = int(tensors["response_mask"].sum())
    tu.assign_non_tensor(td, dp_size=1, batch_num_tokens=tokens, global_batch_size=len(exps))
    leaf = torch.tensor([v for row in lp for v in row], requires_grad=True)
    values, at = [], 0
    for row in lp:  # position t holds the log-prob of token t + 1: the response's, then the next token's (unread)
        values.append(torch.cat([leaf[at : at + len(row)], torch.zeros(1)]))
        at += len(row)
    output = {"log_probs": torch.nested.as_nested_tensor(values, layout=torch.jagged)}
    return td, output, leaf, batches.counts(exps)


def actor_config(**kw):
    """verl's own actor config, as the trainer's verl section makes it."""
    from verl.workers.config import FSDPActorConfig

    return FSDPActorConfig(strategy="fsdp", ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=1, rollout_n=1, **kw)


def test_mix_is_one_minus_mu_ppo_on_rollouts_plus_mu_sft_on_samples_each_over_its_own_tokens():
    from trinity.runtime.trainer.algos import mix

    # rollouts: 2 tokens at ratio 1 (log-prob = old), advantages 1 and -2: PPO loss mean(-1, 2) = 0.5
    # samples: one row of 1 token, log-prob -3: SFT loss 3 (its own mean, not diluted by the rollouts' tokens)
    lp, old, adv = [[-1.0, -1.0], [-3.0]], [[-1.0, -1.0], [0.0]], [[1.0, -2.0], [0.0]]
    td, output, leaf, info = mixed_batch(lp, old, adv, [False, True])
    args = FUNCTIONS["policy_loss_fn"]["mix"](mu=0.25).model_dump()
    loss, metrics = mix.mix_loss(actor_config(), output, td, args=args, step=1, info=info)
    assert loss.item() == pytest.approx(0.75 * 0.5 + 0.25 * 3.0)
    loss.backward()
    # d/d lp: rollouts -A * ratio / 2 tokens * 0.75; the sample -1 * 0.25
    assert leaf.grad.tolist() == pytest.approx([-0.375, 0.75, -0.25])
    assert metrics["actor/mu"] == 0.25


def test_chord_weights_sample_tokens_by_p_one_minus_p_and_follows_its_mu_schedule():
    from trinity.runtime.trainer.algos import mix

    lp, old, adv = [[-1.0], [math.log(0.5)]], [[-1.0], [0.0]], [[0.0], [0.0]]
    td, output, leaf, info = mixed_batch(lp, old, adv, [False, True])
    args = FUNCTIONS["policy_loss_fn"]["mix_chord"](mu_warmup_steps=4, mu_peak=0.4, mu_valley=0.1).model_dump()
    loss, metrics = mix.chord_loss(actor_config(), output, td, args=args, step=2, info=info)
    assert metrics["actor/mu"] == pytest.approx(0.2)  # half way up the warm-up
    assert loss.item() == pytest.approx(0.2 * 0.25 * math.log(2))  # p(1 - p) = 0.25 on -log 0.5; no advantage
    plain = mix.chord_loss(actor_config(), output, td, args=args | {"enable_phi_function": False}, step=2, info=info)
    assert plain[0].item() == pytest.approx(0.2 * math.log(2))


@pytest.mark.parametrize(
    "step,mu",
    [(0, 0.0), (2, 0.5), (4, 1.0), (5, 0.5 * 0.8 * (1 + math.cos(math.pi / 4)) + 0.2), (8, 0.2), (100, 0.2)],
)
def test_chords_mu_rises_linearly_then_decays_on_a_cosine(step, mu):
    from trinity.runtime.trainer.algos.mix import mu_schedule

    assert mu_schedule(step, warmup=4, decay=4, peak=1.0, valley=0.2) == pytest.approx(mu)


def test_chords_mu_without_a_decay_drops_to_the_valley_at_the_end_of_the_warm_up():
    from trinity.runtime.trainer.algos.mix import mu_schedule

    assert [mu_schedule(s, warmup=2, decay=0, peak=1.0, valley=0.2) for s in (1, 2, 3)] == [0.5, 0.2, 0.2]


def test_weighted_sft_losses_weight_each_token_and_phi_clamps_at_its_cutoff():
    from trinity.runtime.trainer.algos.mix import token_weights

    lp = torch.tensor([math.log(0.5), math.log(0.9)])
    trained, weights = token_weights(lp, "is")
    assert weights.tolist() == pytest.approx([0.5, 0.9]) and torch.equal(trained, lp)
    trained, weights = token_weights(lp, "phi", cutoff_prob=0.8)
    assert weights.tolist() == pytest.approx([0.25, 0.09])  # from the unclamped probabilities
    assert trained.tolist() == pytest.approx([math.log(0.5), math.log(0.8)])


def test_sft_is_and_sft_phi_average_their_weighted_tokens_over_the_whole_batch():
    from trinity.runtime.trainer import batch as batches
    from trinity.runtime.trainer.algos import mix

    exps = [Experience([1], [2, 3]), Experience([1, 1], [4])]
    td = batches.sft_batch(exps)
    # position t holds the log-prob of token t + 1; the loss mask (shifted by verl's loss) picks the responses'
    probs = [[0.5, 0.9, 1.0], [1.0, 0.8, 1.0]]
    output = {"log_probs": torch.nested.as_nested_tensor([torch.tensor(r).log() for r in probs], layout=torch.jagged)}
    data = {**td, "dp_size": 1, "batch_num_tokens": 3}
    is_loss, _ = mix.sft_is_loss(None, output, data, args={}, step=1, info={})
    assert is_loss.item() == pytest.approx(-(0.5 * math.log(0.5) + 0.9 * math.log(0.9) + 0.8 * math.log(0.8)) / 3)
    phi, _ = mix.sft_phi_loss(None, output, data, args={"cutoff_prob": 1.0}, step=1, info={})
    assert phi.item() == pytest.approx(-(0.25 * math.log(0.5) + 0.09 * math.log(0.9) + 0.16 * math.log(0.8)) / 3)


def test_the_batchs_advantages_skip_mixed_in_samples_and_report_the_teachers_gap():
    rollouts = [exp(1.0, "a"), exp(0.0, "a")]
    sample = Experience([1], [2, 2], expert=True)
    algorithm = SimpleNamespace(advantage_fn="on_policy_distill", advantage_fn_args={"kl_coef": 1.0})
    columns = {"kl": None, "old_log_probs": [[-1.0], [-0.5], [0.0, 0.0]], "teacher_log_probs": [[-2.0], [-0.5], [9, 9]]}
    advantages, returns, metrics = functions.batch_advantages(
        [rollouts[0], sample, rollouts[1]],
        algorithm,
        {name: [rows[0], rows[2], rows[1]] if rows else rows for name, rows in columns.items()},
    )
    assert advantages == [pytest.approx([-1.0]), [0.0, 0.0], pytest.approx([0.0])]  # the sample: zeros, unread
    assert metrics == {"teacher_kl": pytest.approx((1.0 + 0.0) / 2)}  # over the rollouts' tokens only
