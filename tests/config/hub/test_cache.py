"""huggingface_hub's cache, read as huggingface_hub reads it: the same variables, the same folders, and a snapshot
complete only when every file its commit lists is there (models: their other weight formats aside)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REFERENCE
from trinity.config.hub.cache import HubSettings, cached, local_folder, needed
from trinity.config.hub.names import HubName

COMMIT = "0123456789abcdef0123456789abcdef01234567"
ENVS = [
    {},
    {"HF_HOME": "/srv/hf"},
    {"XDG_CACHE_HOME": "/xdg"},
    {"HF_HOME": "~/hf", "HF_HUB_CACHE": "/shared/hub"},
    {"HUGGINGFACE_HUB_CACHE": "/legacy"},
    {"HF_HUB_CACHE": "$HOME/hub-cache", "HF_ENDPOINT": "https://hf-mirror.com/"},
    {"HF_HUB_OFFLINE": "1"},
    {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "yes"},
    {"HF_HUB_OFFLINE": "true"},
]


@pytest.mark.parametrize("env", ENVS)
def test_the_settings_are_huggingface_hubs_own(env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE", "XDG_", "TRANSFORMERS"))}
    probe = (
        "from huggingface_hub import constants as c; import json; "
        "print(json.dumps([c.HF_HUB_CACHE, c.ENDPOINT, c.HF_HUB_OFFLINE]))"
    )
    theirs = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe], env=clean | env, capture_output=True, text=True, check=True
        ).stdout
    )
    ours = HubSettings.from_env(clean | env)
    assert [str(ours.cache), ours.endpoint, ours.offline] == theirs


def plant(cache, name: HubName, files: dict[str, bytes], listed=None, ref="main"):
    storage = cache / f"{name.repo_type}s--{name.repo_id.replace('/', '--')}"
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / ref).write_text(COMMIT)
    snapshot = storage / "snapshots" / COMMIT
    for path, data in files.items():
        (snapshot / path).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / path).write_bytes(data)
    if listed is not None:
        (storage / "trees").mkdir(exist_ok=True)
        entries = {p: {"size": 1, "blob_id": "x"} for p in listed}
        (storage / "trees" / f"{COMMIT}.json").write_text(json.dumps({"format_version": 1, "files": entries}))
    return snapshot


MODEL = HubName("org/tiny", "main", "model")


def test_a_snapshot_is_found_by_its_ref_or_its_commit(tmp_path):
    settings = HubSettings.from_env({"HF_HUB_CACHE": str(tmp_path)})
    folder = plant(tmp_path, MODEL, {"config.json": b"{}"})
    assert cached(MODEL, settings).folder == folder and cached(MODEL, settings).complete
    assert cached(HubName("org/tiny", COMMIT, "model"), settings).folder == folder
    assert cached(HubName("org/tiny", "v2", "model"), settings) is None
    assert cached(HubName("org/tiny", "main", "dataset"), settings) is None


def test_an_interrupted_download_is_incomplete_as_huggingface_hub_says(tmp_path):
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import IncompleteSnapshotError

    settings = HubSettings.from_env({"HF_HUB_CACHE": str(tmp_path)})
    plant(tmp_path, MODEL, {"config.json": b"{}"}, listed=["config.json", "model.safetensors"])
    assert cached(MODEL, settings).missing == ("model.safetensors",)
    with pytest.raises(IncompleteSnapshotError):
        snapshot_download("org/tiny", cache_dir=tmp_path, local_files_only=True)


def test_a_models_other_weight_formats_are_not_missed_where_it_has_safetensors(tmp_path):
    settings = HubSettings.from_env({"HF_HUB_CACHE": str(tmp_path)})
    listed = ["config.json", "model.safetensors", "pytorch_model.bin", "original/consolidated.pth", "tokenizer.json"]
    plant(tmp_path, MODEL, {"config.json": b"{}", "model.safetensors": b"w", "tokenizer.json": b"{}"}, listed=listed)
    assert cached(MODEL, settings).complete
    assert needed(["config.json", "pytorch_model.bin"], "model") == ["config.json", "pytorch_model.bin"]
    assert needed(listed, "dataset") == sorted(listed)


def test_local_folder_reads_a_cached_name_as_a_local_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    folder = plant(tmp_path / "cache", MODEL, {"config.json": b"{}"})
    assert local_folder("org/tiny") == folder
    assert local_folder("org/other") is None
    (tmp_path / "org" / "tiny").mkdir(parents=True)
    assert local_folder("org/tiny") == Path("org/tiny")  # a local folder of that name wins


def test_credentials_in_the_endpoint_are_masked():
    settings = HubSettings.from_env({"HF_ENDPOINT": "https://user:s3cret@mirror.example/"})
    assert settings.shown_endpoint == "https://***@mirror.example" and "s3cret" not in settings.shown_endpoint


def test_plan_memory_reads_a_cached_models_config_as_a_local_folders(cli, monkeypatch, tmp_path):
    """The shape comes from the cached snapshot's config.json, not trinity's table of common models."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    shape = {"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}  # fmt: skip
    folder = plant(
        tmp_path / "cache",
        HubName("Qwen/Qwen2.5-1.5B-Instruct", "main", "model"),
        {"config.json": json.dumps(shape).encode()},
    )
    result = cli("plan", "memory", "-c", REFERENCE, "hardware=a100", "--format", "json")
    assert result.code == 0, result.err
    assert str(folder / "config.json") in result.out
