"""Which values name a hub repo, and which keys of a run config may hold one.

A value names a hub repo when it is written as the hub writes repo ids (`org/name`, optionally `@revision`: a
branch, tag or commit, as huggingface_hub's `hf://` paths pin one) and no file or folder of that name exists where
trinity runs: a local path always wins. A data set value ending in a data file's suffix (`data/train.jsonl`) is a
missing local file, never a hub id. Trinity-RFT has no revision key; `@revision` is the way to pin one here.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from ..data_files import DATA_SUFFIXES
from ..inputs import data_inputs, model_inputs

RepoType = Literal["model", "dataset"]
# The hub's repo ids: an owner and a name of letters, digits, `-`, `_` and `.`, neither starting with `-` or `.`,
# with no `--` or `..` (huggingface_hub's validate_repo_id), 96 characters at most.
REPO_ID = re.compile(r"^(?!.*(--|\.\.))[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9_][\w.-]{0,95}$")
REVISION = re.compile(r"^[\w./-]{1,255}$")
LOCAL_SUFFIXES = (*DATA_SUFFIXES, ".txt", ".arrow")  # a data set value ending so names a file: never a hub id
DEFAULT_REVISION = "main"


@dataclass(frozen=True)
class HubName:
    """A repo on the hub: its id, the revision asked for (`main` unless pinned) and its kind."""

    repo_id: str
    revision: str
    repo_type: RepoType

    @property
    def text(self) -> str:
        """The name as a user writes it."""
        pinned = f"@{self.revision}" if self.revision != DEFAULT_REVISION else ""
        return f"{self.repo_id}{pinned}"

    @property
    def label(self) -> str:
        """The name with its kind, for messages: `model Qwen/Qwen2.5-1.5B-Instruct`."""
        return f"{'data set' if self.repo_type == 'dataset' else 'model'} {self.text}"


def hub_name(value: str | None, repo_type: RepoType) -> HubName | None:
    """The hub repo `value` names, or None: a local path (existing or not), or not a repo id."""
    if not value or Path(value).expanduser().exists():
        return None
    repo_id, _, revision = value.partition("@")
    if not REPO_ID.match(repo_id) or (revision and not REVISION.match(revision)):
        return None
    if repo_type == "dataset" and repo_id.lower().endswith(LOCAL_SUFFIXES):
        return None
    return HubName(repo_id, revision or DEFAULT_REVISION, repo_type)


class NamedInput(NamedTuple):
    """One key of a config that names a hub repo: where it is, what it names and, for a data set, which part."""

    key: tuple
    name: HubName
    subset: str | None = None
    split: str | None = None


def named_inputs(config: Any) -> list[NamedInput]:
    """Every model and data set the run of `config` reads that is named by hub id."""
    found = [NamedInput(k, n) for k, value in model_inputs(config) if (n := hub_name(value, "model")) is not None]
    for data in data_inputs(config):
        name = hub_name(data.storage.path, "dataset")
        if name is not None:
            found.append(NamedInput((*data.key, "path"), name, data.storage.subset_name, data.storage.split))
    return found
