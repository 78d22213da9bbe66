"""Real Ray, simulated accelerators: actors get the driver's device decision, never detect their own.

The node declares `NPU` and `GPU` resources, so Ray assigns ASCEND_RT_VISIBLE_DEVICES and
CUDA_VISIBLE_DEVICES to actors that ask, exactly as on a real node.
"""

import os

import pytest
import ray

from tests.conftest import REFERENCE
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.launch.runtime_env import runtime_env

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_node():
    ray.init(num_cpus=4, num_gpus=2, resources={"NPU": 4}, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@ray.remote(num_cpus=0)
class Reporter:
    def report(self):
        from trinity.utils import device

        seen = {
            name: os.environ.get(name)
            for name in (
                "ASCEND_RT_VISIBLE_DEVICES",
                "CUDA_VISIBLE_DEVICES",
                "TRINITY_HARDWARE",
                "VLLM_ASCEND_ENABLE_NZ",
            )
        }
        return {
            "device": device.get_device_type(),
            "key": device.get_ray_resource_key(),
            "source": device.decide().source,
            **seen,
        }


def config(profile):
    return resolve(Request(REFERENCE, (f"hardware={profile}",))).config


def test_actor_without_a_device_still_reports_npu(ray_node):
    actor = Reporter.options(runtime_env=runtime_env(config("ascend910b"), "explorer")).remote()
    seen = ray.get(actor.report.remote())
    assert seen["device"] == "npu" and seen["key"] == "NPU" and seen["source"] == "$TRINITY_DEVICE=npu"
    assert seen["TRINITY_HARDWARE"] == "ascend910b"
    assert not seen["ASCEND_RT_VISIBLE_DEVICES"]  # Ray gave it no NPU, and it still knows what it runs on


def test_actor_asking_for_npus_sees_the_ones_ray_assigned(ray_node):
    actor = Reporter.options(resources={"NPU": 2}, runtime_env=runtime_env(config("ascend910b"), "rollout")).remote()
    seen = ray.get(actor.report.remote())
    visible = seen["ASCEND_RT_VISIBLE_DEVICES"].split(",")
    assert len(visible) == 2 and set(visible) <= {"0", "1", "2", "3"}
    assert seen["device"] == "npu" and seen["VLLM_ASCEND_ENABLE_NZ"] == "0"
    ray.kill(actor)


def test_actor_asking_for_gpus_sees_cuda_visible_devices(ray_node):
    actor = Reporter.options(num_gpus=1, runtime_env=runtime_env(config("a100"), "trainer")).remote()
    seen = ray.get(actor.report.remote())
    assert seen["device"] == "cuda" and len(seen["CUDA_VISIBLE_DEVICES"].split(",")) == 1
    ray.kill(actor)


def test_without_propagation_an_actor_would_guess_cpu(ray_node):
    """The RFC's multi-node bug: in-actor detection on a node Ray hides devices from says cpu."""
    seen = ray.get(Reporter.remote().report.remote())
    assert seen["device"] == "cpu" and seen["key"] == "CPU" and seen["source"].startswith("detected:")
