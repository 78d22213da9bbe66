"""trinity's engines take the places of verl's FSDP engines in verl's registry, for every device and backend, set
for the run they are installed for."""

import copy
import logging

import pytest

pytest.importorskip("verl")


def test_trinitys_engines_replace_verls_fsdp_engines_everywhere_set_for_the_run(caplog, monkeypatch):
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl
    from verl.workers.utils import losses

    from tests.config.test_unsharded import config
    from trinity.runtime.verl import engines, log_probs, repadding, whole_batch

    # this process's registry and flag as they were, after the test
    monkeypatch.setattr(EngineRegistry, "_engines", copy.deepcopy(EngineRegistry._engines))
    monkeypatch.setattr(engines.Unsharded, "enabled", engines.Unsharded.enabled)
    monkeypatch.setattr(tu, "make_iterator", tu.make_iterator)
    monkeypatch.setattr(transformer_impl, "prepare_micro_batches", transformer_impl.prepare_micro_batches)
    monkeypatch.setattr(transformer_impl, "logprobs_from_logits", transformer_impl.logprobs_from_logits)
    monkeypatch.setattr(losses, "no_padding_2_padding", losses.no_padding_2_padding)

    log = logging.getLogger("trinity.test")

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == log.name]

    with caplog.at_level(logging.INFO, logger=log.name):
        engines.install(config("hardware=cpu", "trainer.param_dtype=bfloat16"), log)
        assert engines.Unsharded.enabled is False and not said()
        engines.install(config("hardware=cpu"), log)
    assert engines.Unsharded.enabled is True
    # verl's batching, where it would select the whole batch, skipped (whole_batch.py)
    assert (tu.make_iterator, transformer_impl.prepare_micro_batches) == (
        whole_batch.make_iterator,
        whole_batch.prepare_micro_batches,
    )
    assert transformer_impl.logprobs_from_logits is log_probs.log_probs  # a block of rows per call (log_probs.py)
    assert losses.no_padding_2_padding is repadding.padded_responses  # verl's losses: one gather (repadding.py)
    assert said() == [
        "the trained models are unsharded: one trainer rank computing in their weights' dtype, without FSDP2"
    ]
    held = {
        (model_type, backend, device): engine
        for model_type, backends in EngineRegistry._engines.items()
        for backend, devices in backends.items()
        for device, engine in devices.items()
    }
    for model_type, verls, ours in (
        ("language_model", transformer_impl.FSDPEngineWithLMHead, engines.PolicyEngine),
        ("value_model", transformer_impl.FSDPEngineWithValueHead, engines.ValueEngine),
    ):
        places = {
            (backend, device) for (kind, backend, device) in held if kind == model_type and backend != "fsdp_turbo"
        }
        assert {("fsdp", "cuda"), ("fsdp2", "cuda"), ("fsdp", "npu"), ("fsdp2", "npu")} <= places
        assert all(held[(model_type, *place)] is ours for place in places)
        assert verls not in held.values()
