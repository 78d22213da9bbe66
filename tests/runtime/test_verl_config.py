"""verl's trainer config built from ours: every knob from the resolved config, validated by verl's dataclasses."""

import pytest

from trinity.config.compose import Request
from trinity.config.errors import ConfigError
from trinity.config.resolve import resolve
from trinity.runtime.factory import role_factory
from trinity.runtime.trainer.rank import TrainerRank

from tests.conftest import PROFILES, REFERENCE

pytest.importorskip("verl")


def overrides_of(config):
    from trinity.runtime.verl.config import overrides

    return dict(o.split("=", 1) for o in overrides(config, "/models/m", 100))


def reference(profile, *extra):
    return resolve(Request(REFERENCE, (f"hardware={profile}", *extra))).config


def test_trainer_knobs_reach_verl():
    config = reference("a100", "+algorithm.policy_loss_fn_args.clip_range_high=0.28", "algorithm.kl_loss_fn=low_var_kl", "+algorithm.entropy_loss_fn_args.entropy_coef=0.01", "trainer.param_offload=true")
    got = overrides_of(config)
    actor = "actor_rollout_ref.actor"
    assert (got[f"{actor}.clip_ratio_low"], got[f"{actor}.clip_ratio_high"]) == ("0.2", "0.28")
    assert (got[f"{actor}.use_kl_loss"], got[f"{actor}.kl_loss_type"], got[f"{actor}.kl_loss_coef"]) == ("true", "low_var_kl", "0.001")
    assert got[f"{actor}.entropy_coeff"] == "0.01" and got[f"{actor}.fsdp_config.param_offload"] == "true"
    assert got[f"{actor}.optim.lr"] == "1e-05" and got[f"{actor}.ppo_max_token_len_per_gpu"] == "8192"
    assert got[f"{actor}.ppo_mini_batch_size"] == "768"  # buffer.train_batch_size = 96 tasks x 8 rollouts


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_gets_its_device_compile_flag_and_attention(profile):
    config = reference(profile, "trainer.use_torch_compile=null") if profile != "cpu" else reference(profile)
    got = overrides_of(config)
    facts = config.hardware
    assert got["trainer.device"] == facts.device_type
    assert got["actor_rollout_ref.actor.use_torch_compile"] == str(config.trainer.use_torch_compile).lower()
    assert got["+actor_rollout_ref.model.override_config.attn_implementation"] == facts.attn_implementation
    assert got["actor_rollout_ref.actor.strategy"] == "fsdp2"


@pytest.mark.parametrize("profile", PROFILES)
def test_verl_accepts_the_trainer_config_of_every_profile(profile):
    from trinity.runtime.verl.config import build

    section = build(reference(profile), "/models/m", 100)
    assert section.actor.strategy == "fsdp2" and section.model.path == "/models/m"


@pytest.mark.parametrize("profile", PROFILES)
def test_the_same_trainer_class_on_every_profile(profile, tmp_path):
    from trinity.launch.plan import build_plan

    config = reference(profile)
    make = role_factory(config, tmp_path)
    trainers = [make(spec)[0] for spec in build_plan(config).actors if spec.role == "trainer"]
    assert trainers and set(trainers) == {TrainerRank}


def test_a_value_verl_refuses_is_a_config_error_in_our_format():
    from omegaconf import OmegaConf

    from trinity.runtime.verl.config import _validate

    section = OmegaConf.create({"actor": {"_target_": "verl.workers.config.FSDPActorConfig", "strategy": "fsdp2", "loss_agg_mode": "token-sum-ish", "ppo_mini_batch_size": 4, "ppo_micro_batch_size_per_gpu": 4}})
    with pytest.raises(ConfigError) as err:
        _validate(section)
    assert err.value.issues[0].key == "trainer" and "verl rejected the trainer configuration" in err.value.issues[0].message
