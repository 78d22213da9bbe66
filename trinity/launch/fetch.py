"""The driver's fetch of every model and data set a run names by hub id: once, before Ray places anything.

Each name is located first, all at once and each within seconds (`config.hub.issues.located_inputs`: the cache, then the
hub unless HF_HUB_OFFLINE is set), so a wrong name, a gated repo or a missing subset ends the run in seconds with
the key that named it. Then each name not complete in the cache is downloaded by huggingface_hub's `snapshot_download`
at the commit its revision pointed to when located, with its progress bars, into the cache every HF tool shares:
files already there are kept (a run that was stopped resumes where it was), a file lands only whole, and the
snapshot is complete only when every file is there (`cache.cached`). `refs/<revision>` then names that commit, as
huggingface_hub records it. The roles get the snapshots' folders (`config.hub.local.localised`); `node_copies`
makes every node of the cluster hold them.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

from ..config.hub.cache import HubSettings, skipped, storage_folder
from ..config.hub.issues import Located, located_inputs
from ..config.hub.local import Fetched
from ..config.hub.names import HubName
from ..config.resolve import ResolvedConfig
from ..errors import FetchError, Issue
from ..utils.atomic import write_text_atomic

CACHE_SOURCE = "the hub cache"


@dataclass
class Inputs:
    """A run's hub names, located (no file downloaded yet): `problems` lists each key whose name cannot be had."""

    located: dict[HubName, Located]
    problems: list[Issue]
    pinned: dict[HubName, Fetched]
    settings: HubSettings

    def fetched(self, quiet: bool = False) -> dict[HubName, Fetched]:
        """Every name as a local folder: the pinned ones as they are, the others from the cache or downloaded now;
        FetchError where a name cannot be had."""
        if self.problems:
            raise FetchError(self.problems)
        fetched = dict(self.pinned)
        for name, located in self.located.items():
            fetched[name] = _fetched(located, self.settings, quiet)
        return fetched


def locate_inputs(
    resolved: ResolvedConfig, pinned: dict[HubName, Fetched] | None = None, settings: HubSettings | None = None
) -> Inputs:
    """Each hub name of `resolved` (each stage's) not in `pinned` (fetched earlier in this run, it keeps its commit),
    located at once, with every key whose name cannot be had as an error at that key."""
    settings = settings or HubSettings.from_env()
    pinned = dict(pinned or {})
    found, problems = located_inputs(resolved, settings, run=True, pinned=pinned)
    return Inputs(found, problems, pinned, settings)


def fetch(
    resolved: ResolvedConfig,
    quiet: bool = False,
    pinned: dict[HubName, Fetched] | None = None,
    settings: HubSettings | None = None,
) -> dict[HubName, Fetched]:
    """Every hub name of `resolved` as a local folder (`locate_inputs`, then `Inputs.fetched`)."""
    return locate_inputs(resolved, pinned, settings).fetched(quiet)


def _fetched(located: Located, settings: HubSettings, quiet: bool) -> Fetched:
    """The name's complete snapshot: the cache's, or downloaded now."""
    name, snapshot, remote = located.name, located.snapshot, located.remote
    if remote is None:  # located complete in the cache
        assert snapshot is not None
        if located.note and not quiet:
            print(f"note: {located.note}: {name.label} from the hub cache ({snapshot.commit[:12]})", file=sys.stderr)
        return Fetched(name, snapshot.commit, snapshot.folder, CACHE_SOURCE)
    if snapshot is not None and snapshot.commit == remote.commit and snapshot.complete:
        return Fetched(name, remote.commit, snapshot.folder, CACHE_SOURCE)
    if not quiet:
        print(
            f"fetching {name.label} at {remote.commit[:12]} from {settings.shown_endpoint} into {settings.cache}",
            file=sys.stderr,
        )
    folder = _download(name, remote.commit, skipped(remote.files, name.repo_type), settings, quiet)
    _write_ref(name, remote.commit, settings)
    return Fetched(name, remote.commit, folder, settings.shown_endpoint)


def _download(name: HubName, commit: str, ignore: tuple[str, ...], settings: HubSettings, quiet: bool) -> Path:
    """`snapshot_download` of the commit into the cache; FetchError with the cause when it cannot finish."""
    import httpx
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import disable_progress_bars

    if quiet:
        disable_progress_bars()
    try:
        folder = snapshot_download(
            name.repo_id,
            repo_type=name.repo_type,
            revision=commit,
            cache_dir=settings.cache,
            endpoint=settings.endpoint,
            ignore_patterns=list(ignore) or None,
        )
    except (HfHubHTTPError, httpx.HTTPError, OSError) as exc:
        cause = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise FetchError(
            [
                Issue(
                    f"the download of {name.label} ({commit[:12]}) from {settings.shown_endpoint} stopped: "
                    f"{type(exc).__name__}: {cause}",
                    key="hub",
                    source=str(settings.cache),
                    hint="run again: the files already downloaded are kept, and the download goes on from there",
                )
            ]
        ) from None
    return Path(folder)


def _write_ref(name: HubName, commit: str, settings: HubSettings) -> None:
    """`refs/<revision>` names the commit, as huggingface_hub records a branch or tag it resolved: a later run
    offline (HF_HUB_OFFLINE) finds the snapshot by the name as written."""
    if name.revision == commit:
        return
    ref = storage_folder(name, settings) / "refs" / name.revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(ref, commit)
