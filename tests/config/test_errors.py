"""Bad input: one clear report, exit code 2, with file:line:col, key, what is allowed and a hint."""

import pytest

from tests.conftest import MINIMAL
from trinity.errors import (
    ClusterError,
    ConfigError,
    FetchError,
    Issue,
    LockError,
    NodeError,
    PlacementError,
    error_of,
)

# The classic "billion laughs": 9 levels of 9-element lists, 9**8 (43 million) strings once expanded.
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi")
)

# (file text, extra CLI args, lines that must all appear in stderr)
CORPUS = {
    "top-level typo": (
        MINIMAL + "trainr:\n  save_interval: 1\n",
        [],
        ["error: run.yaml:3:1: trainr: unknown key", "hint: did you mean 'trainer'?"],
    ),
    "nested typo": (
        MINIMAL + "trainer:\n  save_intervall: 5\n",
        [],
        [
            "error: run.yaml:4:3: trainer.save_intervall: unknown key",
            "allowed: name, trainer_type,",
            "hint: did you mean 'save_interval'?",
        ],
    ),
    "typo inside a list item": (
        MINIMAL + "buffer:\n  explorer_input:\n    eval_tasksets:\n      - name: x\n        formt: {}\n",
        [],
        [
            "error: run.yaml:7:9: buffer.explorer_input.eval_tasksets[0].formt: unknown key",
            "hint: did you mean 'format'?",
        ],
    ),
    "wrong type": (
        MINIMAL + "trainer:\n  save_interval: often\n",
        [],
        [
            "error: run.yaml:4:3: trainer.save_interval: input should be a valid integer, unable to parse string as "
            "an integer (got 'often')"
        ],
    ),
    "quoted number where a whole number is wanted": (
        MINIMAL + "trainer:\n  save_interval: '1.5'\n",
        [],
        [
            "error: run.yaml:4:3: trainer.save_interval: input should be a valid integer, unable to parse string as "
            "an integer (got '1.5')",
            "hint: write the number without quotes",
        ],
    ),
    "quoted number where a number is wanted": (
        MINIMAL + "trainer:\n  grad_clip: '1.0x'\n",
        [],
        ["error: run.yaml:4:3: trainer.grad_clip: input should be a valid number"],
    ),
    "out of range": (
        MINIMAL + "explorer:\n  rollout_model:\n    gpu_memory_utilization: 1.5\n",
        [],
        [
            "error: run.yaml:5:5: explorer.rollout_model.gpu_memory_utilization: input should be less than or equal "
            "to 1 (got 1.5)",
            "allowed: <= 1",
        ],
    ),
    "value not among the allowed": (
        MINIMAL + "mode: bothh\n",
        [],
        [
            "error: run.yaml:3:1: mode: input should be 'both', 'explore', 'train', 'bench', 'serve' or 'colocate' "
            "(got 'bothh')",
            "hint: did you mean 'both'?",
        ],
    ),
    "env value that is not a string": (
        MINIMAL + "env:\n  trainer:\n    OMP_NUM_THREADS: 4\n",
        [],
        [
            "error: run.yaml:5:5: env.trainer.OMP_NUM_THREADS: input should be a valid string (got 4)",
            "hint: quote it: '4'",
        ],
    ),
    "missing env var without default": (
        MINIMAL + "buffer:\n  trainer_input:\n    experience_buffer:\n      name: sft\n      path: "
        "${oc.env:TRINITY_TEST_UNSET_VAR}\n",
        [],
        [
            "error: run.yaml:7:7: buffer.trainer_input.experience_buffer.path: environment variable "
            "TRINITY_TEST_UNSET_VAR is not set and has no default",
            "hint: export TRINITY_TEST_UNSET_VAR=... before running, or give a default: "
            "${oc.env:TRINITY_TEST_UNSET_VAR,DEFAULT}",
        ],
    ),
    "??? left unset": (
        "model:\n  model_path: ???\n",
        [],
        ["error: run.yaml:2:3: model.model_path: is '???' (a value you must supply) and no layer sets it"],
    ),
    "required key absent": (
        "project: p\n",
        [],
        [
            "error: run.yaml: model.model_path: required, and no layer sets it",
            "hint: set model.model_path in your run config or as model.model_path=VALUE",
        ],
    ),
    "hardware written in the run file": (
        MINIMAL + "hardware:\n  devices_per_node: 4\n",
        [],
        [
            "error: run.yaml:3:1: hardware: hardware facts come from a hardware profile, not from the run config",
            "extends: NAME",
        ],
    ),
    "hardware fact overridden on the command line": (
        MINIMAL,
        ["hardware.devices_per_node=4"],
        [
            "error: override 'hardware.devices_per_node=4': hardware.devices_per_node: hardware facts come from a "
            "hardware profile"
        ],
    ),
    "unknown profile": (
        MINIMAL,
        ["+hardware=ascend910"],
        [
            "error: override '+hardware=ascend910': hardware: unknown hardware profile 'ascend910'",
            "allowed: a100, a100_40g, ascend910b, ascend910b4, ascend910c, cpu, h100, h200",
            "hint: did you mean 'ascend910b' or 'ascend910c'?",
        ],
    ),
    "unknown key from an override": (
        MINIMAL,
        ["trainer.sav=1"],
        ["error: override 'trainer.sav=1': trainer.sav: unknown key", "hint: did you mean 'save_interval'?"],
    ),
    "override that does not parse": (
        MINIMAL,
        ["trainer.save_interval=[1,"],
        [
            "error: override 'trainer.save_interval=[1,': cannot parse override: no viable alternative at input '[1,'",
            "hint: Hydra override grammar",
        ],
    ),
    "sweep override": (
        MINIMAL,
        ["trainer.save_interval=1,2"],
        [
            "error: override 'trainer.save_interval=1,2': trainer.save_interval: sweeps (a=1,2 or range/choice) are "
            "not supported"
        ],
    ),
    "list index out of range": (
        MINIMAL + "buffer:\n  explorer_input:\n    eval_tasksets:\n      - name: x\n",
        ["buffer.explorer_input.eval_tasksets.3.name=y"],
        [
            "error: override 'buffer.explorer_input.eval_tasksets.3.name=y': "
            "buffer.explorer_input.eval_tasksets.3.name: '3' is not an item of a list of 1",
            "allowed: 0..0",
        ],
    ),
    "deleting what is not there": (
        MINIMAL,
        ["~trainer.nothing_here"],
        ["error: override '~trainer.nothing_here': trainer.nothing_here: cannot delete a key that is not set"],
    ),
    "yaml syntax error": (
        MINIMAL + "trainer:\n  save_interval: [1,\n  grad_clip: 1\n",
        [],
        ["error: run.yaml:6:1: YAML syntax error:", "hint: check indentation, colons, brackets and quotes"],
    ),
    "duplicate key": (
        MINIMAL + "name: a\nname: b\n",
        [],
        [
            "error: run.yaml:4:1: YAML syntax error: while constructing a mapping found duplicate key name",
            "hint: keep one of them",
        ],
    ),
    "not a mapping": (
        "- a\n- b\n",
        [],
        ["error: run.yaml:1:1: run config must be a mapping of keys, not a list"],
    ),
    "alias bomb (billion laughs)": (
        MINIMAL + BOMB,
        [],
        [
            "error: run.yaml:7:8: YAML aliases expand to more than 10,000 nodes at *d (an alias bomb?)",
            "hint: write the values out",
        ],
    ),
    "recursive alias": (
        MINIMAL + "a: &x [*x]\n",
        [],
        ["error: run.yaml:3:8: YAML alias *x refers to the collection that contains it (a recursive alias)"],
    ),
    "recursive alias in a mapping": (
        MINIMAL + "trainer: &t\n  save_interval: 1\n  again: *t\n",
        [],
        ["error: run.yaml:5:10: YAML alias *t refers to the collection that contains it (a recursive alias)"],
    ),
    "nesting deeper than any config": (
        MINIMAL + "x: " + "[" * 60 + "]" * 60 + "\n",
        [],
        ["error: run.yaml:3:53: YAML nested more than 50 levels deep"],
    ),
    "unknown section from an override": (
        MINIMAL,
        ["nonexist.key=3"],
        ["error: override 'nonexist.key=3': nonexist: unknown key", "allowed: mode, project,"],
    ),
    "misspelled section from an override": (
        MINIMAL,
        ["trainr.save_interval=3"],
        ["error: override 'trainr.save_interval=3': trainr: unknown key", "hint: did you mean 'trainer'?"],
    ),
    "unknown section added by an override's mapping": (
        MINIMAL,
        ["+trainr={save_interval: 3}"],
        ["error: override '+trainr={save_interval: 3}': trainr: unknown key", "hint: did you mean 'trainer'?"],
    ),
    "stage error is located in the stage": (
        MINIMAL + "stages:\n  - stage_name: warmup\n    mode: train\n    trainer:\n      save_intervall: 3\n",
        [],
        [
            "error: run.yaml:7:7: trainer.save_intervall: unknown key (in stage 'warmup')",
            "hint: did you mean 'save_interval'?",
        ],
    ),
}


@pytest.mark.parametrize("case", list(CORPUS))
def test_bad_input_is_reported_precisely(cli, write, case):
    text, args, expected = CORPUS[case]
    path = write("run.yaml", text)
    result = cli("config", "validate", "-c", path, *args)
    assert result.code == 2, result.err
    assert result.out == ""
    assert "Traceback" not in result.err
    if case == "wrong type":  # 'often' is no number: the unquote hint would mislead
        assert "write the number without quotes" not in result.err
    for line in expected:
        assert line in result.err, f"{line!r} not in:\n{result.err}"


def test_every_problem_is_reported_at_once(cli, write):
    path = write(
        "run.yaml",
        MINIMAL
        + "mode: bothh\ntrainer:\n  save_intervall: 5\n  grad_clip: x\nname: ${oc.env:TRINITY_TEST_UNSET_VAR}\n",
    )
    result = cli("config", "validate", "-c", path)
    assert result.err.startswith("trinity: 4 problems in the config\n")
    lines = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert [line.split(": ")[1] for line in lines] == ["run.yaml:3:1", "run.yaml:5:3", "run.yaml:6:3", "run.yaml:7:1"]


def test_missing_config_file(cli, tmp_path):
    result = cli("config", "render", "-c", tmp_path / "nope.yaml")
    assert result.code == 2 and "nope.yaml: run config not found" in result.err


def test_usage_errors_exit_2(cli):
    assert cli("config", "render", "--no-such-flag").code == 2
    assert cli("config", "render", "--format", "xml").code == 2


KINDS = [
    (ConfigError, "trinity: 1 problem in the config", "trinity: 2 problems in the config"),
    (PlacementError, "trinity: the cluster cannot place this run", "trinity: the cluster cannot place this run (2 "),
    (ClusterError, "trinity: cannot reach the Ray cluster", "trinity: cannot reach the Ray cluster (2 problems)"),
    (LockError, "trinity: the run directory is in use", "trinity: the run directory is in use (2 problems)"),
    (
        NodeError,
        "trinity: this node's software stack cannot run this profile",
        "trinity: this node's software stack cannot run this profile (2 problems)",
    ),
    (
        FetchError,
        "trinity: cannot fetch what the run names on the hub",
        "trinity: cannot fetch what the run names on the hub (2 problems)",
    ),
]


@pytest.mark.parametrize(("kind", "one", "two"), KINDS, ids=[k.__name__ for k, _, _ in KINDS])
def test_each_kind_of_problem_has_its_own_headline(kind, one, two):
    # every kind is a ConfigError (the CLI's exit code 2, one report, no traceback), each saying what kind it is
    note = Issue("a note", severity="note")
    single = kind([Issue("it went wrong", key="k"), note])
    assert isinstance(single, ConfigError) and single.report().splitlines()[0] == one
    assert single.report().splitlines()[1:] == ["error: k: it went wrong", "note: a note"]
    assert str(single) == single.report()
    assert kind([Issue("a"), Issue("b")]).report().startswith(two)


def test_a_node_or_fetch_error_only_when_every_error_is_of_that_kind():
    stack = Issue("no CANN toolkit found here", key="hardware", source="this node, for ascend910b (hardware=auto)")
    config = Issue("unknown key", key="trainr", source="run.yaml:3:1")
    warning = Issue("slow", key="x", severity="warning")
    assert type(error_of([warning], [stack])) is NodeError
    assert type(error_of([config], [stack])) is ConfigError  # the config's problems come first
    assert type(error_of([config])) is ConfigError
    assert type(error_of([warning])) is ConfigError
    assert type(error_of([warning], fetching=[config])) is FetchError
    assert type(error_of([], [stack], [config])) is ConfigError  # two kinds at once: the config's headline
