"""A serve run takes a `train` run's published weights through its proxy: explorer.min_running_model_num engines keep
answering while the others load, a wave at a time; with none to spare every engine loads where it is. The real
Proxy's bookkeeping (not started: its engines marked as answering) and the real take_published, over engines that
record what they load and which engines the proxy had in turn meanwhile."""

import json
from types import SimpleNamespace

from trinity.runtime.driver.published_weights import take_published
from trinity.runtime.rollout.proxy import Proxy
from trinity.runtime.rollout.proxy_records import CallRecords
from trinity.runtime.sync import files


class Call:
    def __init__(self, run):
        self.run = run


class Engine:
    """An engine actor's handle: load_weights.remote(...) loads when the stage waits on it."""

    def __init__(self, index, loads, proxy):
        self.index, self.loads, self.proxy = index, loads, proxy
        self.load_weights = SimpleNamespace(remote=lambda path, version: Call(lambda: self._load(path, version)))

    def _load(self, path, version):
        serving = [e.index for e in self.proxy.engines if e.serving]
        self.loads.append((self.index, version, serving))
        return version


class Metrics:
    def __init__(self):
        self.lines = []

    def write(self, role, step, stage, **fields):
        self.lines.append((role, step, fields["weight_version"]))


def stage_of(tmp_path, engines: int, least: int, actors_per_engine: int = 1):
    urls = [f"http://127.0.0.1:{9000 + i}/v1" for i in range(engines)]
    proxy = Proxy(urls, "127.0.0.1", 0, CallRecords(":memory:"), min_running=least)
    for engine in proxy.engines:
        engine.healthy = True
    loads: list = []
    handles = [Engine(i // actors_per_engine, loads, proxy) for i in range(engines * actors_per_engine)]
    stage = SimpleNamespace(
        run_dir=SimpleNamespace(root=tmp_path),
        engines=handles,
        engine_actors=[list(range(i * actors_per_engine, (i + 1) * actors_per_engine)) for i in range(engines)],
        proxy=proxy,
        config=SimpleNamespace(explorer=SimpleNamespace(max_timeout=5)),
        metrics=Metrics(),
        name="serve",
        wait=lambda calls: [c.run() for c in calls],
    )
    return stage, proxy, loads


def publish(tmp_path, version):
    weights = files.published_file(tmp_path)
    weights.parent.mkdir(parents=True, exist_ok=True)
    weights.write_bytes(b"w")
    files.marker(weights).write_text(json.dumps({"version": version}))


def test_min_running_model_num_engines_keep_answering_while_the_others_load_a_wave_at_a_time(tmp_path):
    stage, proxy, loads = stage_of(tmp_path, engines=3, least=1)
    assert take_published(stage, 0) == 0 and loads == []  # nothing published yet
    publish(tmp_path, 4)
    assert take_published(stage, 0) == 4
    # two engines can be spared: they load while engine 2 answers; then engine 2 while they answer
    assert loads == [(0, 4, [2]), (1, 4, [2]), (2, 4, [0, 1])]
    assert all(e.serving and e.weight_version == 4 for e in proxy.engines)
    assert stage.metrics.lines == [("synchronizer", 4, 4)]
    assert take_published(stage, 4) == 4 and len(loads) == 3  # not newer: nothing loads


def test_with_two_to_keep_of_three_one_engine_loads_at_a_time(tmp_path):
    stage, proxy, loads = stage_of(tmp_path, engines=3, least=2, actors_per_engine=2)
    publish(tmp_path, 2)
    assert take_published(stage, 1) == 2
    # every actor of an engine loads with it (a vLLM engine spanning several actors)
    assert loads == [(0, 2, [1, 2]), (0, 2, [1, 2]), (1, 2, [0, 2]), (1, 2, [0, 2]), (2, 2, [0, 1]), (2, 2, [0, 1])]


def test_with_no_engine_to_spare_every_engine_loads_where_it_is(tmp_path):
    stage, proxy, loads = stage_of(tmp_path, engines=2, least=2)
    publish(tmp_path, 3)
    assert take_published(stage, 0) == 3
    assert loads == [(0, 3, [0, 1]), (1, 3, [0, 1])]  # both kept answering: they load between their requests


def test_an_engine_that_does_not_answer_loads_at_once(tmp_path):
    stage, proxy, loads = stage_of(tmp_path, engines=2, least=1)
    proxy.engines[0].healthy = False
    publish(tmp_path, 5)
    assert take_published(stage, 0) == 5
    # engine 0 is down: taken at once; engine 1 is the last one answering, so it loads where it is
    assert loads == [(0, 5, [1]), (1, 5, [0, 1])]


def test_a_wave_still_answering_after_max_timeout_loads_beside_its_requests_and_says_so(tmp_path):
    stage, proxy, loads = stage_of(tmp_path, engines=2, least=1)
    notes: list[str] = []
    stage.progress = SimpleNamespace(note=notes.append)
    stage.config.explorer.max_timeout = 0.1
    proxy.engines[0].in_flight = 1  # a request engine 0 never finishes
    publish(tmp_path, 3)
    assert take_published(stage, 0) == 3
    assert [(e, v) for e, v, _ in loads] == [(0, 3), (1, 3)]  # it loads all the same
    assert notes == [
        "engines [0] still had requests after explorer.max_timeout (0.1 s): weight version 3 loads beside them"
    ]
