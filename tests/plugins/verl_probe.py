"""Run by test_hydra_profiles.py in a process of its own, since verl imports torch: compose verl's `ppo_trainer`
with `+hardware=<profile>` per profile, run verl's own validation on it, and print what the test compares as JSON.

stdin: {"profiles": [...], "keys": [verl keys], "env_key": "...", "overrides": [what validation needs]}
"""

import contextlib
import io
import json
import sys

from hydra import compose, initialize_config_module
from omegaconf import OmegaConf


def verl_config(overrides: list[str]):
    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=overrides)


def validated(cfg) -> dict:
    """verl's validate_config (actor, ref and critic when used) and its RolloutConfig conversion."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    return {
        "printed": printed.getvalue(),
        "rollout": type(rollout).__name__,
        "critic": need_critic(cfg),
        "ref": need_reference_policy(cfg),
    }


def main() -> None:
    request = json.load(sys.stdin)
    keys = request["keys"]
    out = {"defaults": {k: OmegaConf.select(verl_config([]), k) for k in keys}}
    for profile in request["profiles"]:
        cfg = verl_config([f"+hardware={profile}", *request["overrides"]])
        values = {k: OmegaConf.select(cfg, k) for k in keys}
        env = OmegaConf.to_container(OmegaConf.select(cfg, request["env_key"]))
        out[profile] = {"values": values, "env": env, "validation": validated(cfg)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
