"""Rank 0's batches: GRPO's dynamic sampling (groups whose rewards all agree are dropped, optionally refilled),
staleness limits, and the SFT samples mix puts in each batch; driven through a real buffer actor in Ray."""

import random
import statistics
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trinity.runtime.experience import Experience
from trinity.runtime.trainer.sampling import informative


def group(name, rewards):
    return [Experience([1], [2], reward=r, group=name) for r in rewards]


def test_groups_whose_rewards_agree_are_dropped():
    exps = group("a", [1, 1, 1]) + group("b", [0, 1, 1]) + group("c", [0.5]) + group("d", [0, 0])
    kept, dropped = informative(exps, 0.0, False, random.Random(0))
    assert [e.group for e in kept] == ["b", "b", "b"] and dropped == 3  # a group of one has no spread either


def test_a_threshold_drops_groups_at_or_below_it():
    exps = group("a", [0, 1]) + group("b", [0, 0.5])  # std 0.707 and 0.354
    assert informative(exps, 0.354, False, random.Random(0))[1] == 1
    assert informative(exps, statistics.stdev([0, 0.5]), False, random.Random(0))[1] == 1  # at it: dropped
    assert informative(exps, 0.3, False, random.Random(0))[1] == 0


def test_an_episode_of_several_experiences_counts_once():
    # "a": episode x (two experiences, both reward 1) and y (reward 0): std over [1, 0], not [1, 1, 0]
    exps = [Experience([1], [2], reward=r, group="a", episode=e) for r, e in ((1, "x"), (1, "x"), (0, "y"))]
    assert informative(exps, 0.6, False, random.Random(0))[1] == 0  # 0.707 > 0.6 (three would give 0.577)
    one = [Experience([1], [2], reward=r, group="b", episode="x") for r in (0, 1)]  # one episode: no spread
    assert informative(one, 0.0, False, random.Random(0)) == ([], 1)
    # x repeats its reward in each experience: its last one's stands (1, as y's), so the rewards agree
    agree = [Experience([1], [2], reward=r, group="c", episode=e) for r, e in ((0, "x"), (1, "x"), (1, "y"))]
    assert informative(agree, 0.0, False, random.Random(0))[1] == 1


def test_refill_copies_kept_groups_as_groups_of_their_own():
    exps = group("a", [1, 1]) + group("b", [0, 1]) + group("c", [0, 0])
    kept, dropped = informative(exps, 0.0, True, random.Random(0))
    assert dropped == 2 and len(kept) == len(exps)
    assert [e.group for e in kept] == ["b", "b", "b#copy0", "b#copy0", "b#copy1", "b#copy1"]
    assert informative(group("a", [1, 1]), 0.0, True, random.Random(0)) == ([], 1)  # nothing left to copy


@settings(max_examples=60, deadline=None)
@given(
    rewards=st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=5), min_size=1, max_size=8),
    refill=st.booleans(),
)
def test_sampling_keeps_whole_informative_groups_and_a_refill_restores_the_size(rewards, refill):
    exps = [e for i, rs in enumerate(rewards) for e in group(f"g{i}", rs)]
    kept, dropped = informative(exps, 0.0, refill, random.Random(1))
    spread = [rs for rs in rewards if len(rs) > 1 and len(set(rs)) > 1]
    assert dropped == len(rewards) - len(spread)
    originals = [e for e in kept if "#copy" not in e.group]
    assert [e.reward for e in originals] == [r for rs in spread for r in rs]  # whole groups, in order
    copies = {e.group for e in kept} - {e.group for e in originals}
    assert len(copies) == (dropped if refill and spread else 0)  # one copy per dropped group
    for name in copies:  # a copy is a whole kept group
        assert [e.reward for e in kept if e.group == name] in spread


@pytest.mark.ray
def test_the_sampler_drops_stale_rollouts_and_mixes_in_the_data_sets_samples(demo_assets, tmp_path):
    """Through a queue buffer actor in a real Ray: step 3 with max_staleness 0 takes only rollouts of weights 2; mix
    adds the SFT data set's samples (tokenised by the model's tokenizer), marked as such; a batch that does not come
    within the experience buffer's max_read_timeout ends with an error naming it, or, in a train run with no step
    count, is its end."""
    import ray

    from tests.conftest import ray_cluster

    with ray_cluster({"num_cpus": 2}) as cluster:
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            sample_through_a_buffer(demo_assets, tmp_path)
        finally:
            ray.shutdown()


def sample_through_a_buffer(demo_assets, tmp_path):
    import json

    import ray

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.config.schema.buffer import ExperienceBufferConfig
    from trinity.runtime.buffer.actor import ExperienceBuffer, data_set
    from trinity.runtime.trainer.sampling import Drained, Sampler

    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "response": str(i + 1)}) + "\n" for i in range(4)))
    base = ["hardware=cpu", "~stages", "buffer.batch_size=1", "algorithm.repeat_times=2"]
    stale = [*base, "algorithm.sample_strategy=staleness_control", "+algorithm.sample_strategy_args.max_staleness=0"]
    mix = [
        *base,
        "algorithm.algorithm_type=mix",
        f"+buffer.trainer_input.auxiliary_buffers.sft_dataset={{path: {data}}}",
    ]
    storage = ExperienceBufferConfig(name="exp", storage_type="queue")
    buffer = ray.remote(ExperienceBuffer).remote(storage=storage, run_dir=str(tmp_path), name="buffer", role="buffer")
    ray.get(buffer.setup.remote())
    rollouts = [Experience([1], [2], reward=r, group="a", weight_version=v) for r, v in ((0, 1), (1, 2), (0, 2))]
    ray.get(buffer.put.remote(rollouts))
    fresh, metrics = Sampler(resolve(Request(None, tuple(stale))).config, buffer).batch(step=3)
    assert [e.weight_version for e in fresh] == [2, 2] and metrics == {"stale_dropped": 1}
    ray.get(buffer.put.remote(rollouts[1:]))
    config = resolve(Request(None, tuple(mix))).config
    model = {"tokenizer": str(demo_assets / "model"), "seed": 0, "model": config.model, "data": "sft"}
    samples = data_set(config.buffer.trainer_input.auxiliary_buffers["sft_dataset"], model)
    exps, metrics = Sampler(config, buffer, samples).batch(step=1)
    assert [e.expert for e in exps] == [False, False, True, True] and metrics == {"mixed_samples": 2}
    assert [e.response_ids for e in exps[2:]] == [s.response_ids for s in samples.take(2, step=1)]
    # the wait for a batch is the experience buffer's max_read_timeout (Trinity-RFT's QueueReader), named when it ends
    waits = (*base, "+buffer.trainer_input.experience_buffer={name: e, max_read_timeout: 0.5}")
    started = time.monotonic()
    with pytest.raises(Exception, match=r"after 0.5 s \(buffer.trainer_input.experience_buffer.max_read_timeout\)"):
        Sampler(resolve(Request(None, waits)).config, buffer).batch(step=2)
    assert time.monotonic() - started < 30  # not synchronizer.sync_timeout's hour
    # a train run of another run's experiences with no step count: the wait running out is its end, not an error
    drains = (*waits, "mode=train", "~trainer.total_steps", "buffer.total_steps=null")
    with pytest.raises(Drained, match=r"^no experiences for 0.5 s \(max_read_timeout\) before train step 2$"):
        Sampler(resolve(Request(None, drains)).config, buffer).batch(step=2)


def test_a_mixed_batch_is_an_explore_steps_rollouts_and_the_rounded_up_rest_samples():
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.trainer.sampling import Sampler

    overrides = (
        "hardware=cpu",
        "~stages",
        "algorithm.algorithm_type=mix",
        "buffer.batch_size=3",
        "algorithm.repeat_times=4",
        "+algorithm.sample_strategy_args.expert_data_ratio=0.3",
        "+buffer.trainer_input.auxiliary_buffers.sft_dataset={path: /d.jsonl}",
    )
    config = resolve(Request(None, overrides)).config
    assert config.buffer.train_batch_size == 18  # the smallest with 12 rollouts: 18 - ceil(5.4)
    assert Sampler(config, buffer=None).sizes() == (12, 6)


def test_staleness_keeps_weights_at_most_max_staleness_steps_behind_the_trainers():
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.trainer.sampling import Sampler

    def oldest(limit, step):
        strategy = (
            "algorithm.sample_strategy=staleness_control",
            f"+algorithm.sample_strategy_args.max_staleness={limit}",
        )
        return Sampler(resolve(Request(None, ("hardware=cpu", "~stages", *strategy))).config, None).min_version(step)

    # train step 5 updates weights 4: on-policy experiences are of version 4
    assert [oldest(0, 5), oldest(1, 5), oldest(1.5, 5), oldest(10, 5)] == [4, 3, 3, 0]


@pytest.mark.parametrize("threshold", [0.0, 0.5])
def test_multi_step_grpos_std_threshold_reaches_the_sampler(threshold):
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.trainer.sampling import Sampler

    overrides = (
        "hardware=cpu",
        "~stages",
        "algorithm.algorithm_type=multi_step_grpo",
        f"+algorithm.advantage_fn_args.std_threshold={threshold}",
    )
    sampler = Sampler(resolve(Request(None, overrides)).config, buffer=None)
    assert (sampler.threshold, sampler.refill) == (threshold, False)
