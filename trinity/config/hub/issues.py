"""Where each hub name of a config stands, and what `config validate` and `trinity run` say of it.

A name whose complete snapshot is in the cache is found offline. Otherwise, with `HF_HUB_OFFLINE` set, it cannot be
had (an error for a data set; for a model a note, since only `run` reads the model). Otherwise the hub is asked,
once per name, all names at once, each within LOOKUP_TIMEOUT_S: a missing repo, a gated one or a missing revision
is an error at the key that names it; a hub out of reach is one warning (`run` will download). A data set's subset
and split are checked against its card and files, cached or listed by the hub.
"""

from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import Issue, dotted
from ..data_files import DataError, SubsetError, folder_layout, layout, split_files
from .cache import COMMIT, DEFAULT_ENDPOINT, HubSettings, Snapshot, cached
from .names import HubName, NamedInput, named_inputs
from .remote import LOOKUP_TIMEOUT_S, HubProblem, Problem, RemoteRepo, look_up

if TYPE_CHECKING:
    from ..resolve import ResolvedConfig


@dataclass(frozen=True)
class Located:
    """Where a name stands: a complete cached snapshot, the hub's answer, or the problem that stops it; `note`: the
    hub was out of reach and the cache's copy stands in."""

    name: HubName
    snapshot: Snapshot | None = None
    remote: RemoteRepo | None = None
    problem: HubProblem | None = None
    note: str = ""


def locate(name: HubName, settings: HubSettings, ask_hub: bool = False) -> Located:
    """The cache first: a complete snapshot answers offline, and without `ask_hub` (`config validate`) or for a
    pinned commit also online. Otherwise the hub says which commit the revision names now (`trinity run`, as every
    HF tool does online), the cache standing in when the hub is out of reach."""
    if settings.modelscope and name.repo_type == "model":
        return Located(name, problem=HubProblem("modelscope", f"{settings.modelscope} is set"))
    snapshot = cached(name, settings)
    complete = snapshot is not None and snapshot.complete
    if complete and (settings.offline or not ask_hub or COMMIT.match(name.revision)):
        return Located(name, snapshot=snapshot)
    if settings.offline:
        kind: Problem = "offline-incomplete" if snapshot is not None else "offline"
        return Located(name, snapshot, problem=HubProblem(kind, "HF_HUB_OFFLINE is set"))
    try:
        return Located(name, snapshot, remote=look_up(name, settings))
    except HubProblem as problem:
        if problem.kind == "unreachable" and complete:
            return Located(name, snapshot, note=f"could not reach {settings.shown_endpoint} ({problem})")
        return Located(name, snapshot, problem=problem)


def locate_all(names: list[HubName], settings: HubSettings, ask_hub: bool = False) -> dict[HubName, Located]:
    """`locate` for each name, the hub asked for all at once (the bound is one look-up's, not their sum)."""
    unique = list(dict.fromkeys(names))
    if len(unique) <= 1:
        return {n: locate(n, settings, ask_hub) for n in unique}
    with ThreadPoolExecutor(max_workers=min(8, len(unique))) as pool:
        return dict(zip(unique, pool.map(lambda n: locate(n, settings, ask_hub), unique)))


def hub_issues(resolved: "ResolvedConfig", settings: HubSettings | None = None) -> list[Issue]:
    """Every problem with the config's hub names (`config validate`); a hub out of reach is one warning."""
    settings = settings or HubSettings.from_env()
    found, issues = located_inputs(resolved, settings)
    out_of_reach = [f for f in found.values() if f.problem is not None and f.problem.kind == "unreachable"]
    if out_of_reach:
        issues.append(unreachable_issue(sorted(f.name.text for f in out_of_reach), settings, out_of_reach[0].problem))
    return issues


def located_inputs(
    resolved: "ResolvedConfig", settings: HubSettings, run: bool = False, pinned: Collection[HubName] = ()
) -> tuple[dict[HubName, Located], list[Issue]]:
    """Each hub name of `resolved` (each stage's) but those `pinned`, located at once (`run`: the hub asked which
    commit each names now), and the issues of the keys that name them: for `run` each an error, the hub out of reach
    too; for `config validate` that is said once, by the caller."""
    named = [(label, item, p) for label, config, p in resolved.labelled() for item in named_inputs(config)]
    found = locate_all([item.name for _, item, _ in named if item.name not in pinned], settings, ask_hub=run)
    issues: list[Issue] = []
    for label, item, provenance in named:
        located = found.get(item.name)
        issue = input_issue(item, located, settings, provenance, label, run) if located is not None else None
        if issue is not None and issue not in issues:
            issues.append(issue)
    return found, issues


def input_issue(
    item: NamedInput, located: Located, settings: HubSettings, provenance: Any, label: str, run: bool = False
) -> Issue | None:
    """What is wrong with one key's name (None: nothing, or, for `config validate`, the hub out of reach)."""
    problem = located.problem
    if problem is not None and (run or problem.kind != "unreachable"):
        return problem_issue(item, located, settings, provenance.where(item.key), label, run)
    if item.name.repo_type != "dataset":
        return None
    return part_issue(item, located, provenance, label)


def part_issue(item: NamedInput, located: Located, provenance: Any, label: str) -> Issue | None:
    """A data set's subset or split that its card and files do not have; None where they do (or are unknown)."""
    if located.remote is not None:
        found = layout(located.remote.files, located.remote.card)
    elif located.snapshot is not None and located.snapshot.complete:
        found = folder_layout(located.snapshot.folder)
    else:
        return None
    try:
        split_files(found, item.subset, item.split or "train", item.name.text)
    except DataError as exc:
        key = (*item.key[:-1], "subset_name" if isinstance(exc, SubsetError) else "split")
        return Issue(
            f"{exc}{label}",
            key=dotted(key),
            source=provenance.where(key),
            hint="subset_name is the card's config_name; split one of its splits (datasets.load_dataset's name, split)",
        )
    return None


def problem_issue(
    item: NamedInput, located: Located, settings: HubSettings, where: str, label: str, run: bool = False
) -> Issue:
    """The error for a name the hub or the cache cannot give; for `config validate` (not `run`) a note for a model
    offline: only `run` reads models (validate checks no local model folder either), and the machine that runs may
    hold it."""
    name, problem = item.name, located.problem
    assert problem is not None
    message, hint = _words(name, problem, located.snapshot, settings)
    notes = not run and problem.kind == "offline" and name.repo_type == "model"
    return Issue(
        f"{message}{label}", key=dotted(item.key), source=where, hint=hint, severity="note" if notes else "error"
    )


def unreachable_issue(names: list[str], settings: HubSettings, problem: HubProblem | None) -> Issue:
    set_by = "HF_ENDPOINT" if settings.endpoint != DEFAULT_ENDPOINT else "the Hugging Face hub"
    return Issue(
        f"out of reach within {LOOKUP_TIMEOUT_S:g} s ({problem}): {', '.join(names)} not checked; trinity run "
        "downloads them, and stops there if the hub stays out of reach",
        source=f"{set_by} ({settings.shown_endpoint})",
        hint="on a machine without a network, fill the hub cache and set HF_HUB_OFFLINE=1 (docs/clusters.md); "
        "where the hub is slow or blocked, set HF_ENDPOINT to a mirror",
        severity="warning",
    )


def _download(name: HubName) -> str:
    kind = " --repo-type dataset" if name.repo_type == "dataset" else ""
    revision = f" --revision {name.revision}" if name.text != name.repo_id else ""
    return f"hf download {name.repo_id}{kind}{revision}"


def _words(name: HubName, problem: HubProblem, snapshot: Snapshot | None, settings: HubSettings) -> tuple[str, str]:
    """(message, hint) for each kind of problem."""
    endpoint, kind = settings.shown_endpoint, "data set" if name.repo_type == "dataset" else "model"
    if problem.kind == "offline":
        return (
            f"{name.text!r} is not in the hub cache ({settings.cache}) and HF_HUB_OFFLINE is set: trinity cannot "
            "download it",
            f"fill the cache where the hub (or a mirror, HF_ENDPOINT) is reachable: `{_download(name)}`, with "
            "HF_HUB_CACHE naming a folder this machine reads (docs/clusters.md); or unset HF_HUB_OFFLINE",
        )
    if problem.kind == "offline-incomplete":
        assert snapshot is not None
        more = len(snapshot.missing) - 3
        shown = ", ".join(snapshot.missing[:3]) + (f" and {more} more" if more > 0 else "")
        return (
            f"the cached snapshot of {name.text!r} ({snapshot.commit[:7]}) is incomplete, an interrupted download: "
            f"{len(snapshot.missing)} file(s) missing ({shown}); HF_HUB_OFFLINE is set",
            f"unset HF_HUB_OFFLINE so that trinity run completes it, or run `{_download(name)}` where the hub is "
            "reachable",
        )
    if problem.kind == "modelscope":
        folder = f"models/{name.repo_id.rsplit('/', 1)[-1]}"
        return (
            f"{settings.modelscope} is set, which sends model downloads to ModelScope: trinity fetches {name.text!r} "
            "from the Hugging Face hub only",
            f"fetch it yourself, `modelscope download {name.repo_id} --local_dir {folder}`, and set the key to "
            f"{folder}; or unset {settings.modelscope} to have trinity fetch it from the hub (HF_ENDPOINT: a mirror)",
        )
    if problem.kind == "missing":
        private = "" if settings.token_set else "; a private repo needs HF_TOKEN"
        return (
            f"{name.text!r} is neither a path on this machine nor a {kind} on {endpoint}",
            f"check the name (org/name, as on its hub page){private}; a relative path is read from the folder "
            f"trinity runs in ({Path.cwd()})",
        )
    if problem.kind == "gated":
        sent = "HF_TOKEN is not a valid token" if settings.token_set else "no token was sent (HF_TOKEN is not set)"
        return (
            f"{name.text!r} is gated on {endpoint} and {sent}",
            "accept its terms on its hub page, then set HF_TOKEN to a token of that account (or run `hf auth login`)",
        )
    if problem.kind == "unreachable":
        return (
            f"could not reach {endpoint} to fetch {name.text!r} ({problem}), and the hub cache ({settings.cache}) has "
            "no complete copy of it",
            "check the network, or set HF_ENDPOINT to a mirror; on a machine without a network fill the cache "
            "elsewhere and set HF_HUB_OFFLINE=1 (docs/clusters.md)",
        )
    if problem.kind == "denied":
        return (
            f"{name.text!r} is gated on {endpoint} and the account of HF_TOKEN has no access to it ({problem})",
            "request access on its hub page, or set HF_TOKEN to a token of an account that has it",
        )
    return (
        f"{name.repo_id!r} has no revision {name.revision!r} on {endpoint}",
        "after @ name a branch, tag or commit of the repo; without @ trinity reads main",
    )
