"""The algorithm entries' functions come from verl's registries by the names the entries carry; trinity's own are
registered there beside verl's. GRPO's advantages through that path, against hand-computed values."""

import importlib
import inspect
import math
from dataclasses import replace
from types import SimpleNamespace

import pytest

from trinity.config.algorithms.advantages import ADVANTAGES, CONFIG, Advantage
from trinity.config.algorithms.args import NoArgs
from trinity.config.algorithms.losses import POLICY_LOSSES, PolicyLoss
from trinity.config.algorithms.presets import ALGORITHMS
from trinity.runtime.experience import Experience
from trinity.runtime.trainer import functions

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")

RUNNABLE = sorted(ALGORITHMS)
# algorithm_type -> (verl's advantage estimator, verl's policy loss) it trains with, written out by hand: a change of
# an entry's verl name fails here. None: no advantages (SFT), or verl's sft_loss instead of a registered policy loss.
VERL_FUNCTIONS = {
    "grpo": ("grpo_advantage", "compute_policy_loss_vanilla"),
    "grpo_verl": ("grpo_advantage", "compute_policy_loss_vanilla"),
    "dapo": ("grpo_advantage", "compute_policy_loss_vanilla"),
    "gspo": ("grpo_advantage", "compute_policy_loss_gspo"),
    "cispo": ("grpo_advantage", "compute_policy_loss_cispo"),
    "sft": (None, None),
    "reinforceplusplus": ("compute_reinforce_plus_plus_outcome_advantage", "compute_policy_loss_vanilla"),
    "rloo": ("compute_rloo_outcome_advantage", "compute_policy_loss_vanilla"),
    "opmd": ("opmd_advantage", "opmd_loss"),
    "asymre": ("asymre_advantage", "opmd_loss"),
    "topr": ("reinforce_advantage", "topr_loss"),
    "sapo": ("grpo_advantage", "sapo_loss"),
    "m2po": ("grpo_advantage", "m2po_loss"),
    "rec": ("rec_advantage", "rec_loss"),
    "sppo": ("opmd_advantage", "sppo_loss"),
    "ppo": ("compute_gae_advantage_return", "compute_policy_loss_vanilla"),
    "dpo": (None, "dpo_loss"),
    "cpt": (None, None),
    "raft": ("raft_selection", None),
    "on_policy_distill": ("on_policy_distill_advantage", "compute_policy_loss_vanilla"),
    "jsd": ("jsd_advantage", "compute_policy_loss_vanilla"),
    # verl's PPO loss is the rollouts' part of trinity's mixing loss (algos/mix.py), which replaces verl's actor loss
    "mix": ("grpo_advantage", "compute_policy_loss_vanilla"),
    "mix_chord": ("grpo_advantage", "compute_policy_loss_vanilla"),
    "multi_step_grpo": ("step_wise_grpo_advantage", "compute_policy_loss_vanilla"),
    "gigpo": ("gigpo_advantage", "compute_policy_loss_vanilla"),
}


def advantage_rows(*args, **kwargs):
    """The advantages of functions.advantages_and_returns."""
    return functions.advantages_and_returns(*args, **kwargs)[0]


def exp(response, reward, group="a"):
    return Experience([1], response, [-1.0] * len(response), reward, group)


def algo(**fields):
    return SimpleNamespace(policy_loss_fn_args={}, advantage_fn_args={}, **fields)


def grpo(epsilon=1e-6, norm=True):
    return SimpleNamespace(advantage_fn="grpo", advantage_fn_args={"epsilon": epsilon, "norm_adv_by_std": norm})


def test_every_runnable_algorithm_is_held_to_the_verl_functions_it_trains_with():
    assert sorted(VERL_FUNCTIONS) == RUNNABLE


@pytest.mark.parametrize("name", RUNNABLE)
def test_each_runnable_algorithm_finds_verls_own_function_in_verls_registry(name):
    fns = ALGORITHMS[name].functions
    estimator, loss = functions.estimator(fns["advantage_fn"]), functions.loss_mode(fns["policy_loss_fn"])
    assert (
        estimator.__name__ if estimator else None,
        core_algos.get_policy_loss_fn(loss).__name__ if loss else None,
    ) == (VERL_FUNCTIONS[name])
    if estimator:  # verl's, found by its registry name
        assert estimator is core_algos.get_adv_estimator_fn(ADVANTAGES[fns["advantage_fn"]].estimator)


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_every_policy_loss_trinity_accepts_is_a_loss_verls_actor_can_call(name):
    entry = POLICY_LOSSES[name]
    if entry.batch == "sft":  # verl's sft_loss replaces ppo_loss; it reads no loss mode
        assert entry.loss_mode is None and functions.loss_mode(name) is None
        return
    assert callable(core_algos.get_policy_loss_fn(functions.loss_mode(name)))


@pytest.mark.parametrize("name", sorted(n for n, e in ADVANTAGES.items() if e.estimator))
def test_each_advantage_entry_names_keywords_its_estimator_takes(name):
    from verl.trainer.config import AlgoConfig

    entry = ADVANTAGES[name]
    params = inspect.signature(functions.estimator(name)).parameters
    for ours, theirs in entry.kwargs.items():
        assert ours in entry.args.model_fields
        if theirs.startswith(CONFIG):
            assert theirs.removeprefix(CONFIG) in AlgoConfig.__dataclass_fields__ and "config" in params
        else:
            assert theirs in params
    # what the config layer says matches what the estimator reads: the task of each rollout, or of each episode
    assert entry.grouped == ("index" in params or "episodes" in params)


def test_grpo_through_the_registry_normalises_within_each_task():
    rewards = {"a": [1, 0, 0, 1], "b": [1, 1]}
    exps = [exp([2, 3, 4], r, g) for g, rs in rewards.items() for r in rs] + [exp([2], 1.0, "alone")]
    got = advantage_rows(exps, grpo())
    spread = 0.5 / (math.sqrt(1 / 3) + 1e-6)  # (r - mean) / (unbiased std + epsilon) of [1, 0, 0, 1]
    assert [a[0] for a in got[:4]] == pytest.approx([spread, -spread, -spread, spread], rel=1e-6)
    assert [a[0] for a in got[4:6]] == [0.0, 0.0]  # all equal: nothing to learn from this task
    assert got[6] == pytest.approx([1.0])  # verl: a lone rollout keeps its reward
    assert [len(a) for a in got] == [3] * 6 + [1] and all(len(set(a)) == 1 for a in got)  # every response token


def test_grpo_without_std_normalisation_through_the_registry_is_the_centred_reward():
    exps = [exp([2], r) for r in (1, 0, 0, 1)]
    assert [a[0] for a in advantage_rows(exps, grpo(norm=False))] == pytest.approx([0.5, -0.5, -0.5, 0.5])


def test_grpos_epsilon_reaches_its_estimator():
    exps = [exp([2], r) for r in (1, 0, 0, 1)]
    assert advantage_rows(exps, grpo(epsilon=1.0))[0][0] == pytest.approx(0.5 / (math.sqrt(1 / 3) + 1))


def test_a_keyword_the_estimator_does_not_take_is_an_error_not_dropped(monkeypatch):
    # an entry naming verl's own grpo estimator, whose keyword is norm_adv_by_std_in_grpo
    wrong = Advantage(ADVANTAGES["grpo"].args, "grpo", kwargs={"norm_adv_by_std": "norm_adv_by_std"}, grouped=True)
    monkeypatch.setitem(ADVANTAGES, "grpo", wrong)
    with pytest.raises(TypeError, match="takes no argument 'norm_adv_by_std'"):
        advantage_rows([exp([2], 1.0), exp([2], 0.0)], grpo(norm=False))


def test_an_input_trinitys_batch_lacks_is_named(monkeypatch):
    monkeypatch.setitem(ADVANTAGES, "gae", Advantage(NoArgs, "gae"))  # verl's GAE reads a critic's values
    with pytest.raises(TypeError, match=r"needs \['values', 'gamma', 'lam'\]"):
        advantage_rows([exp([2], 1.0)], SimpleNamespace(advantage_fn="gae", advantage_fn_args={}))


def test_no_advantages_for_an_advantage_function_that_computes_none():
    assert advantage_rows([exp([2], 1.0)], SimpleNamespace(advantage_fn="none", advantage_fn_args={})) is None


def test_a_loss_mode_verl_lacks_fails_before_training(monkeypatch):
    functions.prepare(algo(policy_loss_fn="ppo", advantage_fn="grpo"))
    functions.prepare(algo(policy_loss_fn="sft", advantage_fn="none"))
    monkeypatch.setitem(POLICY_LOSSES, "ppo", replace(POLICY_LOSSES["ppo"], loss_mode="no_such_mode"))
    with pytest.raises(ValueError, match="no_such_mode"):
        functions.prepare(algo(policy_loss_fn="ppo", advantage_fn="grpo"))


# --- trinity's own functions, registered beside verl's ---------------------------------------------------------

OWN = "tests.runtime.trainer.own_functions"


@pytest.fixture
def own(monkeypatch):
    """Entries naming trinity functions of a module not yet imported: the trainer's lookup imports it."""
    import sys

    monkeypatch.delitem(sys.modules, OWN, raising=False)
    monkeypatch.setitem(ADVANTAGES, "own", Advantage(NoArgs, "trinity_test_centred_reward", module=OWN))
    monkeypatch.setitem(POLICY_LOSSES, "own", PolicyLoss(NoArgs, "trinity_test_mean_ratio", module=OWN))
    yield
    for registry, name in (
        (core_algos.ADV_ESTIMATOR_REGISTRY, "trinity_test_centred_reward"),
        (core_algos.POLICY_LOSS_REGISTRY, "trinity_test_mean_ratio"),
    ):
        registry.pop(name, None)


def test_trinitys_own_estimator_and_loss_are_found_through_verls_registries(own):
    import sys

    functions.prepare(algo(policy_loss_fn="own", advantage_fn="own"))  # imports the module: registers
    module = sys.modules[OWN]
    assert core_algos.get_adv_estimator_fn("trinity_test_centred_reward") is module.centred_reward
    assert core_algos.get_policy_loss_fn("trinity_test_mean_ratio") is module.mean_ratio
    assert (
        functions.estimator("own") is module.centred_reward and functions.loss_mode("own") == "trinity_test_mean_ratio"
    )
    got = advantage_rows([exp([2, 3], 1.0), exp([2], 0.0)], SimpleNamespace(advantage_fn="own", advantage_fn_args={}))
    assert got == [[0.5, 0.5], [-0.5]]  # our estimator, called with the inputs its signature names


def test_registering_trinitys_functions_again_is_harmless(own):
    module = importlib.import_module(OWN)
    module = importlib.reload(module)  # a second import defines new function objects under the same names
    assert core_algos.get_adv_estimator_fn("trinity_test_centred_reward") is module.centred_reward
    assert core_algos.get_policy_loss_fn("trinity_test_mean_ratio") is module.mean_ratio


def test_a_name_verl_already_has_is_never_replaced():
    def rloo_estimator(token_level_rewards, response_mask, index, config=None):
        raise AssertionError("never registered")

    def vanilla(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None, **_):
        raise AssertionError("never registered")

    with pytest.raises(ValueError, match="'rloo' is already registered with verl by verl.trainer.ppo.core_algos"):
        functions.register_advantage("rloo")(rloo_estimator)
    with pytest.raises(ValueError, match="'vanilla' is already registered with verl by verl.trainer.ppo.core_algos"):
        functions.register_loss("ppo")(vanilla)  # ppo's loss_mode
    assert core_algos.get_adv_estimator_fn("rloo") is core_algos.compute_rloo_outcome_advantage
    assert core_algos.get_policy_loss_fn("vanilla") is core_algos.compute_policy_loss_vanilla
