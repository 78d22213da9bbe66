"""algorithm.rollout_correction through `trinity config validate/render/diff` (derive/rollout_correction.py): written
natively or where verl reads it (trainer.trainer_config.algorithm.rollout_correction), accepted on a100 and
ascend910b, its bypass_mode setting algorithm.bypass_old_logprobs; each value trinity cannot run refused at its
file:line:col with what is allowed."""

import json

import jsonschema
import pytest
import yaml

from tests.conftest import MINIMAL, REPO

NATIVE = MINIMAL + (
    "algorithm:\n"
    "  rollout_correction:\n"
    "    rollout_is: token\n"
    "    rollout_is_threshold: 3.0\n"
    "    rollout_rs: token_k1,seq_mean_k3\n"
    "    rollout_rs_threshold: 0.5_2.0,0.01\n"
    "    bypass_mode: false\n"
)
VERL = MINIMAL + (
    "trainer:\n"
    "  trainer_config:\n"
    "    algorithm:\n"
    "      rollout_correction:\n"
    "        rollout_is: token\n"
    "        rollout_is_threshold: 3.0\n"
    "        rollout_rs: token_k1,seq_mean_k3\n"
    "        rollout_rs_threshold: 0.5_2.0,0.01\n"
    "        bypass_mode: false\n"
)
SECTION = {
    "rollout_is": "token",
    "rollout_is_threshold": 3.0,
    "rollout_is_batch_normalize": False,
    "rollout_rs": "token_k1,seq_mean_k3",
    "rollout_rs_threshold": "0.5_2.0,0.01",
    "bypass_mode": False,
    "loss_type": "ppo_clip",
}


@pytest.mark.parametrize("profile", ["a100", "ascend910b"])
@pytest.mark.parametrize("form", ["native", "verl"])
def test_the_section_is_accepted_on_both_profiles_and_bypass_mode_is_bypass_old_logprobs(cli, write, profile, form):
    path = write("run.yaml", NATIVE if form == "native" else VERL)
    result = cli("config", "validate", "-c", path, f"hardware={profile}", "--format", "json")
    assert result.code == 0, result.err
    notes = {i["key"]: i for i in result.json()["issues"] if i["severity"] == "note"}
    bypass = notes["algorithm.rollout_correction.bypass_mode"]
    assert bypass["source"] == ("run.yaml:9:5" if form == "native" else "run.yaml:11:9")
    assert (
        "verl's bypass_mode is trinity's algorithm.bypass_old_logprobs: algorithm.bypass_old_logprobs=false"
        in (bypass["message"])
    )
    if form == "verl":
        passthrough = notes["trainer.trainer_config.algorithm.rollout_correction"]
        assert passthrough["message"].startswith("verl's algorithm.rollout_correction is trinity's")
    cfg = yaml.safe_load(cli("config", "render", "-c", path, f"hardware={profile}").out)
    assert cfg["algorithm"]["rollout_correction"] == SECTION
    assert cfg["algorithm"]["bypass_old_logprobs"] is False and cfg["trainer"]["trainer_config"] == {}


def test_trinity_rfts_clipb_section_recomputes_the_old_log_probs_and_logs_the_metrics(render):
    """upstream's examples/entropy/clipb.yaml writes `bypass_mode: false` alone: verl's section with its defaults."""
    text = "trainer:\n  trainer_config:\n    algorithm:\n      rollout_correction:\n        bypass_mode: false\n"
    result, cfg = render(text, "hardware=a100")
    assert result.code == 0, result.err
    assert cfg["algorithm"]["rollout_correction"] == SECTION | {
        "rollout_is": None,
        "rollout_is_threshold": 2.0,
        "rollout_rs": None,
        "rollout_rs_threshold": None,
    }
    assert cfg["algorithm"]["bypass_old_logprobs"] is False


def test_the_default_is_no_correction_and_null_in_verls_place_is_the_same(render):
    _, cfg = render("", "hardware=a100")
    assert cfg["algorithm"]["rollout_correction"] is None and cfg["algorithm"]["bypass_old_logprobs"] is True
    text = "trainer:\n  trainer_config:\n    algorithm:\n      rollout_correction: null\n"
    result, cfg = render(text, "hardware=a100")
    assert result.code == 0 and cfg["algorithm"]["rollout_correction"] is None
    assert "trainer.trainer_config.algorithm.rollout_correction: null is no rollout correction" in result.err


def section(*lines: str, extra: str = "") -> str:
    """MINIMAL with `extra` (top-level YAML) and algorithm.rollout_correction of `lines`: its first line is line 5."""
    body = "".join(f"    {line}\n" for line in lines)
    return MINIMAL + extra + "algorithm:\n  rollout_correction:" + ("\n" + body if body else " {}\n")


DECOUPLED = "bypass_mode: false"
# (config, profile) -> the error: at its line and column, the key, what it says, and what is allowed or the hint
REFUSALS = {
    "is_threshold": (
        section("rollout_is: token", "rollout_is_threshold: 3.0_2.0", DECOUPLED),
        "run.yaml:6:5: algorithm.rollout_correction.rollout_is_threshold: '3.0_2.0': the lower bound is above the "
        "upper",
        "allowed: e.g. 2.0 or '0.5_5.0'",
    ),
    "rs_option": (
        section("rollout_rs: token_k1,seq_max_k1", "rollout_rs_threshold: 2.0", DECOUPLED),
        "run.yaml:5:5: algorithm.rollout_correction.rollout_rs: 'seq_max_k1' is not a rejection option",
        "allowed: token_k1, token_k2, token_k3, seq_sum_k1",
    ),
    "rs_threshold": (
        section("rollout_rs: seq_mean_k3", DECOUPLED),
        "algorithm.rollout_correction.rollout_rs_threshold: rejection sampling needs a threshold",
        "allowed: e.g. '0.5_2.0' (k1) or 0.01 (k2, k3)",
    ),
    "rs_threshold_count": (
        section("rollout_rs: token_k2,token_k3,seq_sum_k1", "rollout_rs_threshold: 0.1,0.2", DECOUPLED),
        "run.yaml:6:5: algorithm.rollout_correction.rollout_rs_threshold: '0.1,0.2' gives 2 thresholds for 3 options",
        "give one, or one each",
    ),
    "is_level": (
        section("rollout_is: tokens", DECOUPLED),
        "run.yaml:5:5: algorithm.rollout_correction.rollout_is: input should be 'token' or 'sequence'",
        "allowed: 'token' or 'sequence'",
    ),
    "bypass": (
        section("rollout_is: sequence"),
        "run.yaml:5:5: algorithm.rollout_correction.rollout_is: 'sequence' needs the trainer's recomputed old "
        "log-probs (verl's decoupled mode), and algorithm.bypass_old_logprobs=true",
        "hint: set algorithm.rollout_correction.bypass_mode: false (trinity's algorithm.bypass_old_logprobs: false)",
    ),
    "bypass_rs": (
        section("rollout_rs: token_k3", "rollout_rs_threshold: 0.1", "bypass_mode: true"),
        "run.yaml:5:5: algorithm.rollout_correction.rollout_rs: 'token_k3' needs the trainer's recomputed old "
        "log-probs",
        "allowed: algorithm.rollout_correction.bypass_mode: false",
    ),
    "reinforce": (
        section("loss_type: reinforce"),
        "run.yaml:5:5: algorithm.rollout_correction.loss_type: 'reinforce' is not run by this version of trinity",
        "allowed: 'ppo_clip'",
    ),
    "own_loss": (
        section("rollout_is: token", DECOUPLED, extra="algorithm:\n  policy_loss_fn: topr\n").replace(
            "algorithm:\n  rollout_correction:", "  rollout_correction:"
        ),
        "run.yaml:6:5: algorithm.rollout_correction.rollout_is: 'token': policy_loss_fn 'topr' does not apply "
        "importance-sampling weights",
        "allowed: policy_loss_fn ppo, gspo, cispo",
    ),
    "data_set": (
        section(DECOUPLED).replace("algorithm:\n", "algorithm:\n  algorithm_type: sft\n"),
        "run.yaml:5:3: algorithm.rollout_correction: algorithm 'sft' trains on a data set: rollout correction "
        "compares the rollout engine's log-probs",
        "hint: remove algorithm.rollout_correction",
    ),
    "contradiction": (
        section(DECOUPLED).replace("algorithm:\n", "algorithm:\n  bypass_old_logprobs: true\n"),
        "run.yaml:6:5: algorithm.rollout_correction.bypass_mode: false contradicts algorithm.bypass_old_logprobs=true "
        "(run.yaml:4:3): verl's bypass_mode is that setting",
        "allowed: true",
    ),
    "both_places": (
        section("rollout_is: token", DECOUPLED)
        + "trainer:\n  trainer_config:\n    algorithm:\n      rollout_correction: {rollout_is: sequence}\n",
        'trainer.trainer_config.algorithm.rollout_correction.rollout_is: "sequence" contradicts '
        'algorithm.rollout_correction.rollout_is="token" (run.yaml:5:5)',
        "hint: write only algorithm.rollout_correction.rollout_is",
    ),
    "verl_algorithm_keys": (
        MINIMAL + "trainer:\n  trainer_config:\n    algorithm:\n      gamma: 0.99\n      rollout_correction: {}\n",
        "run.yaml:5:5: trainer.trainer_config.algorithm: not a verl section trinity passes on: trinity passes on "
        "verl's algorithm.rollout_correction alone",
        "algorithm.rollout_correction",
    ),
}


@pytest.mark.parametrize("name", REFUSALS)
@pytest.mark.parametrize("profile", ["a100", "ascend910b"])
def test_what_trinity_cannot_run_is_refused_where_it_is_written(cli, write, name, profile):
    text, error, said = REFUSALS[name]
    result = cli("config", "validate", "-c", write("run.yaml", text), f"hardware={profile}")
    assert result.code == 2, result.err
    block = result.err.split(error, 1)
    assert len(block) == 2, result.err
    assert said in block[1].split("\nerror", 1)[0], result.err


def test_an_engine_whose_log_probs_are_the_logits_own_with_shaped_sampling_is_refused_on_ascend(cli, write):
    """vllm on ascend910b returns the logits' own log-probs (raw_logprobs_engines): with a training temperature of 0.7
    they are not of the distribution the tokens were drawn from; the trainer's would be."""
    text = section("rollout_is: token", DECOUPLED, extra="explorer:\n  rollout_model:\n    engine_type: vllm\n")
    text += (
        "buffer:\n  explorer_input:\n    taskset: {path: /data/t, rollout_args: {temperature: 0.7}}\n"
        "    default_workflow_type: math_workflow\n"
    )
    ascend = cli("config", "render", "-c", write("run.yaml", text), "hardware=ascend910b")
    assert ascend.code == 2 and (
        "algorithm.rollout_correction: 'vllm' returns the logits' own log-probs on ascend910b" in ascend.err
    )
    a100 = cli("config", "render", "-c", write("run.yaml", text), "hardware=a100")
    assert a100.code == 0 and "returns the logits' own" not in a100.err


def test_what_changes_nothing_is_noted(render):
    metrics_only, _ = render(section(), "hardware=a100")  # bypass (the default) and neither IS nor rejection
    assert metrics_only.code == 0
    assert "run.yaml:4:3: algorithm.rollout_correction: computes nothing with algorithm.bypass_old_logprobs=true" in (
        metrics_only.err
    )
    decoupled, _ = render(section(DECOUPLED, "loss_type: reinforce"), "hardware=a100")
    assert decoupled.code == 0
    assert "algorithm.rollout_correction.loss_type: changes nothing: verl reads loss_type in bypass mode only" in (
        decoupled.err
    )
    explore, _ = render(section("rollout_is: token", DECOUPLED), "hardware=a100", "mode=explore")
    assert explore.code == 0 and "algorithm.rollout_correction: changes nothing in mode 'explore'" in explore.err


def test_the_keys_are_explained_diffed_and_in_the_json_schema(cli, write):
    path = write("run.yaml", VERL)
    keys = ("algorithm.rollout_correction.rollout_is", "algorithm.bypass_old_logprobs")
    explained = cli("config", "render", "-c", path, "hardware=a100", "--explain", *keys)
    assert explained.code == 0
    assert "algorithm.rollout_correction.rollout_is = 'token'" in explained.out
    assert "algorithm.bypass_old_logprobs = False" in explained.out and "run.yaml:11:9" in explained.out
    diff = cli("config", "diff", "-c", write("base.yaml", MINIMAL), "hardware=a100", "--vs-config", path)
    assert diff.code == 1
    assert "~ algorithm.bypass_old_logprobs: True -> False" in diff.out
    assert "algorithm.rollout_correction" in diff.out
    native = write("native.yaml", NATIVE)
    changed = cli(
        "config", "diff", "-c", native, "hardware=a100", "--vs", "algorithm.rollout_correction.rollout_is=sequence"
    )
    assert changed.code == 1 and "~ algorithm.rollout_correction.rollout_is: 'token' -> 'sequence'" in changed.out
    schema = json.loads((REPO / "schemas" / "run-config.schema.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    assert not list(validator.iter_errors(yaml.safe_load(NATIVE)))
    bad = yaml.safe_load(NATIVE.replace("rollout_is: token", "rollout_is: tokens"))
    assert [e.message for e in validator.iter_errors(bad)]
