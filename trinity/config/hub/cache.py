"""huggingface_hub's cache on this machine, read as every HF tool lays it out, without importing huggingface_hub.

`<cache>/<models|datasets>--<org>--<name>/` holds `refs/<branch or tag>` (the commit it pointed to when last
fetched), `snapshots/<commit>/` (the repo's files at that commit) and, from huggingface_hub 1.x, `trees/<commit>.json`
(the commit's file listing). A snapshot with a listing is complete when every listed file is there: an interrupted
download leaves files out, and is never taken for a model. The variables are huggingface_hub's own, read when asked
(the CLI reads them once per process, as huggingface_hub does at import): `HF_HOME`, `HF_HUB_CACHE` (and the older
`HUGGINGFACE_HUB_CACHE`), `HF_ENDPOINT`, `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`), `HF_TOKEN` / `HF_TOKEN_PATH`.
"""

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from urllib.parse import urlsplit

from .names import HubName, hub_name

COMMIT = re.compile(r"^[0-9a-f]{40}$")
DEFAULT_ENDPOINT = "https://huggingface.co"
TREE_FORMAT = 1  # the version of trees/<commit>.json this reader knows (huggingface_hub's TREE_CACHE_FORMAT_VERSION)
_TRUE = {"1", "ON", "YES", "TRUE"}
# How a Trinity-RFT user sends model downloads to ModelScope: vLLM's switch and verl's (Trinity-RFT has none of its own)
MODELSCOPE_SWITCHES = ("VLLM_USE_MODELSCOPE", "VERL_USE_MODELSCOPE")
# A model repo's other copies of its weights (PyTorch pickles, TensorFlow, Flax, ONNX, GGUF, the original checkpoint):
# where it has safetensors, no trinity role reads these, so they are neither fetched nor missed in a snapshot.
OTHER_WEIGHTS = (
    "*.bin", "*.pt", "*.pth", "*.h5", "*.msgpack", "*.ot", "*.onnx", "*.onnx_data", "*.gguf", "*.tflite",
    "original/*", "onnx/*", "openvino/*", "coreml/*",
)  # fmt: skip


def _path(value: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(value)))


@dataclass(frozen=True)
class HubSettings:
    """Where the hub and its cache are, as huggingface_hub reads its variables."""

    cache: Path
    endpoint: str
    offline: bool
    token_set: bool  # HF_TOKEN, or a token file from `hf auth login` (its value is never read here)
    modelscope: str = ""  # the variable that asks vLLM or verl to fetch models from ModelScope, where one is set

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "HubSettings":
        env = os.environ if env is None else env
        home = _path(env.get("HF_HOME", os.path.join(env.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")))
        cache = _path(env.get("HF_HUB_CACHE", env.get("HUGGINGFACE_HUB_CACHE", str(home / "hub"))))
        offline = (env.get("HF_HUB_OFFLINE") or env.get("TRANSFORMERS_OFFLINE") or "").upper() in _TRUE
        token_file = _path(env.get("HF_TOKEN_PATH", str(home / "token")))
        token = bool(env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN")) or token_file.is_file()
        modelscope = next((v for v in MODELSCOPE_SWITCHES if (env.get(v) or "").lower() in ("1", "true")), "")
        return cls(cache, env.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/"), offline, token, modelscope)

    @property
    def shown_endpoint(self) -> str:
        """The endpoint for messages: credentials in its URL (`https://user:pass@mirror`) masked."""
        parts = urlsplit(self.endpoint)
        if "@" not in parts.netloc:
            return self.endpoint
        return parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]).geturl()


@dataclass(frozen=True)
class Snapshot:
    """A repo's files at one commit in the cache; `missing`: files its listing names that are not there."""

    commit: str
    folder: Path
    missing: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing


def cached_repos(settings: HubSettings) -> int:
    """How many repos (models, data sets) the cache holds a folder of."""
    if not settings.cache.is_dir():
        return 0
    return sum(1 for p in settings.cache.iterdir() if p.is_dir() and p.name.startswith(("models--", "datasets--")))


def storage_folder(name: HubName, settings: HubSettings) -> Path:
    """The repo's folder in the cache (huggingface_hub's repo_folder_name)."""
    return settings.cache / "--".join((f"{name.repo_type}s", *name.repo_id.split("/")))


def cached(name: HubName, settings: HubSettings) -> Snapshot | None:
    """The cached snapshot of `name` at its revision; None where the cache holds no folder for it."""
    storage = storage_folder(name, settings)
    commit = name.revision if COMMIT.match(name.revision) else _ref(storage, name.revision)
    if commit is None or not (storage / "snapshots" / commit).is_dir():
        return None
    folder = storage / "snapshots" / commit
    listed = _listing(storage, commit)
    wanted = needed(listed, name.repo_type) if listed is not None else []
    return Snapshot(commit, folder, tuple(p for p in wanted if not (folder / p).is_file()))


def skipped(files: list[str] | tuple[str, ...], repo_type: str) -> tuple[str, ...]:
    """The patterns of a repo's files that a run does not read: a model's other weights where it has safetensors."""
    has_safetensors = repo_type == "model" and any(f.endswith(".safetensors") for f in files)
    return OTHER_WEIGHTS if has_safetensors else ()


def needed(files: list[str] | tuple[str, ...], repo_type: str) -> list[str]:
    """The files of a repo a run reads (every one but those `skipped` names), sorted."""
    patterns = skipped(files, repo_type)
    return sorted(f for f in files if not any(fnmatch(f, p) for p in patterns))


def local_folder(value: str | None, repo_type: str = "model") -> Path | None:
    """Where `value` is on this machine: itself where it exists, else the cached complete snapshot of the hub name
    it is, else None. What reads a model's files while checking a config (its config.json, tokenizer, adapter)
    looks here, so a name in the cache reads as a local folder does."""
    if not value:
        return None
    path = Path(value).expanduser()
    if path.exists():
        return path
    name = hub_name(value, repo_type)  # type: ignore[arg-type]
    snapshot = cached(name, HubSettings.from_env()) if name is not None else None
    return snapshot.folder if snapshot is not None and snapshot.complete else None


def _ref(storage: Path, revision: str) -> str | None:
    try:
        commit = (storage / "refs" / revision).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return commit if COMMIT.match(commit) else None


def _listing(storage: Path, commit: str) -> list[str] | None:
    """The files the commit's cached listing names; None where there is no listing this reader knows."""
    try:
        data = json.loads((storage / "trees" / f"{commit}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) and data.get("format_version") == TREE_FORMAT else None
    return list(files) if isinstance(files, dict) else None
