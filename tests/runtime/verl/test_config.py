"""verl's trainer config built from ours: every knob from the resolved config, validated by verl's dataclasses."""

import shutil
import subprocess
import time

import pytest

from tests.conftest import PROFILES, REFERENCE
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.errors import ConfigError
from trinity.runtime.driver.factory import role_factory
from trinity.runtime.trainer.rank import TrainerRank

pytest.importorskip("verl")


def overrides_of(config):
    from trinity.runtime.verl.config import overrides

    return dict(o.split("=", 1) for o in overrides(config, "/models/m", 100))


def reference(profile, *extra):
    return resolve(Request(REFERENCE, (f"hardware={profile}", *extra))).config


def test_trainer_knobs_reach_verl():
    config = reference(
        "a100",
        "+algorithm.policy_loss_fn_args.clip_range_high=0.28",
        "algorithm.kl_loss_fn=low_var_kl",
        "+algorithm.entropy_loss_fn_args.entropy_coef=0.01",
        "trainer.param_offload=true",
    )
    got = overrides_of(config)
    actor = "actor_rollout_ref.actor"
    assert (got[f"{actor}.clip_ratio_low"], got[f"{actor}.clip_ratio_high"]) == ("0.2", "0.28")
    assert (got[f"{actor}.use_kl_loss"], got[f"{actor}.kl_loss_type"], got[f"{actor}.kl_loss_coef"]) == (
        "true",
        "low_var_kl",
        "0.001",
    )
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

    section = OmegaConf.create(
        {
            "actor": {
                "_target_": "verl.workers.config.FSDPActorConfig",
                "strategy": "fsdp2",
                "loss_agg_mode": "token-sum-ish",
                "ppo_mini_batch_size": 4,
                "ppo_micro_batch_size_per_gpu": 4,
            }
        }
    )
    with pytest.raises(ConfigError) as err:
        _validate(section)
    assert (
        err.value.issues[0].key == "trainer"
        and "verl rejected the trainer configuration" in err.value.issues[0].message
    )


# --- trainer.trainer_config: Trinity-RFT's verl passthrough ---------------------------------------


def test_loss_functions_and_optimizer_reach_verl_by_their_verl_names():
    config = reference(
        "a100",
        "algorithm.algorithm_type=gspo",
        "algorithm.optimizer.optimizer_type=sgd",
        "algorithm.optimizer.lr_scheduler_type=cosine",
        "algorithm.optimizer.clip_grad=0.5",
        "trainer.grad_clip=0.5",
        "trainer.offload_policy=true",
    )
    got, actor = overrides_of(config), "actor_rollout_ref.actor"
    assert got[f"{actor}.policy_loss.loss_mode"] == "gspo" and (
        got[f"{actor}.clip_ratio_low"],
        got[f"{actor}.clip_ratio_high"],
    ) == ("0.0003", "0.0004")
    assert (
        got[f"{actor}.optim.optimizer"],
        got[f"{actor}.optim.lr_scheduler_type"],
        got[f"{actor}.optim.clip_grad"],
    ) == ("SGD", "cosine", "0.5")
    assert (
        got[f"{actor}.grad_clip"] == "0.5"
        and got[f"{actor}.fsdp_config.offload_policy"] == "true"
        and got[f"{actor}.optim.min_lr_ratio"] == "0.01"
    )


def test_ppo_dual_clip_and_padding_removal_reach_verl():
    got = overrides_of(
        reference(
            "a100",
            "+algorithm.policy_loss_fn_args.clip_ratio_c=4.0",
            "trainer.attn_implementation=flash_attention_2",
            "trainer.use_remove_padding=true",  # a100 packs only with a varlen kernel: not by default on sdpa
        )
    )
    assert (
        got["actor_rollout_ref.actor.clip_ratio_c"] == "4.0"
        and got["actor_rollout_ref.actor.policy_loss.loss_mode"] == "vanilla"
    )
    assert got["actor_rollout_ref.model.use_remove_padding"] == "true"


@pytest.mark.parametrize(
    "profile,extra,fused",
    [("a100", (), "false"), ("cpu", (), "true"), ("cpu", ("trainer.use_fused_kernels=false",), "false")],
)
def test_fused_kernels_reach_verls_model_section(profile, extra, fused):
    assert overrides_of(reference(profile, *extra))["actor_rollout_ref.model.use_fused_kernels"] == fused


@pytest.mark.parametrize(
    "profile,extra,fused",
    [("cpu", (), True), ("a100", (), None), ("cpu", ("trainer.fused_optimizer=false",), None)],
)
def test_the_fused_optimizer_reaches_the_optimizer_verl_builds_for_actor_and_critic(demo_assets, profile, extra, fused):
    """verl's own build_optimizer, from the config trinity hands it: torch's fused step, or torch's own choice."""
    import torch
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config.optimizer import build_optimizer

    from trinity.runtime.verl.config import build, build_critic

    config, model = reference(profile, "algorithm.algorithm_type=ppo", *extra), str(demo_assets / "model")
    sections = (build(config, model, 100).actor.optim, build_critic(config, model, 100).optim)
    for section in sections:
        optimizer = build_optimizer([torch.nn.Parameter(torch.ones(2))], omega_conf_to_dataclass(section))
        assert (type(optimizer).__name__, optimizer.defaults["fused"]) == ("AdamW", fused)


@pytest.mark.parametrize("profile", ["cpu", "a100"])
def test_a_passthrough_section_set_to_null_over_a_trinity_key_is_refused(profile):
    """Null at override_optimizer_config would drop trinity's fused flag: the section holds a key trinity sets."""
    from trinity.runtime.verl.config import build

    key = "actor.optim.override_optimizer_config"
    with pytest.raises(ConfigError) as err:
        build(reference(profile, f"+trainer.trainer_config.{key}=null"), "/models/m", 100)
    [issue] = err.value.issues
    assert (
        issue.key == f"trainer.trainer_config.{key}"
        and "is set by trinity from trainer.fused_optimizer" in issue.message
    )


def test_optimizer_arguments_torch_refuses_together_are_refused_before_the_run():
    """verl's dataclass takes any override_optimizer_config; torch refuses `foreach` beside `fused` only when the
    optimizer is built, so the check builds it."""
    from trinity.runtime.verl.config import build

    key = "actor.optim.override_optimizer_config.foreach"
    with pytest.raises(ConfigError) as err:
        build(reference("cpu", f"+trainer.trainer_config.{key}=true"), "/models/m", 100)
    [issue] = err.value.issues
    assert issue.key == "trainer.trainer_config.actor" and issue.source == "verl's FSDPActorConfig"
    assert "`fused` and `foreach` cannot be `True` together" in issue.message
    other = build(reference("a100", f"+trainer.trainer_config.{key}=true"), "/models/m", 100)  # no fused there
    assert other.actor.optim.override_optimizer_config == {"foreach": True}


def test_an_optimizer_its_module_lacks_is_refused_before_the_run():
    from trinity.runtime.verl.config import build

    with pytest.raises(ConfigError) as err:
        build(reference("a100", "+trainer.trainer_config.actor.optim.optimizer_impl=torch.nn"), "/models/m", 100)
    [issue] = err.value.issues
    assert issue.key == "trainer.trainer_config.actor" and "has no attribute 'AdamW'" in issue.message
    assert "Available optimizers" not in issue.message


def test_passthrough_keys_reach_verls_config_flat_or_under_actor_rollout_ref(demo_assets):
    from trinity.runtime.verl.config import build

    config = reference(
        "a100",
        "+trainer.trainer_config.actor.entropy_from_logits_with_chunking=true",
        "+trainer.trainer_config.actor_rollout_ref.ref.log_prob_use_dynamic_bsz=false",
        "+trainer.trainer_config.model.override_config.rope_theta=5000",
    )
    section = build(config, str(demo_assets / "model"), 100)  # verl's HFModelConfig reads the model's config.json
    assert section.actor.entropy_from_logits_with_chunking is True and section.ref.log_prob_use_dynamic_bsz is False
    # merged, not replaced
    assert (
        section.model.override_config.rope_theta == 5000 and section.model.override_config.attn_implementation == "sdpa"
    )


@pytest.mark.parametrize(
    "key,message",
    [
        ("actor.bogus", "FSDPActorConfig.__init__() got an unexpected keyword argument 'bogus'"),
        ("actor.optim.betas_x", "FSDPOptimizerConfig.__init__() got an unexpected keyword argument 'betas_x'"),
        ("actor_rollout_ref.ref.bogus", "FSDPActorConfig.__init__() got an unexpected keyword argument 'bogus'"),
    ],
)
def test_a_passthrough_key_verl_does_not_have_is_refused_by_verls_class_in_our_format(key, message):
    from trinity.runtime.verl.config import build

    with pytest.raises(ConfigError) as err:
        build(reference("a100", f"+trainer.trainer_config.{key}=1"), "/models/m", 100)
    issue = err.value.issues[0]
    section = key.removeprefix("actor_rollout_ref.").split(".")[0]
    assert (
        issue.key == f"trainer.trainer_config.{section}"
        and issue.source == "verl's FSDPActorConfig"
        and message in issue.message
    )


@pytest.mark.parametrize(
    "key,ours",
    [
        ("actor.use_torch_compile", "trainer.use_torch_compile"),
        ("actor.optim.lr", "algorithm.optimizer.lr"),
        ("actor.optim.override_optimizer_config.fused", "trainer.fused_optimizer"),
        ("actor_rollout_ref.actor.ppo_mini_batch_size", "buffer.train_batch_size"),
    ],
)
def test_a_passthrough_key_trinity_sets_is_refused_naming_the_trinity_key(key, ours):
    from trinity.runtime.verl.config import build

    with pytest.raises(ConfigError) as err:
        build(reference("a100", f"+trainer.trainer_config.{key}=1"), "/models/m", 100)
    issue = err.value.issues[0]
    assert (
        issue.key == f"trainer.trainer_config.{key}"
        and f"is set by trinity from {ours}" in issue.message
        and issue.hint.startswith(f"set {ours} instead")
    )


@pytest.mark.ray  # a local Ray starts while verl's check runs
def test_run_refuses_a_bad_passthrough_before_anything_runs_in_ray(demo_assets, tmp_path):
    """verl's check answers while a local Ray starts: its refusal is the only output, and that Ray is gone."""
    import tempfile

    from tests.conftest import run_process

    ray_tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")
    env = {
        "TRINITY_DEMO_DIR": str(demo_assets),
        "TRINITY_CHECKPOINT_ROOT_DIR": str(tmp_path / "ckpt"),
        "RAY_ADDRESS": "",
        "RAY_TMPDIR": ray_tmp,
    }
    try:
        # a Ray of its own: `auto` would join any Ray running on the machine (another test worker's)
        args = ("+trainer.trainer_config.actor.clip_ratio_cc=2.0", "cluster.ray_address=local")
        result = run_process("run", *args, cwd=tmp_path, env=env)
        assert result.code == 2 and "Traceback" not in result.err
        assert result.err == (
            "trinity: 1 problem in the config\n"
            "error: verl's FSDPActorConfig: trainer.trainer_config.actor: verl rejected the trainer configuration "
            "built from this run config: FSDPActorConfig.__init__() got an unexpected keyword argument "
            "'clip_ratio_cc'\n"
            "    hint: check trainer.*, algorithm.* and trainer.trainer_config; the values verl received are in the "
            "run's logs/trainer_node*.log\n"
        )
        assert not (tmp_path / "ckpt").exists()  # nothing written
        assert _ray_processes_end(ray_tmp) == []  # the Ray it started is shut down (its gcs and raylet name the dir)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _ray_processes_end(ray_tmp: str, timeout_s: float = 30.0) -> list[str]:
    """The processes still naming `ray_tmp` once they ended or `timeout_s` passed (ray.shutdown does not wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        left = [line for line in ps.splitlines() if ray_tmp in line]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


@pytest.mark.parametrize("key", ["model.lora_rank", "model.target_modules", "model.lora.merge"])
def test_verls_lora_keys_are_refused_in_the_passthrough_for_model_lora_configs(key):
    """A LoRA trinity does not know of would train an adapter whose weights never reach the engines."""
    from trinity.runtime.verl.config import build

    config = resolve(Request(REFERENCE, ("hardware=a100", f"+trainer.trainer_config.{key}=8"))).config
    with pytest.raises(ConfigError) as err:
        build(config, "/models/m", 10)
    [issue] = err.value.issues
    assert (
        issue.key == f"trainer.trainer_config.actor_rollout_ref.{key}" or issue.key == f"trainer.trainer_config.{key}"
    )
    assert "set model.lora_configs instead" in issue.hint


def test_a_lora_config_reaches_verls_peft_path():
    from trinity.runtime.verl.config import build

    config = resolve(
        Request(REFERENCE, ("hardware=a100", "+model.lora_configs=[{lora_rank: 16, exclude_modules: 'o_proj'}]"))
    ).config
    section = build(config, "/models/m", 10, "/adapters/a")
    model = section.model
    assert (model.lora_rank, model.lora_alpha, model.target_modules, list(model.exclude_modules)) == (
        16,
        32,
        "all-linear",
        ["o_proj"],
    )
    assert model.lora_adapter_path == "/adapters/a"
    assert section.actor.fsdp_config.model_dtype == "bf16"  # the frozen base in the training dtype


# --- the critic (PPO) ----------------------------------------------------------------------------------------


def critic_of(*extra, model="/models/m"):
    from verl.utils.config import omega_conf_to_dataclass

    from trinity.runtime.verl.config import build_critic

    config = reference("a100", "algorithm.algorithm_type=ppo", *extra)
    return omega_conf_to_dataclass(build_critic(config, model, 100))


def test_the_critic_takes_the_actors_engine_and_budgets_and_verls_optimizer_defaults(demo_assets):
    critic = critic_of("trainer.max_token_len_per_gpu=4096", model=str(demo_assets / "model"))
    config = reference("a100", "algorithm.algorithm_type=ppo")
    assert (critic.strategy, critic.model.path) == (config.trainer.trainer_strategy, str(demo_assets / "model"))
    assert critic.ppo_mini_batch_size == config.buffer.train_batch_size and critic.ppo_max_token_len_per_gpu == 4096
    assert (critic.optim.lr, critic.optim.total_training_steps, critic.cliprange_value) == (1e-5, 100, 0.5)
    assert critic.engine.use_torch_compile is config.trainer.use_torch_compile
    assert critic.model.override_config["attn_implementation"] == config.trainer.attn_implementation


def test_the_critic_passthrough_reaches_verl(demo_assets):
    critic = critic_of(
        "+trainer.trainer_config.critic.optim.lr=3e-6",
        "+trainer.trainer_config.critic.cliprange_value=0.2",
        model=str(demo_assets / "model"),
    )
    assert (critic.optim.lr, critic.cliprange_value) == (3e-6, 0.2)


@pytest.mark.parametrize(
    "key,ours",
    [
        ("critic.optim.total_training_steps", "trainer.total_steps"),
        ("critic.strategy", "trainer.trainer_strategy"),
        ("critic.optim.override_optimizer_config.fused", "trainer.fused_optimizer"),  # on a100, where it is unset
    ],
)
def test_a_critic_key_trinity_sets_is_refused_naming_the_trinity_key(key, ours):
    with pytest.raises(ConfigError) as err:
        critic_of(f"+trainer.trainer_config.{key}=1")
    [issue] = err.value.issues
    assert issue.key == f"trainer.trainer_config.{key}" and f"is set by trinity from {ours}" in issue.message


def test_a_critic_key_verl_does_not_have_is_refused_by_verls_class(demo_assets):
    with pytest.raises(ConfigError) as err:
        critic_of("+trainer.trainer_config.critic.bogus=1", model=str(demo_assets / "model"))
    [issue] = err.value.issues
    assert issue.key == "trainer.trainer_config.critic" and issue.source == "verl's FSDPCriticConfig"
    assert "unexpected keyword argument 'bogus'" in issue.message


@pytest.mark.parametrize("dynamic", [True, False])
def test_the_critics_engine_takes_the_critics_batching(demo_assets, dynamic):
    from trinity.runtime.trainer.critic import engine

    extra = ("trainer.max_token_len_per_gpu=1000", f"trainer.use_dynamic_bsz={str(dynamic).lower()}")
    section = critic_of(*extra, model=str(demo_assets / "model"))
    got = engine(section)
    assert (got.use_dynamic_bsz, got.max_token_len_per_gpu, got.infer_max_token_len_per_gpu) == (dynamic, 1000, 1000)
    shard = reference("a100").buffer.train_batch_size // reference("a100").cluster.trainer_gpu_num
    assert got.micro_batch_size_per_gpu == got.infer_micro_batch_size_per_gpu == shard
