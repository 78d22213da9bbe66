"""What a run reads from this machine's disk: its tasksets, SFT data sets and model.

trinity downloads nothing: a hub name such as `openai/gsm8k` that is not a local path is caught
here, in a second, by `trinity config validate` and before `trinity run` starts Ray, instead of
inside a role ten minutes later. `render` and `run --dry-run` only describe, so they do not look.
"""

import re
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import Issue, dotted
from . import modes
from .algorithms.queries import data_kind, needs_rollout
from .model_folder import hf_config
from .resolve import ResolvedConfig
from .schema import RunConfig

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # org/name, as the Hugging Face hub names data sets
DOWNLOAD_HINT = (
    "download it once where the run can read it, e.g. "
    "python -c \"import datasets; datasets.load_dataset('{name}').save_to_disk('data/{stem}')\", "
    "then set path: data/{stem} (or the variable its ${{oc.env:...}} names)"
)


def data_issues(resolved: ResolvedConfig) -> list[Issue]:
    """An error for every data set the run (or one of its stages) reads that is not on disk."""
    issues: list[Issue] = []
    for label, config, provenance in stage_configs(resolved):
        for data_input in data_inputs(config):
            key, storage = (*data_input.key, "path"), data_input.storage
            if storage.path and not Path(storage.path).exists():
                issue = _missing(key, storage.path, storage.subset_name, provenance.where(key), label)
                if issue not in issues:
                    issues.append(issue)
    return issues


def stage_configs(resolved: ResolvedConfig) -> list[tuple[str, RunConfig, Any]]:
    """(label for a message, config, provenance) of each stage, or of the run when it has none (stages replace it)."""
    staged = [(f" (in stage '{n}')", c, p) for (n, c), p in zip(resolved.stages, resolved.stage_provenance)]
    return staged or [("", resolved.config, resolved.provenance)]


def model_issues(config: RunConfig, resolved: ResolvedConfig) -> list[Issue]:
    """An error when the policy model is not a local folder with a config.json (checked by `run` only)."""
    path = Path(config.model.model_path)
    if (path / "config.json").is_file():
        return []
    return [
        Issue(
            f"{config.model.model_path!r} is not a local model folder (no config.json); trinity downloads nothing",
            key="model.model_path",
            source=resolved.provenance.where(("model", "model_path")),
            hint=f"download it once, e.g. huggingface-cli download {config.model.model_path} --local-dir "
            f"models/{path.name}, then set model.model_path: models/{path.name}",
        )
    ]


def teacher_issues(resolved: ResolvedConfig) -> list[Issue]:
    """An error for a distillation teacher that is not a local model folder, or whose vocabulary differs from the
    policy model's: its log-probs are read at the student's token ids (checked by `run` only)."""
    policy = _vocab(Path(resolved.config.model.model_path))
    issues: list[Issue] = []
    for _, config, provenance in stage_configs(resolved):
        teacher = config.model.teacher_model_path
        if not teacher:
            continue
        where, vocab = provenance.where(("model", "teacher_model_path")), _vocab(Path(teacher))
        if vocab is None:
            issue = Issue(
                f"{teacher!r} is not a local model folder (no config.json); trinity downloads nothing",
                key="model.teacher_model_path",
                source=where,
                hint="download the teacher once and name its folder",
            )
        elif policy is not None and vocab != policy:
            issue = Issue(
                f"the teacher's vocabulary ({vocab} tokens) is not the policy model's ({policy}): its log-probs of "
                "the student's token ids would be of other tokens",
                key="model.teacher_model_path",
                source=where,
                allowed=f"a model with model.model_path's tokenizer ({policy} tokens)",
            )
        else:
            continue
        if issue not in issues:
            issues.append(issue)
    return issues


def _vocab(folder: Path) -> int | None:
    """The vocabulary size a model folder's config.json states (None: no readable config.json)."""
    data = hf_config(folder)
    return None if data is None else (data.get("text_config") or data).get("vocab_size", -1)


class DataInput(NamedTuple):
    """A data set a config reads: the key of its section, the section, and what its rows feed (the data kinds of
    runtime/data/prompts.py: rollouts for a taskset, else what the trainer reads)."""

    key: tuple
    storage: Any
    data: str


def data_inputs(config: RunConfig) -> list[DataInput]:
    """Every data set the config reads."""
    found = []
    explorer_input = config.buffer.explorer_input
    if modes.mode(config.mode).explores:
        named = [(("taskset",), explorer_input.taskset)] if explorer_input.taskset else []
        named += [(("tasksets", i), t) for i, t in enumerate(explorer_input.tasksets)]
        named += [(("eval_tasksets", i), t) for i, t in enumerate(explorer_input.eval_tasksets)]
        found += [DataInput(("buffer", "explorer_input", *key), t, "rollouts") for key, t in named]
    experiences = config.buffer.trainer_input.experience_buffer
    algorithm = config.algorithm.algorithm_type
    if experiences and not needs_rollout(algorithm) and experiences.storage_type == "file":
        found.append(DataInput(("buffer", "trainer_input", "experience_buffer"), experiences, data_kind(algorithm)))
    for name, data_set in config.buffer.trainer_input.auxiliary_buffers.items():  # mixed into batches (mix)
        found.append(DataInput(("buffer", "trainer_input", "auxiliary_buffers", name), data_set, "sft"))
    return found


def _missing(key: tuple, path: str, subset: str, where: str, label: str) -> Issue:
    message = f"{path!r} is not on this machine{label}; trinity reads data sets from local disk and downloads nothing"
    if HUB_ID.match(path):
        stem = path.rsplit("/", 1)[-1]
        name = f"{path}', '{subset}" if subset else path
        hint = DOWNLOAD_HINT.format(name=name, stem=stem)
    else:
        hint = f"check the path; a relative one is read from the folder trinity runs in ({Path.cwd()})"
    return Issue(message, key=dotted(key), source=where, hint=hint)
