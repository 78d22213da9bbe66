"""The explorer's gatherer against a real transformers engine actor on a real Ray: the requests of the workflows
running on an engine reach it as one call, a workflow that ends or dawdles holds nobody back, and an engine error
reaches every waiting workflow."""

import threading
import time

import pytest

from trinity.runtime.rollout.gather import MAX_WAIT_S, Gatherer
from trinity.runtime.rollout.samples import Sampling

SAMPLING = Sampling(max_tokens=4)


@pytest.fixture(scope="module")
def engine(demo_assets):
    import os

    import ray

    from tests.conftest import ray_cluster
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.rollout.transformers_engine import TransformersEngine

    os.environ["TRINITY_DEMO_DIR"] = str(demo_assets)
    config = resolve(Request(None, ("hardware=cpu",))).stage("grpo")
    with ray_cluster({"num_cpus": 2}) as cluster:
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            actor = ray.remote(TransformersEngine).remote(
                name="rollout.engine0", role="rollout", config=config, index=0
            )
            ray.get(actor.setup.remote(str(demo_assets / "model"), 7))
            yield actor
        finally:
            ray.shutdown()


def workflows(gatherer, bodies):
    """Run each body(gatherer) in a thread of its own, as the explorer runs workflows; their results in order."""
    results = [None] * len(bodies)

    def run(i, body):
        try:
            results[i] = body(gatherer)
        except Exception as exc:
            results[i] = exc
        finally:
            gatherer.leave()

    threads = [threading.Thread(target=run, args=(i, b)) for i, b in enumerate(bodies)]
    for _ in threads:
        gatherer.expect()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def ask(ids, n):
    return lambda g: g.generate(ids, n, SAMPLING)


@pytest.mark.ray
def test_every_running_workflows_request_goes_in_one_call(engine):
    gatherer = Gatherer(engine, slots=8)
    results = workflows(gatherer, [ask([5, 6, 7], n) for n in (1, 2, 3, 4, 5, 6, 7, 8)])
    assert gatherer.calls == 1
    assert [(version, len(samples)) for version, samples in results] == [(7, n) for n in range(1, 9)]


@pytest.mark.ray
def test_a_workflow_playing_several_episodes_sends_them_with_the_others_in_one_call(engine):
    gatherer = Gatherer(engine, slots=2)
    several = lambda g: g.generate_each([([5, 6], 1, SAMPLING), ([7], 2, SAMPLING), ([8, 9, 5], 1, SAMPLING)])  # noqa: E731
    episodes, single = workflows(gatherer, [several, ask([6], 3)])
    assert gatherer.calls == 1
    assert [(v, len(samples)) for v, samples in episodes] == [(7, 1), (7, 2), (7, 1)] and len(single[1]) == 3


@pytest.mark.ray
def test_a_call_gathers_at_most_the_workflows_that_run_at_once(engine):
    gatherer = Gatherer(engine, slots=2)  # explorer.runner_per_model
    results = workflows(gatherer, [ask([5, 6, 7], 1) for _ in range(4)])
    assert gatherer.calls == 2 and [len(r[1]) for r in results] == [1] * 4


@pytest.mark.ray
def test_a_workflow_that_ends_without_asking_releases_the_others(engine):
    gatherer = Gatherer(engine, slots=8)
    results = workflows(gatherer, [ask([5, 6], 2), ask([7], 1), lambda g: "no request"])
    assert gatherer.calls == 1 and results[2] == "no request"
    assert [len(r[1]) for r in results[:2]] == [2, 1]


@pytest.mark.ray
def test_a_busy_workflow_holds_the_others_back_only_briefly(engine):
    gatherer = Gatherer(engine, slots=8)
    sent = []

    def asks_then_notes(g):
        answer = g.generate([5, 6], 2, SAMPLING)
        sent.append(time.perf_counter())
        return answer

    def busy(g):
        time.sleep(20 * MAX_WAIT_S)
        return g.generate([8], 1, SAMPLING)

    started = time.perf_counter()
    results = workflows(gatherer, [asks_then_notes, asks_then_notes, busy])
    assert sent[-1] - started < 15 * MAX_WAIT_S  # answered before the busy one asked
    assert gatherer.calls == 2 and [len(r[1]) for r in results] == [2, 2, 1]


@pytest.mark.ray
def test_an_engine_error_reaches_every_waiting_workflow(engine):
    gatherer = Gatherer(engine, slots=8)
    results = workflows(gatherer, [ask([5, 6], 1), ask([10**6], 1)])  # a token id beyond the vocabulary
    assert gatherer.calls == 1
    assert all(isinstance(r, Exception) and "index" in str(r).lower() for r in results), results
