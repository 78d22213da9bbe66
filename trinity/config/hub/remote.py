"""One bounded look-up of a hub name on the hub, through huggingface_hub's own client (imported here only).

The answer is the commit the revision points to, the repo's files and its card's front matter; or a `HubProblem`
saying what is wrong in words a user acts on. Nothing here waits longer than the timeout it is given.
"""

from dataclasses import dataclass
from typing import Literal

from .cache import HubSettings
from .names import HubName

LOOKUP_TIMEOUT_S = 5.0  # per request: `config validate` and `run` answer in seconds, also with no route to the hub

# missing, gated (no token or a refused one), denied (403), revision, unreachable: the hub's answers; offline and
# offline-incomplete: what the cache alone says under HF_HUB_OFFLINE; modelscope: a model asked of ModelScope
Problem = Literal[
    "missing", "gated", "denied", "revision", "unreachable", "offline", "offline-incomplete", "modelscope"
]


@dataclass(frozen=True)
class RemoteRepo:
    """What the hub says of a name at its revision."""

    commit: str
    files: tuple[str, ...]
    card: dict


class HubProblem(Exception):
    """The hub's answer for a name that cannot be used as it is: `kind` is what went wrong, the message why."""

    def __init__(self, kind: Problem, message: str):
        super().__init__(message)
        self.kind = kind


def look_up(name: HubName, settings: HubSettings, timeout_s: float = LOOKUP_TIMEOUT_S) -> RemoteRepo:
    """The repo `name` names, at its revision; HubProblem when the hub has no such repo or revision, refuses it, or
    cannot be reached within `timeout_s`."""
    import httpx
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = HfApi(endpoint=settings.endpoint)
    try:
        info = api.repo_info(name.repo_id, repo_type=name.repo_type, revision=name.revision, timeout=timeout_s)
    except GatedRepoError as exc:
        raise HubProblem("denied" if _status(exc) == 403 else "gated", _first_line(exc)) from None
    except RevisionNotFoundError as exc:
        raise HubProblem("revision", _first_line(exc)) from None
    except RepositoryNotFoundError as exc:
        raise HubProblem("missing", _first_line(exc)) from None
    except HfHubHTTPError as exc:
        kind: Problem = "denied" if _status(exc) in (401, 403) else "unreachable"
        raise HubProblem(kind, _first_line(exc)) from None
    except (httpx.TransportError, OSError) as exc:  # no route, refused, timed out, DNS: the hub is out of reach
        raise HubProblem("unreachable", f"{type(exc).__name__}: {exc}") from None
    card = info.card_data.to_dict() if getattr(info, "card_data", None) is not None else {}
    files = tuple(s.rfilename for s in info.siblings or ())
    return RemoteRepo(str(info.sha), files, card)


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
