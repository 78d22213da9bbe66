"""The rollout-engine registry (trinity/config/engines.py): its names, an engine added as one entry plus its own
module (here, this test module), and every consumer reading the entry of the engine a run uses."""

import dataclasses
import os
import typing
from unittest import mock

import pytest

from tests.conftest import REFERENCE
from trinity.config import engines
from trinity.config.compose import Request
from trinity.config.memory.plan import ESTIMATES, plan_memory
from trinity.config.resolve import resolve
from trinity.config.schema.explorer import InferenceModelConfig
from trinity.config.schema.hardware import HardwareFacts
from trinity.errors import ConfigError
from trinity.runtime.rollout import engine_class
from trinity.runtime.rollout.base import RolloutEngine
from trinity.runtime.rollout.samples import Sample
from trinity.runtime.verl.config import overrides
from trinity.utils.imports import import_path

PREFLIGHT_CALLS: list[list] = []


class TinyEngine(RolloutEngine):
    """A test-only engine type: every response is the prompt's last token."""

    def _load(self, model_path: str) -> None:
        self.loaded = model_path

    def _generate(self, requests):
        return [[Sample([prompt[-1]], [0.0], "", stopped=False) for _ in range(n)] for prompt, n, _ in requests]

    def _params(self) -> dict:
        return {}


def tiny_preflight(configs: list, resolved) -> list:
    """The tiny engine's own preflight check: records what it was given and names one problem."""
    from trinity.errors import Issue

    PREFLIGHT_CALLS.append(configs)
    return [Issue("the tiny engine was checked", key="explorer.rollout_model.engine_type")]


TINY = engines.EngineEntry(
    "tiny",
    label="Tiny",
    runtime=f"{__name__}:TinyEngine",  # this module, as pytest imported it
    needs="json",
    parallel=True,
    sleeps=True,
    sleep_is_hardware_fact=False,
    memory="budget",
    kv_cache=False,
    engine_args=False,
    verl_name="hf",
    preflight=f"{__name__}:tiny_preflight",
)


def resolved(profile="a100", *overrides):
    return resolve(Request(REFERENCE, (f"hardware={profile}", *overrides)))


def running(resolved_config, engine_type):
    """The resolved run with its engine type replaced (a test-only type is in no schema Literal, so not validated)."""
    config = resolved_config.config
    rollout = config.explorer.rollout_model.model_copy(update={"engine_type": engine_type})
    config = config.model_copy(update={"explorer": config.explorer.model_copy(update={"rollout_model": rollout})})
    return dataclasses.replace(resolved_config, config=config, stages=(), stage_provenance=())


def preflight_issues(resolved_config) -> list[str]:
    from trinity.runtime.driver import preflight

    with mock.patch.dict(os.environ), pytest.raises(ConfigError) as err:
        preflight.check(resolved_config)
    return [i.render() for i in err.value.issues]


@pytest.fixture
def change(monkeypatch):
    """Replace attributes of one engine's entry for the test."""

    def _change(name, **attributes):
        monkeypatch.setitem(engines.ENGINES, name, dataclasses.replace(engines.ENGINES[name], **attributes))

    return _change


# --- the registry -------------------------------------------------------------------------------------------------


def test_an_unknown_engine_type_names_the_ones_there_are():
    with pytest.raises(ValueError, match=r"engine_type 'sglang' has no engine .* \(engines: vllm, transformers\)"):
        engines.engine("sglang")
    with pytest.raises(ValueError, match="engines: vllm, transformers"):
        engine_class("sglang")


def test_every_engine_type_the_schema_accepts_has_an_entry():
    accepted = typing.get_args(InferenceModelConfig.model_fields["engine_type"].annotation)
    assert accepted == tuple(engines.ENGINES) + tuple(engines.ALIASES)  # and Trinity-RFT's names of them
    assert all(name in engines.ENGINES for name, _ in engines.ALIASES.values())
    facts = HardwareFacts.model_fields["rollout_engines"]
    assert typing.get_args(typing.get_args(facts.annotation)[0]) == tuple(engines.ENGINES)
    assert facts.default_factory() == list(engines.ENGINES)


@pytest.mark.parametrize("entry", list(engines.ENGINES.values()), ids=lambda e: e.name)
def test_each_entry_names_a_runtime_class_and_a_check_that_exist(entry):
    assert entry.sleeps or not entry.sleep_is_hardware_fact
    assert entry.memory is None or entry.memory in ESTIMATES
    module, _, name = entry.runtime.partition(":")
    assert module == f"trinity.runtime.rollout.{entry.name}_engine" and name  # its own module, imported by the runtime
    if entry.name == "transformers":  # vLLM's module is imported by tests/runtime/rollout/test_vllm_engine.py
        assert issubclass(engine_class(entry.name), RolloutEngine)
    assert entry.preflight is None or callable(import_path(entry.preflight, entry.name))


# --- adding an engine: one entry plus its module ------------------------------------------------------------------


def test_a_new_engine_is_found_by_the_runtime_preflight_the_memory_plan_and_verl(monkeypatch):
    run = running(resolved("a100"), "tiny")  # resolved first: a test-only entry is in no profile's rollout_engines
    monkeypatch.setitem(engines.ENGINES, "tiny", TINY)
    PREFLIGHT_CALLS.clear()
    assert engine_class("tiny") is TinyEngine
    assert any("the tiny engine was checked" in i for i in preflight_issues(run))
    assert PREFLIGHT_CALLS == [[run.config]]
    subjects = [c.subject for c in plan_memory(run.config).checks]
    assert "Tiny engine (Qwen/Qwen2.5-1.5B-Instruct, 1 device per engine)" in subjects
    assert "actor_rollout_ref.rollout.name=hf" in overrides(run.config, "/models/m", 1)


def test_the_new_engine_generates_through_the_base_class():
    import asyncio

    from trinity.runtime.rollout.samples import Sampling

    engine = TinyEngine(config=resolved("a100").config, index=0, name="rollout.engine0", role="rollout")
    info = asyncio.run(engine.setup("/models/m", 3))
    version, samples = asyncio.run(engine.generate([5, 7], 2, Sampling()))
    assert info["weight_version"] == 3 and version == 3 and [s.response_ids for s in samples] == [[7], [7]]


def test_an_engine_without_a_check_of_its_own_has_its_package_looked_for(monkeypatch):
    run = running(resolved("a100"), "tiny")
    monkeypatch.setitem(engines.ENGINES, "tiny", dataclasses.replace(TINY, preflight=None, needs="trinity_no_such_pkg"))
    issues = preflight_issues(run)
    assert any("engine type 'tiny' needs the trinity_no_such_pkg package" in i for i in issues)


def test_an_engine_without_a_memory_estimate_is_not_checked(monkeypatch):
    run = running(resolved("a100"), "tiny")
    monkeypatch.setitem(engines.ENGINES, "tiny", dataclasses.replace(TINY, memory=None))
    assert [c.role for c in plan_memory(run.config).checks] == ["trainer"]


# --- every consumer reads the entry -------------------------------------------------------------------------------


def test_parallel_decides_whether_one_engine_spans_devices(change):
    tp2 = ("explorer.rollout_model.tensor_parallel_size=2", "explorer.rollout_model.engine_num=2")
    with pytest.raises(ConfigError, match="one transformers engine drives 1 device; TP x PP x DP = 2"):
        resolved("cpu", *tp2)
    change("transformers", parallel=True)
    assert resolved("cpu", *tp2).config.cluster.rollout_gpu_num == 4


def test_sleeps_decides_whether_an_engine_may_share_devices(change):
    resolved("cpu", "mode=colocate")
    change("transformers", sleeps=False)
    with pytest.raises(ConfigError, match="mode 'colocate' needs an engine that sleeps .* 'transformers' never sleeps"):
        resolved("cpu", "mode=colocate")


def test_a_sleep_that_is_a_hardware_fact_follows_the_profile(change):
    vllm = ("mode=colocate", "explorer.rollout_model.engine_type=vllm")
    with pytest.raises(ConfigError, match="needs vLLM's sleep mode, which cpu lacks"):
        resolved("cpu", *vllm)
    change("vllm", sleep_is_hardware_fact=False)
    assert resolved("cpu", *vllm).config.mode == "colocate"


def test_kv_cache_decides_who_takes_a_kv_cache_size(change):
    size = "explorer.rollout_model.kv_cache_mib=512"
    with pytest.raises(ConfigError, match="a KV cache size is vLLM's, but the engine is 'transformers'"):
        resolved("cpu", size)
    change("transformers", kv_cache=True)
    assert resolved("cpu", size).config.explorer.rollout_model.kv_cache_mib == 512


def test_memory_decides_which_engines_are_estimated(change):
    config = resolved("a100").config
    assert "explorer.rollout_model" in [c.role for c in plan_memory(config).checks]
    change("vllm", memory=None)
    assert "explorer.rollout_model" not in [c.role for c in plan_memory(config).checks]


def test_memory_decides_where_the_utilization_ceiling_applies(change):
    high = ("explorer.rollout_model.engine_type=vllm", "explorer.rollout_model.gpu_memory_utilization=0.9")
    assert any(i.key.endswith("gpu_memory_utilization") for i in resolved("cpu", *high).issues)  # above cpu's 0.5
    change("vllm", memory=None)
    assert not any(i.key.endswith("gpu_memory_utilization") for i in resolved("cpu", *high).issues)


def test_engine_args_decides_who_takes_extra_engine_args(change, demo_assets, monkeypatch, tmp_path):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    extra = ("+explorer.rollout_model.extra_engine_args={max_num_seqs: 64}", f"model.model_path={tmp_path}")
    run = resolve(Request(None, ("hardware=cpu", *extra)))  # no model there: preflight always names a problem
    refusal = "vLLM engine arguments, but the engine is 'transformers'"
    assert any(refusal in i for i in preflight_issues(run))
    change("transformers", engine_args=True)
    assert not any("engine arguments, but" in i for i in preflight_issues(run))


def test_the_label_names_the_engine_in_messages(change, demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    change("vllm", label="vLLM-next")
    run = resolve(Request(None, ("hardware=cpu", "+explorer.rollout_model.extra_engine_args={max_num_seqs: 64}")))
    assert any("vLLM-next engine arguments, but the engine is 'transformers'" in i for i in preflight_issues(run))
    subjects = [c.subject for c in plan_memory(resolved("a100").config).checks]
    assert "vLLM-next engine (Qwen/Qwen2.5-1.5B-Instruct, 1 device per engine)" in subjects
    change("transformers", label="HF")
    colocated = resolved("a100", "mode=colocate", "explorer.rollout_model.engine_type=transformers").config
    trainer = next(c for c in plan_memory(colocated).checks if c.role == "trainer")
    assert trainer.capacity_label.endswith("for the sleeping HF engine")


def test_verl_name_is_what_verl_is_told(change):
    config = resolved("a100").config
    change("vllm", verl_name="vllm")
    assert "actor_rollout_ref.rollout.name=vllm" in overrides(config, "/models/m", 1)
