"""A stand-in for the Hugging Face hub on loopback, for the real huggingface_hub client (`HF_ENDPOINT=<its url>`).

It serves what huggingface_hub's `repo_info`, `list_repo_tree`, `hf_hub_download` and `snapshot_download` ask of the
hub, in the hub's own shapes: `GET /api/{models,datasets}/{id}[/revision/{rev}]` (`sha`, `siblings`, `cardData` from
the card's front matter), `GET /api/.../tree/{rev}` (recursive listing), `HEAD|GET [/datasets]/{id}/resolve/{rev}/
{path}` (`X-Repo-Commit`, `ETag` = the git blob id, `Range` answered with 206), and its refusals with the
`X-Error-Code` the client maps to its errors (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo: 401 without a
token, 403 with one that has no access). Faults, for the tests: `cut(path, n)` ends the next download of a file after
n bytes (the client resumes with a Range request); `hang()` makes every API request wait without answering.
Nothing leaves 127.0.0.1; every request is logged in `requests`.
"""

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml


def blob_id(data: bytes) -> str:
    """git's id of a file's content, which the hub gives as a file's ETag."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    commits: dict = field(default_factory=dict)  # commit -> {path: bytes}
    refs: dict = field(default_factory=dict)  # branch or tag -> commit
    gated: bool = False
    granted: frozenset = frozenset()  # tokens with access to a gated repo


class StandInHub:
    """The hub stand-in: `publish` repos, `start`, point HF_ENDPOINT at `url`, `close`."""

    def __init__(self):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[tuple[str, str, str]] = []  # (method, path, Range header)
        self.cuts: dict[str, int] = {}
        self.hanging = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    def publish(self, repo_type: str, repo_id: str, files: dict[str, bytes], revision: str = "main", **options) -> str:
        """A new commit of `files` on `revision` (the repo made on first use); returns the commit."""
        repo = self.repos.setdefault((repo_type, repo_id), Repo(repo_type, repo_id, **options))
        digest = hashlib.sha1(repr(sorted((p, blob_id(d)) for p, d in files.items())).encode())
        digest.update(repo.refs.get(revision, "").encode())
        commit = digest.hexdigest()
        repo.commits[commit] = dict(files)
        repo.refs[revision] = commit
        return commit

    def cut(self, path: str, after: int) -> None:
        """The next GET of the file `path` (any repo) sends `after` bytes, then drops the connection."""
        self.cuts[path] = after

    def hang(self) -> None:
        """Every API request from now on waits without an answer (a hub out of reach, as a firewall drops it)."""
        self.hanging.set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "StandInHub":
        hub = self

        class Handler(_Handler):
            owner = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        self.hanging.clear()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def repo_requests(self) -> list[str]:
        """The paths of the API requests about repos (not huggingface_hub's own registry)."""
        return [p for _, p, _ in self.requests if p.startswith(("/api/models/", "/api/datasets/"))]

    def downloads(self, path: str) -> list[tuple[str, str, str]]:
        """The GET requests of one file's content."""
        return [r for r in self.requests if r[0] == "GET" and "/resolve/" in r[1] and r[1].endswith("/" + path)]


class _Handler(BaseHTTPRequestHandler):
    owner: StandInHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: the tests read `requests`
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        path = urlsplit(self.path).path
        self.owner.requests.append((self.command, path, self.headers.get("Range", "")))
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[0] == "api":
            if self.owner.hanging.is_set():
                time.sleep(30)
                return
            return self._api(parts[1:])
        repo_type = "dataset" if parts[0] == "datasets" else "model"
        parts = parts[1:] if repo_type == "dataset" else parts
        if len(parts) < 5 or parts[2] != "resolve":
            return self._error(404, "EntryNotFound", "no such route")
        self._file(repo_type, "/".join(parts[:2]), parts[3], "/".join(parts[4:]), body)

    def _api(self, parts: list[str]) -> None:
        if parts == ["agent-harnesses"]:  # huggingface_hub's own registry, asked once a day for its User-Agent
            return self._json({"standardEnvVars": [], "harnesses": {}})
        kind = {"models": "model", "datasets": "dataset"}.get(parts[0])
        if kind is None or len(parts) < 3:
            return self._error(404, "", "no such route")
        repo_id, rest = "/".join(parts[1:3]), parts[3:]
        revision = rest[1] if len(rest) > 1 else "main"
        found = self._commit(kind, repo_id, revision)
        if found is None:
            return
        repo, commit = found
        files = repo.commits[commit]
        if rest[:1] == ["tree"]:
            listing = [{"type": "file", "oid": blob_id(d), "size": len(d), "path": p} for p, d in sorted(files.items())]
            return self._json(listing)
        card = _card(files.get("README.md", b""))
        info = {
            "_id": repo_id,
            "id": repo_id,
            "sha": commit,
            "private": False,
            "gated": "manual" if repo.gated else False,
            "siblings": [{"rfilename": p} for p in sorted(files)],
        }
        self._json(info | ({"cardData": card} if card else {}))

    def _file(self, kind: str, repo_id: str, revision: str, name: str, body: bool) -> None:
        found = self._commit(kind, repo_id, revision)
        if found is None:
            return
        repo, commit = found
        data = repo.commits[commit].get(name)
        if data is None:
            return self._error(404, "EntryNotFound", f"{name} is not in {repo_id} at {commit}")
        start = _range_start(self.headers.get("Range", ""))
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{blob_id(data)}"')
        self.send_header("Content-Length", str(len(data) - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if not body:
            return
        cut = self.owner.cuts.pop(name, None)
        if cut is not None:  # a connection lost mid-file
            self.wfile.write(data[start : start + cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(data[start:])

    def _commit(self, kind: str, repo_id: str, revision: str) -> tuple[Repo, str] | None:
        """The repo and the commit `revision` names, after the access check; None once a refusal is sent."""
        repo = self.owner.repos.get((kind, repo_id))
        if repo is None:
            self._error(401, "RepoNotFound", "Repository not found")  # as the hub answers one it will not name
            return None
        if repo.gated:
            token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if not token:
                self._error(401, "GatedRepo", "Access to this repo is restricted: you must be authenticated")
                return None
            if token not in repo.granted:
                self._error(
                    403, "GatedRepo", "Access to this repo is restricted and you are not in the authorized list"
                )
                return None
        commit = revision if revision in repo.commits else repo.refs.get(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None
        return repo, commit

    def _json(self, data) -> None:
        payload = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _error(self, status: int, code: str, message: str) -> None:
        payload = json.dumps({"error": message}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)


def _range_start(header: str) -> int:
    if header.startswith("bytes=") and header[6:].split("-")[0].isdigit():
        return int(header[6:].split("-")[0])
    return 0


def _card(readme: bytes) -> dict:
    text = readme.decode("utf-8", errors="replace")
    if not text.startswith("---"):
        return {}
    head = text.split("---", 2)
    return (yaml.safe_load(head[1]) or {}) if len(head) == 3 else {}


def folder_files(folder: Path) -> dict[str, bytes]:
    """Every file of a local folder, as a repo's {path: content}."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def parquet(rows: list[dict]) -> bytes:
    """`rows` as a Parquet file's bytes."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


GSM8K_CARD = """\
---
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*
  - split: test
    path: main/test-*
- config_name: socratic
  data_files:
  - split: train
    path: socratic/train-*
---
# a stand-in of openai/gsm8k's layout
"""


def gsm8k_like(rows: list[dict], test_rows: list[dict]) -> dict[str, bytes]:
    """A data set repo laid out as openai/gsm8k is: a card with two subsets, Parquet shards under `<subset>/`, the
    train split in two shards."""
    half = len(rows) // 2
    return {
        "README.md": GSM8K_CARD.encode(),
        "main/train-00000-of-00002.parquet": parquet(rows[:half]),
        "main/train-00001-of-00002.parquet": parquet(rows[half:]),
        "main/test-00000-of-00001.parquet": parquet(test_rows),
        "socratic/train-00000-of-00001.parquet": parquet(rows[:1]),
    }
