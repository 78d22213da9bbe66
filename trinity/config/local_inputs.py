"""What a run reads from this machine's disk: its tasksets, SFT data sets and model, where a local path names them.

A missing local path is caught here, in a second, by `trinity config validate` and before `trinity run` starts Ray,
instead of inside a role ten minutes later; names of hub repos are `hub.issues`' (validate) and the driver's fetch
(run), which hands this check their local folders. `render` and `run --dry-run` only describe, so they do not look.
"""

from pathlib import Path

from ..errors import Issue, dotted
from . import modes
from .hub.names import hub_name
from .inputs import data_inputs
from .model_folder import hf_config
from .resolve import ResolvedConfig
from .schema import RunConfig

MODEL_FOLDER = "a folder with the model's config.json and weights, or a model on the hub by name (org/name)"


def data_issues(resolved: ResolvedConfig) -> list[Issue]:
    """An error for every data set the run (or one of its stages) reads that is not on disk."""
    issues: list[Issue] = []
    for label, config, provenance in resolved.labelled():
        for data_input in data_inputs(config):
            key, storage = (*data_input.key, "path"), data_input.storage
            path = storage.path
            if path and not Path(path).exists() and hub_name(path, "dataset") is None:
                issue = _missing(key, path, provenance.where(key), label)
                if issue not in issues:
                    issues.append(issue)
    return issues


def model_issues(config: RunConfig, resolved: ResolvedConfig) -> list[Issue]:
    """An error when the policy model is not a local folder with a config.json (checked by `run` only; a hub repo's
    name is the driver's fetch's, and checked here on its folder)."""
    path = Path(config.model.model_path)
    if config.model.external_model.enable:  # the API's model answers: nothing loads model_path (inputs.model_inputs)
        return []
    if (path / "config.json").is_file() or hub_name(config.model.model_path, "model"):
        return []
    return [
        Issue(
            f"{config.model.model_path!r} is not a model folder (no config.json there)",
            key="model.model_path",
            source=resolved.provenance.where(("model", "model_path")),
            allowed=MODEL_FOLDER,
            hint=f"check the path; a relative one is read from the folder trinity runs in ({Path.cwd()})",
        )
    ]


def auxiliary_issues(resolved: ResolvedConfig) -> list[Issue]:
    """An error for each auxiliary model whose engines would start that is not a local model folder (checked by `run`
    only; a hub repo's name is the driver's fetch's, and checked here on its folder)."""
    issues: list[Issue] = []
    for label, config, provenance in resolved.labelled():
        if not modes.mode(config.mode).runs_engines:
            continue
        for i, auxiliary in enumerate(config.explorer.auxiliary_models):
            path = auxiliary.model_path
            if not path or (Path(path) / "config.json").is_file() or hub_name(path, "model"):
                continue
            key = ("explorer", "auxiliary_models", i, "model_path")
            issue = Issue(
                f"{path!r} is not a model folder (no config.json there){label}",
                key=dotted(key),
                source=provenance.where(key),
                allowed=MODEL_FOLDER,
                hint=f"check the path; a relative one is read from the folder trinity runs in ({Path.cwd()})",
            )
            if issue not in issues:
                issues.append(issue)
    return issues


def teacher_issues(resolved: ResolvedConfig) -> list[Issue]:
    """An error for a distillation teacher that is not a local model folder, or whose vocabulary differs from the
    policy model's: its log-probs are read at the student's token ids (checked by `run` only)."""
    policy = _vocab(Path(resolved.config.model.model_path))
    issues: list[Issue] = []
    for _, config, provenance in resolved.labelled():
        teacher = config.model.teacher_model_path
        if not teacher or hub_name(teacher, "model"):  # a hub repo's name: checked once fetched
            continue
        where, vocab = provenance.where(("model", "teacher_model_path")), _vocab(Path(teacher))
        if vocab is None:
            issue = Issue(
                f"{teacher!r} is not a model folder (no config.json there)",
                key="model.teacher_model_path",
                source=where,
                allowed=MODEL_FOLDER,
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


def _missing(key: tuple, path: str, where: str, label: str) -> Issue:
    return Issue(
        f"{path!r} is not on this machine{label}",
        key=dotted(key),
        source=where,
        allowed="a data file or folder here, or a data set on the hub by name (org/name)",
        hint=f"check the path; a relative one is read from the folder trinity runs in ({Path.cwd()})",
    )
