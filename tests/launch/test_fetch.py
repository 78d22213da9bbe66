"""The driver's fetch, against a hub stand-in on loopback through the real huggingface_hub client: each name once, at
the commit its revision names when the run starts, resumed after a cut connection, never half-visible; offline from
the cache alone; refusals before Ray as exit-2 errors at the key that named the repo."""

import json
import os

import pytest

from tests.conftest import REFERENCE
from tests.hub_standin import gsm8k_like
from trinity.config.compose import Request
from trinity.config.hub.cache import HubSettings, cached
from trinity.config.hub.local import localised
from trinity.config.hub.names import HubName
from trinity.config.resolve import resolve
from trinity.errors import FetchError
from trinity.launch.fetch import CACHE_SOURCE, fetch
from trinity.runtime.data.tasksets import load_rows

ROWS = [{"question": f"{i}+{i}?", "answer": f"#### {2 * i}"} for i in range(4)]
QWEN = "Qwen/Qwen2.5-1.5B-Instruct"
MODEL = HubName(QWEN, "main", "model")
GSM8K = HubName("openai/gsm8k", "main", "dataset")
WEIGHTS = os.urandom(12 << 20)  # past huggingface_hub's 10 MiB download chunk: a cut past it resumes with a Range


def model_files(weights: bytes = WEIGHTS) -> dict[str, bytes]:
    return {
        "config.json": json.dumps({"model_type": "qwen2", "vocab_size": 32}).encode(),
        "model.safetensors": weights,
        "pytorch_model.bin": b"the same weights again, as a pickle",
        "original/consolidated.pth": b"and once more",
    }


def rfc(*overrides):
    return resolve(Request(REFERENCE, ("hardware=a100", *overrides)))


def test_each_name_is_fetched_once_into_the_cache_and_the_roles_get_its_folder(hub, capsys):
    model_commit = hub.publish("model", QWEN, model_files())
    data_commit = hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]))
    resolved = rfc()
    fetched = fetch(resolved)
    assert {n: f.commit for n, f in fetched.items()} == {MODEL: model_commit, GSM8K: data_commit}
    model = fetched[MODEL].folder
    assert model.parent.name == "snapshots" and model.name == model_commit
    assert (model / "model.safetensors").read_bytes() == WEIGHTS
    assert not (model / "pytorch_model.bin").exists() and not (model / "original").exists()  # other weight formats
    assert "fetching model Qwen/Qwen2.5-1.5B-Instruct at" in capsys.readouterr().err
    # the two keys naming openai/gsm8k asked the hub once; every file was downloaded once
    assert [p for m, p, _ in hub.requests if p.startswith("/api/datasets/") and "/revision/" in p] == [
        "/api/datasets/openai/gsm8k/revision/main"
    ]
    assert len(hub.downloads("config.json")) == 1
    local = localised(resolved, fetched)
    assert local.config.model.model_path == str(model)
    assert local.config.explorer.rollout_model.model_path == QWEN  # the name the engines serve it under
    taskset = local.config.buffer.explorer_input.taskset
    assert load_rows(taskset.path, taskset.split, taskset.subset_name) == ROWS
    assert local.fetched[0] | {"source": None} == {
        "name": QWEN,
        "repo_type": "model",
        "revision": "main",
        "commit": model_commit,
        "source": None,
        "keys": ["model.model_path"],
    }


def test_a_second_run_reads_the_cache_offline_and_online_follows_the_branch(hub, monkeypatch):
    first = hub.publish("model", QWEN, model_files())
    hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]))
    fetch(rfc())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    asked = len(hub.requests)
    offline = fetch(rfc())
    assert offline[MODEL].commit == first and offline[MODEL].source == CACHE_SOURCE and len(hub.requests) == asked
    monkeypatch.delenv("HF_HUB_OFFLINE")
    second = hub.publish("model", QWEN, model_files(os.urandom(64)))  # main moves on
    online = fetch(rfc())
    assert online[MODEL].commit == second and online[MODEL].source == hub.url
    assert cached(MODEL, HubSettings.from_env()).commit == second  # refs/main names it, as huggingface_hub would


def test_a_pinned_revision_is_fetched_at_that_revision(hub):
    v1 = hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS[:2], ROWS[:1]), revision="v1")
    hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]))
    hub.publish("model", QWEN, model_files())
    fetched = fetch(rfc("buffer.explorer_input.taskset.path=openai/gsm8k@v1"))
    pinned = fetched[HubName("openai/gsm8k", "v1", "dataset")]
    assert pinned.commit == v1 and load_rows(str(pinned.folder), "train", "main") == ROWS[:2]
    assert fetched[GSM8K].commit != v1  # the eval taskset names main


def test_a_cut_connection_resumes_where_it_stopped(hub):
    hub.publish("model", QWEN, model_files())
    hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]))
    hub.cut("model.safetensors", 11 << 20)
    fetched = fetch(rfc())
    assert (fetched[MODEL].folder / "model.safetensors").read_bytes() == WEIGHTS
    ranges = [r for _, _, r in hub.downloads("model.safetensors")]
    assert ranges[0] == "" and ranges[1].startswith("bytes=") and int(ranges[1][6:-1]) > 0


def test_an_interrupted_download_is_never_taken_for_a_model_and_the_next_run_completes_it(hub, monkeypatch):
    hub.publish("model", QWEN, model_files())
    hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]))
    folder = fetch(rfc())[MODEL].folder
    (folder / "model.safetensors").unlink()  # what a run killed mid-file leaves: the file never landed
    settings = HubSettings.from_env()
    assert cached(MODEL, settings).missing == ("model.safetensors",)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FetchError) as offline:
        fetch(rfc())
    assert "the cached snapshot of 'Qwen/Qwen2.5-1.5B-Instruct'" in str(offline.value)
    assert "is incomplete, an interrupted download: 1 file(s) missing (model.safetensors)" in str(offline.value)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    before = len(hub.downloads("config.json"))
    assert (fetch(rfc())[MODEL].folder / "model.safetensors").read_bytes() == WEIGHTS
    assert len(hub.downloads("config.json")) == before  # what had landed stays


@pytest.mark.parametrize(
    "publish, expected",
    [
        (
            lambda hub: None,
            f"gsm8k.yaml:13:3: model.model_path: '{QWEN}' is neither a path on this machine nor a model",
        ),
        (
            lambda hub: hub.publish("model", QWEN, model_files(), gated=True),
            f"gsm8k.yaml:13:3: model.model_path: '{QWEN}' is gated on",
        ),
    ],
)
def test_a_name_that_cannot_be_had_is_one_error_before_anything_downloads(hub, publish, expected):
    publish(hub)
    hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]))
    with pytest.raises(FetchError) as refused:
        fetch(rfc())
    assert str(refused.value).startswith("trinity: cannot fetch what the run names on the hub\n")
    assert expected in str(refused.value)
    assert not [r for r in hub.requests if "/resolve/" in r[1]]


def test_offline_a_model_not_in_the_cache_is_an_error_for_run(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FetchError) as refused:
        fetch(rfc())
    report = str(refused.value)
    assert report.count("error:") == 3 and "warning:" not in report  # the model too: run reads it
    assert f"model.model_path: '{QWEN}' is not in the hub cache" in report


def test_a_hub_out_of_reach_falls_back_on_a_complete_cached_copy_with_a_note(hub, monkeypatch, capsys):
    hub.publish("model", QWEN, model_files())
    hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]))
    fetch(rfc())
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
    capsys.readouterr()
    fetched = fetch(rfc())
    assert fetched[MODEL].source == CACHE_SOURCE
    assert "note: could not reach http://127.0.0.1:1" in capsys.readouterr().err
