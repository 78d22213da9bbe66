"""Algorithm presets fill the loss functions; each function's arguments are checked where they were written."""

import re

import pytest

from tests.conftest import MINIMAL
from trinity.config.algorithms.presets import ALGORITHMS

GRPO = MINIMAL + "algorithm:\n  repeat_times: 4\n"
# Trinity-RFT 0.6.0's PPOPolicyLossFn.default_args(), loss_agg_mode filled from algorithm.loss_agg_mode
PPO_ARGS = {
    "clip_range": 0.2,
    "clip_ratio_c": 3.0,
    "loss_agg_mode": "token-mean",
    "enable_sequence_masking": False,
    "delta_sequence_masking": 0.1,
    "fallback_to_policy_gradient": False,
}


@pytest.fixture
def render(cli, write):
    def _render(text: str, *args: str):
        result = cli("config", "render", "-c", write("run.yaml", text), "hardware=cpu", "--format", "json", *args)
        return result, (result.json() if result.code == 0 else None)

    return _render


def test_grpo_preset_fills_every_function_and_its_arguments(render):
    result, cfg = render(GRPO)
    algo = cfg["algorithm"]
    assert result.code == 0
    functions = [
        algo[k]
        for k in ("sample_strategy", "advantage_fn", "policy_loss_fn", "kl_penalty_fn", "kl_loss_fn", "entropy_loss_fn")
    ]
    assert functions == ["default", "grpo", "ppo", "none", "k2", "default"]  # Trinity-RFT's GRPO preset
    assert algo["policy_loss_fn_args"] == {**PPO_ARGS, "clip_range_low": None, "clip_range_high": None}
    assert algo["kl_loss_fn_args"] == {"kl_coef": 0.001, "adaptive": False} and algo["loss_agg_mode"] == "token-mean"
    assert algo["advantage_fn_args"] == {
        "epsilon": 1e-6,
        "norm_adv_by_std": True,
        "std_threshold": None,
        "duplicate_experiences": False,
        "rank_penalty": None,
        "std_cal_level": "group",
    }


def test_a_function_you_set_is_kept_and_its_arguments_completed(render):
    result, cfg = render(GRPO + "  kl_loss_fn: low_var_kl\n  policy_loss_fn_args:\n    clip_range_high: 0.28\n")
    assert result.code == 0
    assert cfg["algorithm"]["kl_loss_fn"] == "low_var_kl"
    assert cfg["algorithm"]["policy_loss_fn_args"] == {**PPO_ARGS, "clip_range_low": None, "clip_range_high": 0.28}


def test_explain_names_the_preset_as_the_source(cli, write):
    result = cli(
        "config", "render", "-c", write("run.yaml", GRPO), "hardware=cpu", "--explain", "algorithm.policy_loss_fn"
    )
    assert (
        result.code == 0 and "rule algorithm_preset" in result.out and "algorithm.algorithm_type='grpo'" in result.out
    )


def test_unknown_algorithm_is_refused_with_a_suggestion(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", GRPO + "  algorithm_type: grpoo\n"), "hardware=cpu")
    assert result.code == 2
    assert "run.yaml:5:3: algorithm.algorithm_type: unknown algorithm 'grpoo'" in result.err
    assert "allowed: grpo, grpo_verl, dapo, gspo, cispo, sft" in result.err and "did you mean 'grpo'?" in result.err


def test_ppo_trains_a_critic_and_takes_gaes_arguments(render):
    result, cfg = render(GRPO + "  algorithm_type: ppo\n  advantage_fn_args:\n    lam: 0.95\n")
    assert result.code == 0
    assert cfg["algorithm"]["advantage_fn"] == "ppo"
    assert cfg["algorithm"]["advantage_fn_args"] == {"gamma": 1.0, "lam": 0.95}
    assert cfg["model"]["critic_model_path"] == cfg["model"]["model_path"]  # upstream's default: the same model


@pytest.mark.parametrize(
    "algorithm, extra, where, message",
    [
        (
            "grpo",
            "trainer:\n  critic_warmup: 3\n",
            "trainer.critic_warmup",
            "3 steps of critic warm-up, but algorithm 'grpo' trains no critic",
        ),
        (
            "grpo",
            "trainer:\n  trainer_config:\n    critic:\n      cliprange_value: 0.2\n",
            "trainer.trainer_config.critic",
            "this algorithm trains no critic",
        ),
        (
            "ppo",
            "trainer:\n  trainer_config:\n    actor_rollout_ref:\n      critic:\n        cliprange_value: 0.2\n",
            "trainer.trainer_config.actor_rollout_ref.critic",
            "verl's critic section goes directly under trainer.trainer_config",
        ),
    ],
)
def test_critic_settings_without_a_critic_are_refused(cli, write, algorithm, extra, where, message):
    text = GRPO + f"  algorithm_type: {algorithm}\n" + extra
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2 and f"{where}: " in result.err and message in result.err, result.err


def test_a_critic_warmup_longer_than_the_run_warns(cli, write):
    text = GRPO + "  algorithm_type: ppo\ntrainer:\n  critic_warmup: 500\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu", "buffer.total_steps=20")
    assert result.code == 0 and "1 warning(s)" in result.out
    assert "trainer.critic_warmup: 500 steps of critic warm-up in a run of 20 train steps" in result.err
    unknown = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")  # steps from the data: unknown
    assert unknown.code == 0 and "0 warning(s)" in unknown.out and "critic warm-up" not in unknown.err


def test_negative_clip_range_is_caught_before_verl_sees_it(cli, write):
    text = GRPO + "  policy_loss_fn_args:\n    clip_range: -0.2\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert (
        "run.yaml:6:5: algorithm.policy_loss_fn_args.clip_range: input should be greater than 0 (got -0.2)"
        in result.err
    )


def test_misspelled_argument_gets_the_functions_own_names(cli, write):
    text = GRPO + "  kl_loss_fn_args:\n    kl_cof: 0.1\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert (
        result.code == 2
        and "algorithm.kl_loss_fn_args.kl_cof: unknown key" in result.err
        and "did you mean 'kl_coef'?" in result.err
    )


def test_a_string_where_a_number_belongs_is_an_error(cli, write):
    result = cli(
        "config", "validate", "-c", write("run.yaml", GRPO), "hardware=cpu", "+algorithm.kl_loss_fn_args.kl_coef=lots"
    )
    assert result.code == 2 and "algorithm.kl_loss_fn_args.kl_coef: input should be a valid number" in result.err


def test_unknown_function_lists_the_known_ones(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", GRPO + "  kl_loss_fn: k4\n"), "hardware=cpu")
    assert (
        result.code == 2
        and "unknown kl_loss_fn 'k4'" in result.err
        and "allowed: none, k1, k2, k3, low_var_kl, abs, mse" in result.err
    )


def test_sft_takes_no_clip_range(cli, write):
    text = MINIMAL + "mode: train\nalgorithm:\n  algorithm_type: sft\n  policy_loss_fn_args:\n    clip_range: 0.2\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert (
        result.code == 2
        and "run.yaml:7:5: algorithm.policy_loss_fn_args.clip_range: unknown key" in result.err
        and "allowed: loss_agg_mode" in result.err
    )


def test_the_default_sampling_takes_no_arguments(cli, write):
    result = cli(
        "config",
        "validate",
        "-c",
        write("run.yaml", GRPO + "  sample_strategy_args:\n    warmup_steps: 3\n"),
        "hardware=cpu",
    )
    assert (
        result.code == 2
        and "run.yaml:5:3: algorithm.sample_strategy_args: sample_strategy 'default' takes no arguments" in result.err
    )


def test_sft_outside_train_mode_is_refused(cli, write):
    result = cli(
        "config", "validate", "-c", write("run.yaml", MINIMAL + "algorithm:\n  algorithm_type: sft\n"), "hardware=cpu"
    )
    assert result.code == 2 and "mode: algorithm 'sft' trains on a data set and generates nothing" in result.err


def test_grpo_with_one_rollout_per_task_warns(cli, write):
    taskset = (
        "buffer:\n  explorer_input:\n    default_workflow_type: math_workflow\n    taskset: {name: t, path: /data/t}\n"
    )
    result = cli("config", "render", "-c", write("run.yaml", MINIMAL + taskset), "hardware=cpu")
    assert (
        result.code == 0
        and "warning: schema default: algorithm.repeat_times: grpo compares the rollouts (episodes)" in result.err
    )
    per_taskset = cli(
        "config",
        "render",
        "-c",
        write("run2.yaml", MINIMAL + taskset.replace("path: /data/t", "path: /data/t, repeat_times: 4")),
        "hardware=cpu",
    )
    assert per_taskset.code == 0 and "GRPO compares" not in per_taskset.err  # the taskset's own count is what rolls out
    # no tasks: nothing to warn about
    assert "GRPO compares" not in cli("config", "render", "-c", write("run3.yaml", MINIMAL), "hardware=cpu").err


def test_train_batch_size_is_batch_times_repeats(render):
    result, cfg = render(GRPO + "buffer:\n  batch_size: 12\n")
    assert result.code == 0 and cfg["buffer"]["train_batch_size"] == 48


# --- the registry against Trinity-RFT 0.6.0 ------------------------------------------------------

# Trinity-RFT 0.6.0's ALGORITHM_TYPE registry and each preset's default_config() (trinity/algorithm/algorithm.py)
UPSTREAM_PRESETS = {
    "grpo": ("grpo", "ppo", "none", "k2", "default"),
    "grpo_verl": ("grpo", "ppo", "none", "k2", "default"),
    "dapo": ("grpo", "ppo", "none", "none", "default"),
    "gspo": ("grpo", "gspo", "none", "k2", "default"),
    "cispo": ("grpo", "cispo", "none", "k2", "default"),
    "reinforceplusplus": ("reinforceplusplus", "ppo", "none", "k2", "default"),
    "rloo": ("rloo", "ppo", "none", "k2", "default"),
    "opmd": ("opmd", "opmd", "none", "k2", "default"),
    "asymre": ("asymre", "opmd", "none", "none", "none"),
    "topr": ("reinforce", "topr", "none", "k2", "default"),
    "sapo": ("grpo", "sapo", "none", "k2", "default"),
    "rec": ("rec", "rec", "none", "k2", "default"),
    "sppo": ("opmd", "sppo", "none", "none", "none"),
    "ppo": ("ppo", "ppo", "none", "k2", "default"),
    "raft": ("raft", "sft", "none", "none", "none"),  # upstream's advantage_fn is none: SFT on every rollout
    "multi_step_grpo": ("step_wise_grpo", "ppo", "none", "k2", "default"),
    "gigpo": ("gigpo", "ppo", "none", "k2", "default"),
    # newer than 0.6.0: M2POAlgorithm (its tests at 3a41dc2: grpo, m2po, no KL penalty, no KL loss, no entropy)
    "m2po": ("grpo", "m2po", "none", "none", "none"),
}
TEACHER_PRESETS = {"on_policy_distill", "jsd"}  # run with a teacher: test_distillation_needs_a_teacher...
MIX_PRESETS = {"mix", "mix_chord"}  # run with an SFT data set: test_mix_...
UPSTREAM_NAMES = {
    "cpt",
    "sft",
    "ppo",
    "grpo",
    "dapo",
    "reinforceplusplus",
    "rloo",
    "opmd",
    "asymre",
    "dpo",
    "topr",
    "cispo",
    "gspo",
    "sapo",
    "mix",
    "mix_chord",
    "raft",
    "sppo",
    "rec",
    "multi_step_grpo",
    "gigpo",
    "on_policy_distill",
    "jsd",
    "grpo_verl",
    "m2po",
}


KINDS = ("advantage_fn", "policy_loss_fn", "kl_penalty_fn", "kl_loss_fn", "entropy_loss_fn")
# the presets that train on a data set (mode train): upstream's functions, and the format columns each reads
DATA_SET_PRESETS = {
    "sft": (("none", "sft", "none", "none", "none"), "prompt_key, response_key"),
    "dpo": (("none", "dpo", "none", "k2", "default"), "prompt_key, chosen_key, rejected_key"),
    "cpt": (("none", "sft", "none", "none", "none"), "prompt_key"),
}
DATA_SET = (
    "mode: train\ncluster:\n  gpu_per_node: 2\nbuffer:\n  train_batch_size: 8\n"
    "  trainer_input:\n    experience_buffer:\n      name: data\n"
    "      storage_type: file\n      path: {path}\n      format:\n        prompt_type: plaintext\n"
)


@pytest.mark.parametrize("name", sorted(DATA_SET_PRESETS))
def test_each_data_set_preset_fills_upstreams_functions(render, tmp_path, name):
    (tmp_path / "d.jsonl").write_text("{}\n")
    result, cfg = render(
        MINIMAL + DATA_SET.format(path=tmp_path / "d.jsonl") + f"algorithm:\n  algorithm_type: {name}\n"
    )
    algo = cfg["algorithm"]
    assert result.code == 0, result.err
    assert tuple(algo[k] for k in KINDS) == DATA_SET_PRESETS[name][0]


@pytest.mark.parametrize("name", sorted(DATA_SET_PRESETS))
def test_a_data_set_preset_without_a_data_set_names_the_columns_it_reads(cli, write, name):
    text = MINIMAL + f"mode: train\nalgorithm:\n  algorithm_type: {name}\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert f"buffer.trainer_input.experience_buffer.path: algorithm '{name}' trains on a data set" in result.err
    assert f"format: {{{DATA_SET_PRESETS[name][1]}}}" in result.err


@pytest.mark.parametrize(
    "name, prompt_type, reads",
    [
        ("sft", "messages", None),  # every assistant turn of a conversation: what it is for
        ("sft", "plaintext", "plaintext rows"),
        ("dpo", "messages", "a pairs data set"),
        ("grpo", "messages", "rollouts"),
    ],
)
def test_multi_turn_sft_is_refused_where_no_sft_conversation_reads_it(cli, write, tmp_path, name, prompt_type, reads):
    (tmp_path / "d.jsonl").write_text("{}\n")
    data = DATA_SET.format(path=tmp_path / "d.jsonl").replace("prompt_type: plaintext", f"prompt_type: {prompt_type}")
    data += "        enable_concatenated_multi_turn: true\n"
    if name == "grpo":
        data = data.replace("mode: train\n", "")
    text = MINIMAL + data + f"algorithm:\n  algorithm_type: {name}\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    key = "buffer.trainer_input.experience_buffer.format.enable_concatenated_multi_turn"
    assert (result.code, key in result.err) == ((0, False) if reads is None else (2, True)), result.err
    if reads:
        assert f"algorithm '{name}' reads {reads}" in result.err and "allowed: false" in result.err


def test_dpo_takes_whole_pairs_per_rank_and_keeps_rows_in_order(cli, write, tmp_path):
    (tmp_path / "d.jsonl").write_text("{}\n")
    base = MINIMAL + DATA_SET.format(path=tmp_path / "d.jsonl") + "algorithm:\n  algorithm_type: dpo\n"
    odd = cli("config", "validate", "-c", write("run.yaml", base), "hardware=cpu", "buffer.train_batch_size=6")
    assert odd.code == 2 and "6 experiences do not split into whole (chosen, rejected) pairs over 2" in odd.err
    assert "allowed: a multiple of 4" in odd.err
    packed = cli("config", "validate", "-c", write("run.yaml", base), "hardware=cpu", "trainer.use_dynamic_bsz=true")
    assert packed.code == 2 and "trainer.use_dynamic_bsz: 'dpo' pairs adjacent rows" in packed.err
    rendered = cli("config", "render", "-c", write("run.yaml", base), "hardware=cpu", "--format", "json")
    assert rendered.code == 0 and rendered.json()["trainer"]["use_dynamic_bsz"] is False


@pytest.mark.parametrize("name", ["sft", "dpo"])
def test_a_kl_penalty_on_a_loss_without_rewards_is_refused(cli, write, tmp_path, name):
    (tmp_path / "d.jsonl").write_text("{}\n")
    text = MINIMAL + DATA_SET.format(path=tmp_path / "d.jsonl") + f"algorithm:\n  algorithm_type: {name}\n"
    result = cli("config", "validate", "-c", write("run.yaml", text + "  kl_penalty_fn: k2\n"), "hardware=cpu")
    assert result.code == 2
    assert f"algorithm.kl_penalty_fn: policy_loss_fn '{name}' trains on no rewards: a KL penalty 'k2'" in result.err


def test_cpt_reads_plain_text(cli, write, tmp_path):
    (tmp_path / "d.jsonl").write_text("{}\n")
    text = MINIMAL + DATA_SET.format(path=tmp_path / "d.jsonl").replace("plaintext", "messages")
    result = cli(
        "config", "validate", "-c", write("run.yaml", text + "algorithm:\n  algorithm_type: cpt\n"), "hardware=cpu"
    )
    assert result.code == 2 and "format.prompt_type: algorithm 'cpt' trains on raw text" in result.err


def test_every_upstream_algorithm_is_known():

    assert set(ALGORITHMS) == UPSTREAM_NAMES


@pytest.mark.parametrize("name", sorted(UPSTREAM_PRESETS))
def test_each_runnable_preset_fills_upstreams_functions(render, name):
    result, cfg = render(GRPO + f"  algorithm_type: {name}\n")
    algo = cfg["algorithm"]
    assert result.code == 0
    assert tuple(algo[k] for k in KINDS) == UPSTREAM_PRESETS[name]


def test_gspo_takes_upstreams_clip_ranges_and_they_reach_verl(render):
    result, cfg = render(GRPO + "  algorithm_type: gspo\n")
    assert cfg["algorithm"]["policy_loss_fn_args"] == {
        "clip_range": None,
        "clip_range_low": 0.0003,
        "clip_range_high": 0.0004,
        "loss_agg_mode": "token-mean",
    }


def test_every_upstream_algorithm_is_one_trinity_runs_and_checks_here():
    # each is an algorithm_type of ours, and one of the tests above resolves its preset as upstream writes it
    assert UPSTREAM_NAMES <= set(ALGORITHMS)
    assert UPSTREAM_NAMES == set(UPSTREAM_PRESETS) | set(DATA_SET_PRESETS) | TEACHER_PRESETS | MIX_PRESETS


@pytest.mark.parametrize(
    "kind,name,reason",
    [
        ("advantage_fn", "clipv", "beside the per-token entropy it reads a per-token column 'necs'"),
        ("kl_loss_fn", "corrected_k3", "verl has no corrected k3 KL loss"),
    ],
)
def test_upstream_functions_the_runtime_cannot_run_are_refused_by_name(cli, write, kind, name, reason):
    result = cli("config", "validate", "-c", write("run.yaml", GRPO + f"  {kind}: {name}\n"), "hardware=cpu")
    assert result.code == 2
    assert (
        f"run.yaml:5:3: algorithm.{kind}: {kind} '{name}' is known to Trinity-RFT but not supported by trinity yet: "
        f"{reason}" in result.err
    )


# --- clipb: GRPO's advantages and Clip_B's entropy mask ----------------------------------------------------------

CLIPB = GRPO + "  algorithm_type: grpo_verl\n  advantage_fn: clipb\n  advantage_fn_args:\n    mu: 1.5\n"


@pytest.mark.parametrize("profile", ["a100", "ascend910b"])
def test_clipb_with_its_arguments_is_accepted_on_each_profile(cli, write, profile):
    result = cli("config", "render", "-c", write("run.yaml", CLIPB), f"hardware={profile}", "--format", "json")
    assert result.code == 0, result.err
    algo = result.json()["algorithm"]
    assert (algo["advantage_fn"], algo["policy_loss_fn"]) == ("clipb", "ppo")
    assert algo["advantage_fn_args"] == {"epsilon": 1e-6, "mu": 1.5}  # Trinity-RFT's ClipBAdvantageFn's, mu written
    for bypass in ("true", "false"):  # the entropy comes from the old-policy pass, or from a pass of its own
        again = cli(
            "config", "validate", "-c", "run.yaml", f"hardware={profile}", f"algorithm.bypass_old_logprobs={bypass}"
        )
        assert again.code == 0, again.err


@pytest.mark.parametrize(
    "args, where, message",
    [
        ("    mu: -1\n", "8:5: algorithm.advantage_fn_args.mu", "greater than or equal to 0"),
        ("    mu: .inf\n", "8:5: algorithm.advantage_fn_args.mu", "finite number"),
        ("    epsilon: 0\n", "8:5: algorithm.advantage_fn_args.epsilon", "greater than 0"),
        ("    nu: 2.5\n", "8:5: algorithm.advantage_fn_args.nu", "allowed: epsilon, mu"),
    ],
)
def test_clipbs_arguments_are_checked_where_written(cli, write, args, where, message):
    text = GRPO + f"  algorithm_type: grpo_verl\n  advantage_fn: clipb\n  advantage_fn_args:\n{args}"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2 and f"run.yaml:{where}" in result.err and message in result.err, result.err


@pytest.mark.parametrize("name", sorted(MIX_PRESETS))
def test_clipb_with_sft_samples_mixed_into_the_batch_is_refused_where_it_is_written(cli, write, name):
    text = GRPO + f"  algorithm_type: {name}\n  advantage_fn: clipb\n"
    data = "+buffer.trainer_input.auxiliary_buffers.sft_dataset={path: /d.jsonl}"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu", data)
    assert result.code == 2
    assert (
        f"run.yaml:6:3: algorithm.advantage_fn: 'clipb' takes tokens out of the loss over a batch of rollouts; "
        f"policy_loss_fn '{name}' mixes SFT samples into the batch" in result.err
    )
    allowed = re.search(r"allowed: (.*)", result.err).group(1).split(", ")
    assert "grpo" in allowed and "clipb" not in allowed
    assert "hint: remove advantage_fn to take the preset's" in result.err


def test_clipbs_arguments_are_explained_and_diffed(cli, write):
    explained = cli(
        "config", "render", "-c", write("run.yaml", CLIPB), "hardware=a100", "--explain", "algorithm.advantage_fn_args"
    )
    assert explained.code == 0, explained.err
    assert "algorithm.advantage_fn_args.mu = 1.5" in explained.out and "run.yaml:8:5" in explained.out
    assert "algorithm.advantage_fn_args.epsilon = 1e-06" in explained.out and "schema default" in explained.out
    diff = cli("config", "diff", "-c", "run.yaml", "hardware=a100", "--vs", "algorithm.advantage_fn_args.mu=3.0")
    assert diff.code == 1 and "algorithm.advantage_fn_args.mu" in diff.out and "1.5" in diff.out and "3.0" in diff.out
    grpo = cli(
        "config", "diff", "-c", write("grpo.yaml", GRPO), "hardware=a100", "--vs-config", "run.yaml", "--format", "json"
    )
    changed = {d["key"] for d in grpo.json()["changes"]}
    assert {"algorithm.advantage_fn", "algorithm.advantage_fn_args.mu"} <= changed, changed


def test_a_kl_penalty_takes_its_kind_and_coefficient(render):
    result, cfg = render(GRPO + "  kl_penalty_fn: low_var_kl\n  kl_penalty_fn_args:\n    kl_coef: 0.05\n")
    assert result.code == 0
    assert cfg["algorithm"]["kl_penalty_fn"] == "low_var_kl"
    assert cfg["algorithm"]["kl_penalty_fn_args"] == {"kl_coef": 0.05, "adaptive": False}


@pytest.mark.parametrize(
    "algorithm, args, where, message",
    [
        (
            "sapo",
            "    tau_pos: 2.0\n    tau_neg: 1.0\n",
            "6:3: algorithm.policy_loss_fn_args: value error",
            "tau_neg (1.0) must be >=",
        ),
        (
            "rec",
            "    weight: gspo_importance_sampling\n",
            "6:3: algorithm.policy_loss_fn_args: value error",
            "needs clip_mode 'gspo-one-side'",
        ),
        ("rec", "    clip_mode: both\n", "7:5: algorithm.policy_loss_fn_args.clip_mode", "input should be"),
        ("sppo", "    epsilon: 0\n", "7:5: algorithm.policy_loss_fn_args.epsilon", "greater than 0"),
        ("opmd", "    tua: 1.0\n", "7:5: algorithm.policy_loss_fn_args.tua", "did you mean 'tau'?"),
    ],
)
def test_each_new_losss_arguments_are_checked_where_written(cli, write, algorithm, args, where, message):
    text = GRPO + f"  algorithm_type: {algorithm}\n  policy_loss_fn_args:\n{args}"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2 and f"run.yaml:{where}" in result.err and message in result.err, result.err


def test_an_advantage_baseline_upstream_lacks_is_refused(cli, write):
    text = GRPO + "  algorithm_type: opmd\n  advantage_fn_args:\n    opmd_baseline: median\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2 and "algorithm.advantage_fn_args.opmd_baseline: input should be 'mean' or 'logavgexp'" in (
        result.err
    )


def test_an_upstream_argument_takes_only_upstreams_default(cli, write):
    text = GRPO + "  advantage_fn_args:\n    rank_penalty: 0.1\n  kl_loss_fn_args:\n    adaptive: true\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert (
        "run.yaml:6:5: algorithm.advantage_fn_args.rank_penalty: known Trinity-RFT argument, not supported by "
        "trinity yet: Rank-based reward correction" in result.err
    )
    assert (
        "run.yaml:8:5: algorithm.kl_loss_fn_args.adaptive: known Trinity-RFT argument, not supported by trinity yet: "
        "Adapt kl_coef" in result.err
    )
    assert "    allowed: False" in result.err


def test_upstreams_default_arguments_are_accepted_as_written(render):
    text = (
        GRPO + "  advantage_fn_args:\n    std_threshold: null\n    std_cal_level: group\n  kl_loss_fn_args:\n    "
        "adaptive: false\n    kl_coef: 0.01\n"
    )
    result, cfg = render(text)
    assert result.code == 0 and cfg["algorithm"]["kl_loss_fn_args"] == {"kl_coef": 0.01, "adaptive": False}


def test_a_policy_losss_own_loss_agg_mode_is_replaced_with_a_warning(render):
    result, cfg = render(
        GRPO + "  loss_agg_mode: seq-mean-token-mean\n  policy_loss_fn_args:\n    loss_agg_mode: token-mean\n"
    )
    assert result.code == 0 and cfg["algorithm"]["policy_loss_fn_args"]["loss_agg_mode"] == "seq-mean-token-mean"
    assert (
        "warning: run.yaml:7:5: algorithm.policy_loss_fn_args.loss_agg_mode: 'token-mean' is replaced by "
        "algorithm.loss_agg_mode='seq-mean-token-mean'" in result.err
    )


def test_a_loss_and_an_advantage_function_that_would_ignore_each_other_are_refused(cli, write):
    rl = cli("config", "validate", "-c", write("run.yaml", GRPO + "  advantage_fn: none\n"), "hardware=cpu")
    assert rl.code == 2
    assert "run.yaml:5:3: algorithm.advantage_fn: policy_loss_fn 'ppo' trains on advantages, and 'none'" in rl.err
    assert "allowed: grpo" in rl.err
    sft = MINIMAL + "mode: train\nalgorithm:\n  algorithm_type: sft\n  advantage_fn: grpo\n"
    ignored = cli("config", "validate", "-c", write("sft.yaml", sft), "hardware=cpu")
    assert ignored.code == 2 and "policy_loss_fn 'sft' reads no advantages: 'grpo' is ignored" in ignored.err
    assert "allowed: none" in ignored.err
    written = cli("config", "validate", "-c", write("loss.yaml", GRPO + "  policy_loss_fn: sft\n"), "hardware=cpu")
    assert written.code == 2  # the key you wrote is the one named, where you wrote it
    assert "loss.yaml:5:3: algorithm.policy_loss_fn: policy_loss_fn 'sft' reads no advantages" in written.err
    assert "allowed: ppo, gspo, cispo" in written.err


# --- distillation's teacher; RAFT's choice of rollouts ------------------------------------------------------------

DISTILL = GRPO + "  algorithm_type: {name}\n"


@pytest.mark.parametrize("name", ["on_policy_distill", "jsd"])
def test_distillation_needs_a_teacher_and_takes_upstreams_functions(cli, render, write, name):
    missing = cli("config", "validate", "-c", write("run.yaml", DISTILL.format(name=name)), "hardware=cpu")
    assert missing.code == 2
    where = f"run.yaml:5:3: model.teacher_model_path: advantage_fn '{name}' learns from a teacher model's log-probs"
    assert where in missing.err
    assert "hint: set model.teacher_model_path: PATH (Trinity-RFT's explorer.auxiliary_models[0]" in missing.err
    result, cfg = render(DISTILL.format(name=name), "+model.teacher_model_path=/models/teacher")
    assert result.code == 0, result.err
    algo = cfg["algorithm"]
    assert tuple(algo[k] for k in KINDS) == (name, "ppo", "none", "none", "none")  # upstream's preset
    want = (
        {"kl_coef": 1.0}
        if name == "on_policy_distill"
        else {"lambda_coef": 0.5, "kl_coef": 1.0, "temperature": 1.0, "chunk_size": None}
    )
    assert algo["advantage_fn_args"] == want


def test_a_teacher_that_nothing_reads_is_refused_and_jsd_arguments_are_checked(cli, write):
    unread = cli("config", "validate", "-c", write("run.yaml", GRPO), "hardware=cpu", "+model.teacher_model_path=/t")
    assert unread.code == 2 and "advantage_fn 'grpo' reads no teacher: '/t' would be loaded for nothing" in unread.err
    assert "allowed: unset, or an advantage_fn that reads one (on_policy_distill, jsd)" in unread.err
    text = DISTILL.format(name="jsd") + "  advantage_fn_args:\n    lambda_coef: 1.5\n"
    bad = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu", "+model.teacher_model_path=/t")
    assert (
        bad.code == 2
        and "run.yaml:7:5: algorithm.advantage_fn_args.lambda_coef: input should be less than or" in bad.err
    )


def test_raft_is_sft_on_the_chosen_rollouts_and_its_choice_needs_rollouts(cli, render, write, tmp_path):
    result, cfg = render(GRPO + "  algorithm_type: raft\n")
    assert result.code == 0, result.err
    algo = cfg["algorithm"]
    assert tuple(algo[k] for k in KINDS) == ("raft", "sft", "none", "none", "none")
    assert algo["advantage_fn_args"] == {"min_reward": None}
    rl = cli("config", "validate", "-c", write("rl.yaml", GRPO + "  advantage_fn: raft\n"), "hardware=cpu")
    assert rl.code == 2 and "policy_loss_fn 'ppo' trains on advantages, and 'raft' computes none" in rl.err
    (tmp_path / "d.jsonl").write_text("{}\n")
    sft = (
        MINIMAL
        + DATA_SET.format(path=tmp_path / "d.jsonl")
        + "algorithm:\n  algorithm_type: sft\n  advantage_fn: raft\n"
    )
    data = cli("config", "validate", "-c", write("sft.yaml", sft), "hardware=cpu")
    assert (
        data.code == 2 and "'raft' chooses among a task's rollouts by reward; algorithm 'sft' trains on a" in data.err
    )
    every = cli("config", "validate", "-c", write("all.yaml", GRPO + "  algorithm_type: raft\n  advantage_fn: none\n"))
    assert every.code == 0, every.err  # upstream's RAFT: the SFT loss on every rollout


# --- sample strategies: mixing SFT samples in, dropping stale experiences, GRPO's dynamic sampling ----------------

SFT_DATA = "buffer.trainer_input.auxiliary_buffers.sft_dataset"


@pytest.mark.parametrize("name", sorted(MIX_PRESETS))
def test_mix_reads_its_sft_data_set_and_its_batch_is_an_explore_step_plus_the_samples(cli, render, write, name):
    text = GRPO + f"  algorithm_type: {name}\n"
    missing = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert missing.code == 2
    assert f"run.yaml:5:3: {SFT_DATA}.path: sample_strategy 'mix' mixes samples of the SFT data set" in missing.err
    data = f"+{SFT_DATA}={{path: /d.jsonl}}"
    result, cfg = render(text, data, "buffer.batch_size=3")
    assert result.code == 0, result.err
    assert cfg["algorithm"]["sample_strategy"] == "mix" and cfg["algorithm"]["entropy_loss_fn"] == "mix"
    # 3 tasks x 4 rollouts = 12; half the batch are samples: 24 (Trinity-RFT rounds the samples up)
    assert cfg["buffer"]["train_batch_size"] == 24
    _, cfg = render(text, data, "buffer.batch_size=3", "+algorithm.sample_strategy_args.expert_data_ratio=0.2")
    assert cfg["buffer"]["train_batch_size"] == 15  # 15 - ceil(3) = 12
    bad = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu", data, "buffer.train_batch_size=20")
    assert bad.code == 2 and "20 splits into 10 SFT samples and 10 rollouts; an explore step makes 4" in bad.err
    assert "allowed: 8" in bad.err
    short = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu", data, "buffer.train_batch_size=6")
    assert short.code == 2 and "6 splits into 3 SFT samples and 3 rollouts; an explore step makes 4" in short.err


def test_mixing_needs_a_mixing_loss_and_a_data_set_nothing_reads_is_refused(cli, write):
    data = f"+{SFT_DATA}={{path: /d.jsonl}}"
    loss = cli("config", "validate", "-c", write("run.yaml", GRPO + "  sample_strategy: mix\n"), "hardware=cpu", data)
    assert loss.code == 2 and "sample_strategy 'mix' puts SFT samples in each batch; policy_loss_fn 'ppo'" in loss.err
    assert "allowed: mix, mix_chord" in loss.err
    strategy = cli("config", "validate", "-c", write("run.yaml", GRPO + "  policy_loss_fn: mix\n"), "hardware=cpu")
    assert strategy.code == 2 and "policy_loss_fn 'mix' trains SFT samples mixed into each batch" in strategy.err
    unread = cli("config", "validate", "-c", write("run.yaml", GRPO), "hardware=cpu", data)
    assert unread.code == 2 and f"{SFT_DATA}: no sample strategy reads 'sft_dataset'" in unread.err
    renamed = GRPO + "  algorithm_type: mix\n  sample_strategy_args:\n    sft_dataset_name: expert\n"
    other = cli("config", "validate", "-c", write("run.yaml", renamed), "hardware=cpu", data)
    assert other.code == 2 and "no sample strategy reads 'sft_dataset' (mix reads 'expert')" in other.err


def test_staleness_control_needs_a_store_that_can_skip_and_warmup_is_default(cli, render, write):
    text = GRPO + "  sample_strategy: staleness_control\n  sample_strategy_args:\n    max_staleness: 2\n"
    result, cfg = render(text)
    assert result.code == 0 and cfg["algorithm"]["sample_strategy_args"] == {"max_staleness": 2.0}
    file = cli(
        "config",
        "validate",
        "-c",
        write("run.yaml", text),
        "hardware=cpu",
        "+buffer.trainer_input.experience_buffer={name: exp, storage_type: file}",
    )
    assert file.code == 2 and "a 'file' experience buffer is read by position" in file.err
    result, cfg = render(GRPO + "  sample_strategy: warmup\n")
    assert result.code == 0 and cfg["algorithm"]["sample_strategy"] == "default"
    assert "algorithm.sample_strategy: 'warmup' is Trinity-RFT's deprecated name of 'default'" in result.err


def test_a_data_set_algorithm_reads_its_data_in_order(cli, write, tmp_path):
    (tmp_path / "d.jsonl").write_text("{}\n")
    text = MINIMAL + DATA_SET.format(path=tmp_path / "d.jsonl") + "algorithm:\n  algorithm_type: sft\n"
    text += "  sample_strategy: staleness_control\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2 and "algorithm 'sft' reads its data set in order" in result.err


def test_dynamic_sampling_refills_only_what_a_threshold_drops(cli, render, write):
    text = GRPO + "  advantage_fn_args:\n    std_threshold: 0.0\n    duplicate_experiences: true\n"
    result, cfg = render(text)
    assert result.code == 0 and cfg["algorithm"]["advantage_fn_args"]["std_threshold"] == 0.0
    text = GRPO + "  advantage_fn_args:\n    duplicate_experiences: true\n"
    bad = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert bad.code == 2 and "duplicate_experiences refills the groups std_threshold drops" in bad.err
