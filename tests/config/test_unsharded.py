"""A trainer of one rank computing in fp32 (the cpu profile's) trains its models unsharded; any other keeps FSDP2, and
the memory plan counts FSDP's working set exactly where it is kept."""

import pytest

from trinity.config.compose import Request
from trinity.config.memory.catalog import known_models
from trinity.config.memory.checks import trainer_setup
from trinity.config.memory.trainer import UPDATE, trainer_estimate
from trinity.config.resolve import resolve
from trinity.config.unsharded import activation_offload, trains_unsharded

CPU = ("hardware=cpu",)
OFFLOAD = "trainer.trainer_config.actor_rollout_ref.model.enable_activation_offload"


def config(*overrides: str):
    return resolve(Request(None, overrides)).stage("grpo")


@pytest.mark.parametrize(
    "overrides, unsharded",
    [
        (CPU, True),
        ((*CPU, "trainer.param_dtype=bfloat16"), False),  # FSDP2 casts a unit at a time
        ((*CPU, "trainer.offload_policy=true"), False),  # FSDP2's own offload
        ((*CPU, "cluster.trainer_gpu_num=2", "cluster.gpu_per_node=3"), False),  # two ranks shard
        ((*CPU, f"+{OFFLOAD}=true"), False),  # verl's activation offload works by FSDP unit
        (("hardware=h100",), False),  # bf16 on a GPU
        (("hardware=ascend910b",), False),
    ],
    ids=["cpu", "bf16", "offload-policy", "two-ranks", "activation-offload", "h100", "ascend910b"],
)
def test_only_one_rank_computing_in_its_weights_dtype_trains_unsharded(overrides, unsharded):
    resolved = config(*overrides)
    assert trains_unsharded(resolved) is unsharded
    shape, _ = known_models()["Qwen/Qwen2.5-0.5B-Instruct"]
    setup = trainer_setup(resolved, shape, resolved.cluster.trainer_gpu_num)
    labels = [item.label for item in trainer_estimate(setup).items if item.phase == UPDATE]
    assert any(label.startswith("FSDP working set") for label in labels) is not unsharded


@pytest.mark.parametrize(
    "passthrough, on",
    [
        ({"actor_rollout_ref": {"model": {"enable_activation_offload": True}}}, True),
        ({"model": {"enable_activation_offload": True}}, True),  # the actor's sections bare, as Trinity-RFT reads them
        ({"critic": {"model": {"enable_activation_offload": True}}}, True),
        ({"actor_rollout_ref": {"model": {"enable_activation_offload": False}}, "critic": {"model": None}}, False),
        ({}, False),
    ],
)
def test_activation_offload_is_read_where_verl_reads_it(passthrough, on):
    assert activation_offload(passthrough) is on


def test_more_trainer_devices_suggested_for_an_unsharded_trainer_are_sharded():
    resolved = config(*CPU)
    shape, _ = known_models()["Qwen/Qwen2.5-0.5B-Instruct"]
    setup = trainer_setup(resolved, shape, 1)
    assert setup.unsharded and not setup._replace(devices=2).unsharded  # as the memory knobs ask
    assert not trainer_setup(config(*CPU, "trainer.param_dtype=bfloat16"), shape, 1).unsharded
