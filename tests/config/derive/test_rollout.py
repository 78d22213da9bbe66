"""Rules of trinity/config/derive/rollout.py, each through `trinity config render/validate`: auxiliary models."""

from tests.conftest import MINIMAL


def test_auxiliary_models_are_refused_and_take_no_devices(cli, write):
    text = MINIMAL + "explorer:\n  auxiliary_models:\n    - engine_num: 1\n      tensor_parallel_size: 2\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=a100")
    assert result.code == 2 and result.err.startswith("trinity: 1 problem in the config\n")
    assert (
        "error: run.yaml:4:3: explorer.auxiliary_models: auxiliary models (judges, reward models) are not run by "
        "this version of trinity: no workflow calls them" in result.err
    )
    assert "allowed: [] (none)\n    hint: remove explorer.auxiliary_models" in result.err
    assert (
        cli(
            "config",
            "validate",
            "-c",
            write("run.yaml", MINIMAL + "explorer:\n  auxiliary_models: []\n"),
            "hardware=a100",
        ).code
        == 0
    )
