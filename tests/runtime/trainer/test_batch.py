"""Our side of the RL and SFT wiring, against hand-computed values."""

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.conftest import MINIMAL
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.runtime.experience import Experience
from trinity.runtime.trainer import batch, functions

pytest.importorskip("verl")


def advantage_rows(*args, **kwargs):
    """The advantages of functions.advantages_and_returns."""
    return functions.advantages_and_returns(*args, **kwargs)[0]


@pytest.fixture
def algorithm(write):
    def _algorithm(*overrides):
        return resolve(Request(write("run.yaml", MINIMAL), ("hardware=cpu", *overrides))).config.algorithm

    return _algorithm


def exp(prompt, response, reward=0.0, group="g", logprobs=None):
    return Experience(prompt, response, logprobs or [-1.0] * len(response), reward, group)


def test_padding_masks_and_positions():
    t = batch.padded([exp([5, 6], [8, 1]), exp([7], [9, 9, 1])], pad_id=0)
    assert t["prompts"].tolist() == [[5, 6], [0, 7]]  # prompts padded on the left
    assert t["responses"].tolist() == [[8, 1, 0], [9, 9, 1]]  # responses on the right
    assert t["attention_mask"].tolist() == [[1, 1, 1, 1, 0], [0, 1, 1, 1, 1]]
    assert t["position_ids"].tolist() == [[0, 1, 2, 3, 3], [0, 0, 1, 2, 3]]
    assert t["response_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert t["input_ids"].tolist() == [[5, 6, 8, 1, 0], [0, 7, 9, 9, 1]]


def test_reward_sits_on_the_last_response_token():
    exps = [exp([1], [2, 3], reward=1.0), exp([1], [4], reward=0.5)]
    rewards = batch.token_rewards(exps, batch.padded(exps, 0)["response_mask"])
    assert rewards.tolist() == [[0.0, 1.0], [0.5, 0.0]]


def multi_turn(prompt, response, mask, reward=0.0, group="g"):
    return Experience(prompt, response, [-1.0] * len(response), reward, group, action_mask=mask)


def test_the_environments_turns_are_attended_but_not_trained():
    t = batch.padded([multi_turn([5], [8, 1, 3, 9, 1], [1, 1, 0, 1, 1]), exp([7], [9])], pad_id=0)
    assert t["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]]  # the model saw every turn
    assert t["response_mask"].tolist() == [[1, 1, 0, 1, 1], [1, 0, 0, 0, 0]]  # and answers for its own only
    assert batch.counts([multi_turn([5], [8, 3, 9], [1, 0, 1])])["rollout_tokens"] == 2


def test_a_multi_turn_reward_sits_on_the_models_last_token():
    exps = [multi_turn([1], [2, 3, 4, 5], [1, 0, 1, 0], reward=1.0), multi_turn([1], [2, 3], [0, 1], reward=0.5)]
    rewards = batch.token_rewards(exps, batch.padded(exps, 0)["response_mask"])
    assert rewards.tolist() == [[0.0, 0.0, 1.0, 0.0], [0.0, 0.5, 0.0, 0.0]]


def test_each_turns_own_reward_sits_on_its_last_token():
    rewarded = Experience(
        [1], [2, 3, 4, 5, 6], [-1.0] * 5, 1.0, "g", action_mask=[1, 1, 0, 1, 0], turn_rewards=[-0.5, 1.5]
    )
    rewards = batch.token_rewards([rewarded], batch.padded([rewarded], 0)["response_mask"])
    assert rewards.tolist() == [[0.0, -0.5, 0.0, 1.5, 0.0]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1), max_size=12))
def test_an_experiences_turns_are_exactly_the_runs_of_the_models_tokens(mask):
    turns = multi_turn([1], [2] * len(mask), mask).turns()
    covered = [i for start, end in turns for i in range(start, end)]
    assert covered == [i for i, own in enumerate(mask) if own]
    assert all(end < next_start for (_, end), (next_start, _) in zip(turns, turns[1:]))  # apart: one run each


ROWS = st.lists(
    st.tuples(st.lists(st.integers(1, 50), min_size=1, max_size=5), st.lists(st.integers(0, 1), max_size=5)),
    min_size=1,
    max_size=5,
).filter(lambda rows: any(mask for _, mask in rows))


@settings(max_examples=80, deadline=None)
@given(ROWS)
@example([([1], []), ([1], [1, 0, 1, 0, 1])])  # turn rewards of 2/3, which float32 rounds
def test_every_row_is_padded_around_its_own_tokens_and_rewarded_at_its_turns_ends(rows):
    """Any prompts and responses (a response of none too; its mask saying which tokens are the model's): each row's
    tokens sit where its masks say, its positions count them, and its reward sits at its last turn's end."""
    exps = [multi_turn(prompt, [7 + i for i in range(len(mask))], mask) for prompt, mask in rows]
    for i, e in enumerate(exps):
        e.reward = float(i + 1)
        if i % 2 and len(e.turns()) > 1:  # each turn rewarded on its own
            e.turn_rewards = [float(i + 1) / len(e.turns())] * len(e.turns())
    t = batch.padded(exps, pad_id=0)
    width_p, rewards = t["prompts"].shape[1], batch.token_rewards(exps, t["response_mask"])
    assert {name: column.dtype for name, column in t.items()} == dict.fromkeys(t, torch.int64)
    assert all(column.is_contiguous() for column in t.values()) and rewards.dtype == torch.float32
    storages = [column.untyped_storage().data_ptr() for column in t.values()]
    assert len(set(storages)) == len(storages)  # no column writes into another
    assert torch.equal(t["input_ids"], torch.cat([t["prompts"], t["responses"]], dim=1))
    for row, (e, (prompt, mask)) in enumerate(zip(exps, rows)):
        before, n = width_p - len(prompt), len(mask)
        assert t["input_ids"][row, before : width_p + n].tolist() == prompt + e.response_ids
        attended = t["attention_mask"][row].tolist()
        assert attended == [0] * before + [1] * (len(prompt) + n) + [0] * (len(attended) - before - len(prompt) - n)
        assert t["position_ids"][row, before : width_p + n].tolist() == list(range(len(prompt) + n))
        assert t["response_mask"][row, :n].tolist() == mask and not t["response_mask"][row, n:].any()
        ends = [end - 1 for _, end in e.turns()]
        placed = dict(zip(ends, e.rewards_by_turn())) if ends else {0: e.reward}
        assert {int(c): float(rewards[row, c]) for c in rewards[row].nonzero().flatten()} == {
            c: float(torch.tensor(r, dtype=torch.float32)) for c, r in placed.items() if r
        }  # a reward of 0 (a turn before the last, without turn_rewards) is no write to see; each as float32 holds it


def test_an_empty_response_keeps_its_reward_in_its_group():
    exps = [exp([1], [], reward=1.0), exp([1], [2], reward=0.0)]
    rewards = batch.token_rewards(exps, batch.padded(exps, 0)["response_mask"])
    assert rewards.tolist() == [[1.0], [0.0]]  # GRPO sums the row: the group's rewards are [1, 0]


def test_turn_rewards_must_match_the_turns_and_add_up_to_the_reward():
    with pytest.raises(ValueError, match="has 1 turn_rewards for its 2 turns"):
        Experience([1], [2, 3, 4], [-1.0] * 3, 1.0, action_mask=[1, 0, 1], turn_rewards=[1.0])
    with pytest.raises(ValueError, match=r"turn_rewards add up to 0.5, not its reward 1.0"):
        Experience([1], [2, 3, 4], [-1.0] * 3, 1.0, action_mask=[1, 0, 1], turn_rewards=[0.25, 0.25])
    # large terms: their sum's rounding is within the tolerance, which grows with them
    Experience([1], [2, 3, 4], [-1.0] * 3, 0.1, action_mask=[1, 0, 1], turn_rewards=[3e7, 0.1 - 3e7])


def test_an_sft_conversation_trains_the_models_turns_only():
    t = batch.sft_batch([multi_turn([5], [8, 1, 3, 9, 1], [1, 1, 0, 1, 1])], [[1, 1, 1, 1, 0]])
    assert t["loss_mask"].values().tolist() == [0, 1, 1, 0, 1, 0]  # the mask times RAFT's weights


def test_an_action_mask_must_cover_the_response():
    with pytest.raises(ValueError, match="action_mask has 2 entries for 3 response tokens"):
        multi_turn([1], [2, 3, 4], [1, 0])


def test_grpo_advantages_normalise_within_each_task(algorithm):
    rewards = {"a": [1, 0, 0, 1], "b": [1, 1]}
    exps = [exp([1], [2], r, g) for g, rs in rewards.items() for r in rs] + [exp([1], [2], 1.0, "alone")]
    advantages = [a[0] for a in advantage_rows(exps, algorithm("algorithm.repeat_times=4"))]
    spread = 0.5 / math.sqrt(1 / 3)  # (r - mean) / std with the unbiased std of [1, 0, 0, 1]
    assert advantages[:4] == pytest.approx([spread, -spread, -spread, spread], rel=1e-5)
    assert advantages[4:6] == pytest.approx([0.0, 0.0])  # all equal: nothing to learn from this task
    assert advantages[6] == pytest.approx(1.0, rel=1e-5)  # verl: a lone rollout keeps its reward


def test_without_std_normalisation_it_is_the_centred_reward(algorithm):
    exps = [exp([1], [2], r, "a") for r in (1, 0, 0, 0)]
    advantages = advantage_rows(
        exps, algorithm("algorithm.repeat_times=4", "+algorithm.advantage_fn_args.norm_adv_by_std=false")
    )
    advantages = [a[0] for a in advantages]
    assert advantages == pytest.approx([0.75, -0.25, -0.25, -0.25])


def test_advantage_covers_every_response_token_and_no_padding():
    exps = [exp([1], [2, 3, 4], 1.0, "a", [-0.5, -0.25, -0.125]), exp([1], [5], 0.0, "a", [-2.0])]
    width = batch.padded(exps, 0)["responses"].shape[1]
    advantages = batch.per_token([[0.7] * 3, [-0.7]], width)
    assert torch.allclose(advantages, torch.tensor([[0.7, 0.7, 0.7], [-0.7, 0.0, 0.0]]))
    assert batch.old_logprobs(exps, width).tolist() == [[-0.5, -0.25, -0.125], [-2.0, 0.0, 0.0]]


def test_a_kl_penalty_comes_off_every_response_token_reward():
    exps = [exp([1], [2, 3], reward=1.0), exp([1], [4], reward=0.5)]
    mask = batch.padded(exps, 0)["response_mask"]
    rewards = batch.token_rewards(exps, mask, [[0.25, 0.125], [0.5]])
    assert rewards.tolist() == [[-0.25, 0.875], [0.0, 0.0]]


def test_k3_is_unclamped_as_upstreams_and_low_var_kl_clamped():
    log_prob, ref = torch.tensor([[-20.0]]), torch.tensor([[0.0]])
    assert batch.kl(log_prob, ref, "k3").item() == pytest.approx(math.exp(20) - 21, rel=1e-5)
    assert batch.kl(log_prob, ref, "low_var_kl").item() == 10.0


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("k1", [-0.5, 0.25]),
        ("abs", [0.5, 0.25]),
        ("k2", [0.125, 0.03125]),
        # exp(ref - logp) - (ref - logp) - 1
        ("k3", [math.exp(0.5) - 1.5, math.exp(-0.25) - 0.75]),
        ("low_var_kl", [math.exp(0.5) - 1.5, math.exp(-0.25) - 0.75]),
        ("corrected_k3", [math.exp(0.5) - 1.5, math.exp(-0.25) - 0.75]),  # no old policy in a penalty: k3
    ],
)
def test_each_kl_penalty_kind_estimates_as_trinity_rft_defines_it(kind, expected):
    log_prob, ref = torch.tensor([[-1.0, -0.5]]), torch.tensor([[-0.5, -0.75]])
    assert batch.kl(log_prob, ref, kind)[0].tolist() == pytest.approx(expected, rel=1e-5)


def test_token_mean_aggregation_counts_response_tokens_only():
    from verl.trainer.ppo.core_algos import agg_loss

    exps = [exp([1], [2, 3, 4]), exp([1], [5])]
    mask = batch.padded(exps, 0)["response_mask"]
    losses = torch.tensor([[1.0, 2.0, 3.0], [10.0, 99.0, 99.0]])
    assert agg_loss(losses, mask, "token-mean").item() == pytest.approx((1 + 2 + 3 + 10) / 4)
    assert agg_loss(losses, mask, "seq-mean-token-mean").item() == pytest.approx((2.0 + 10.0) / 2)


def test_sft_loss_mask_marks_the_response():
    t = batch.sft_batch([exp([5, 6], [8, 1]), exp([7], [9, 1])])
    assert t["loss_mask"].values().tolist() == [0, 0, 1, 1, 0, 1, 1]
    assert t["input_ids"].values().tolist() == [5, 6, 8, 1, 7, 9, 1]
    assert t["position_ids"].values().tolist() == [0, 1, 2, 3, 0, 1, 2]


def test_shards_are_equal_and_contiguous():
    assert batch.shards(list(range(8)), 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert batch.shards(list(range(6)), 1) == [list(range(6))]


def test_a_masked_mean_counts_only_the_masked_positions():
    # padding may hold anything
    values, mask = (
        torch.tensor([[1.0, 3.0, float("inf")], [5.0, float("nan"), 0.0]]),
        torch.tensor([[1, 1, 0], [1, 0, 0]]),
    )
    assert batch.masked_mean(values, mask) == 3.0 and batch.masked_mean(values, torch.zeros_like(mask)) == 0.0


def test_a_kl_penalty_and_the_teachers_gap_skip_an_episodes_environment_turns(algorithm):
    episode = Experience([1], [2, 3, 4], [-1.0] * 3, 1.0, "a", action_mask=[1, 0, 1])
    plain = Experience([1], [5], [-1.0], 0.0, "a")
    columns = {"kl": [[0.5, 9.0, 0.25], [1.0]], "old_log_probs": None, "teacher_log_probs": None}
    settings = algorithm(
        "algorithm.repeat_times=2", "algorithm.kl_penalty_fn=k3", "+algorithm.kl_penalty_fn_args.kl_coef=1.0"
    )
    advantages, _, metrics = functions.batch_advantages([episode, plain], settings, columns)
    assert metrics["kl_penalty"] == pytest.approx((0.5 + 0.25 + 1.0) / 3)  # the environment's 9.0 is not the policy's
    # GRPO's score is the reward less the penalties on the model's tokens: 1 - 0.75 against 0 - 1.0
    assert advantages[0][0] > 0 > advantages[1][0] and advantages[0][1] == 0.0


def rows(lengths: list[tuple[int, int]]) -> list[Experience]:
    return [exp([3] * p, [4] * r) for p, r in lengths]


def per_rank(items: list[Experience], world_size: int) -> list[int]:
    return [sum(batch.tokens(e) for e in part) for part in batch.shards(items, world_size)]


@settings(max_examples=300, deadline=None)
@given(
    world_size=st.sampled_from([1, 2, 3, 4, 8]),
    lengths=st.lists(st.tuples(st.integers(1, 64), st.integers(0, 256)), min_size=1, max_size=40),
)
def test_balancing_deals_every_row_once_and_each_rank_within_one_row_of_the_others(world_size, lengths):
    """trainer.balance_batch: the rows the ranks get are the batch's, each once, as many per rank; the ranks' token
    counts differ by at most the longest row's (a contiguous deal of sorted lengths differs by far more); the rows
    no rank gets (the last len % world_size) are the same as without balancing."""
    items = rows(lengths)
    out, metrics = batch.balanced(items, world_size)
    size = len(items) // world_size
    assert sorted(map(id, out)) == sorted(map(id, items))  # a permutation: every row exactly once
    assert out[size * world_size :] == items[size * world_size :]  # the undealt rows stay last
    if size == 0:
        assert metrics == {} and out == items
        return
    dealt = per_rank(out, world_size)
    assert all(len(part) == size for part in batch.shards(out, world_size))
    assert max(dealt) - min(dealt) <= max(batch.tokens(e) for e in items[: size * world_size])
    contiguous = per_rank(items, world_size)
    assert metrics == {
        "global_seqlen/min": min(contiguous),
        "global_seqlen/max": max(contiguous),
        "global_seqlen/minmax_diff": max(contiguous) - min(contiguous),
        "global_seqlen/balanced_min": min(dealt),
        "global_seqlen/balanced_max": max(dealt),
        "global_seqlen/mean": pytest.approx(sum(contiguous) / world_size),
    }


def test_a_batch_sorted_by_length_is_dealt_evenly():
    """Rollouts that come back shortest first: in order, rank 0 gets 4 short rows and rank 1 4 long ones; balanced,
    each gets two of each kind, lightest first then the heavier alternately from the top (micro-batches of alike
    work)."""
    items = rows([(2, 2)] * 4 + [(2, 98)] * 4)
    assert per_rank(items, 2) == [16, 400]
    out, metrics = batch.balanced(items, 2)
    assert per_rank(out, 2) == [208, 208]
    assert [batch.tokens(e) for e in out] == [4, 100, 100, 4] * 2
    assert metrics["global_seqlen/minmax_diff"] == 384 and metrics["global_seqlen/balanced_max"] == 208


def test_one_rank_takes_every_row_without_the_partitioner(monkeypatch):
    """One rank's part is every row: verl's Karmarkar-Karp is not asked (it costs a train step of the demo 3 %)."""
    import verl.utils.seqlen_balancing as balancing

    monkeypatch.setattr(balancing, "get_seqlen_balanced_partitions", lambda *a, **k: pytest.fail("partitioned"))
    items = rows([(2, 2)] * 4 + [(2, 98)] * 4)
    alone, metrics = batch.balanced(items, 1)  # every row, lightest first, then heavier alternately
    assert [batch.tokens(e) for e in alone] == [4, 4, 100, 100, 100, 100, 4, 4] and alone[0] is items[0]
    assert metrics["global_seqlen/balanced_max"] == metrics["global_seqlen/max"] == 416
