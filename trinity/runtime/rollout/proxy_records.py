"""The serve proxy's call records (`explorer.db_url`): every call it forwards, in SQLite, and the rewards /feedback
gives them (Trinity-RFT's explorer/proxy/recorder.py keeps its calls the same way, as rows a reward is written to once).

One row per call: when, which engine answered, its status and time, the request and the response as the client sent
and got them (credentials masked), and the choices as token ids and log-probs (what an experience trains on). A
call is rewarded once: /feedback writes its reward, group and time to the row and returns the calls, which
`episodes.experiences` makes experiences of, as an engine's own /feedback does. The rows outlive the run (a later
serve run of the same database can still reward them).
"""

import json
import sqlite3
import threading
import time
from pathlib import Path

from ...config.redact import MASK, is_secret_name, redact
from .history import RecordedCall

TABLE = "proxy_history"  # Trinity-RFT's table name
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    row INTEGER PRIMARY KEY AUTOINCREMENT,
    response_id TEXT,
    created REAL NOT NULL,
    path TEXT NOT NULL,
    engine INTEGER,
    engine_url TEXT,
    status INTEGER NOT NULL,
    seconds REAL NOT NULL,
    weight_version INTEGER,
    headers TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    choices TEXT,
    reward REAL,
    reward_group TEXT,
    rewarded_at REAL
);
CREATE INDEX IF NOT EXISTS {TABLE}_response_id ON {TABLE} (response_id);
"""


def masked_headers(headers: dict) -> dict:
    """`headers` with every credential's value masked (`Bearer ***`: an Authorization's scheme stays readable)."""
    out = {}
    for name, value in headers.items():
        if is_secret_name(name):
            scheme = value.split(" ", 1)[0] if " " in value else ""
            value = f"{scheme} {MASK}" if scheme else MASK
        out[name] = value
    return out


class CallRecords:
    """The database at `path` (":memory:": one that ends with the process); safe to use from several threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.Lock()
        with self._lock:
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def record(
        self,
        path: str,
        engine: int | None,
        engine_url: str | None,
        status: int,
        seconds: float,
        headers: dict,
        request: object,
        response: object,
        calls: list[RecordedCall] | None = None,
    ) -> None:
        """Keep one forwarded call; `calls`: its choices as the engine generated them (None: it failed)."""
        response_id = response.get("id") if isinstance(response, dict) and status == 200 else None
        choices = None
        if calls is not None:
            choices = json.dumps(
                [
                    {
                        "prompt_ids": c.prompt_ids,
                        "response_ids": c.response_ids,
                        "logprobs": c.logprobs,
                        "text": c.text,
                        "finish_reason": c.finish_reason,
                    }
                    for c in calls
                ]
            )
        version = calls[0].weight_version if calls else None
        row = (
            response_id,
            time.time(),
            path,
            engine,
            engine_url,
            status,
            seconds,
            version,
            json.dumps(masked_headers(headers)),
            json.dumps(redact(request)),
            json.dumps(response),
            choices,
        )
        with self._lock:
            self._db.execute(
                f"INSERT INTO {TABLE} (response_id, created, path, engine, engine_url, status, seconds, "
                "weight_version, headers, request, response, choices) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )

    def reward(self, ids: list[str], reward: float, group: str) -> tuple[list[RecordedCall], list[str]]:
        """Write `reward` to the calls `ids` (in that order) and return their choices; or, when some id waits for no
        reward here (unknown, failed, rewarded already), nothing is written and those ids come back as the second
        value."""
        marks = ",".join("?" * len(ids))
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                rows = self._db.execute(
                    f"SELECT response_id, choices, weight_version FROM {TABLE} WHERE response_id IN ({marks}) "
                    "AND rewarded_at IS NULL AND choices IS NOT NULL",
                    ids,
                ).fetchall()
                found = {r[0]: r for r in rows}
                missing = [i for i in ids if i not in found]
                if missing:
                    self._db.execute("ROLLBACK")
                    return [], missing
                self._db.execute(
                    f"UPDATE {TABLE} SET reward = ?, reward_group = ?, rewarded_at = ? WHERE response_id IN ({marks})",
                    [reward, group, time.time(), *ids],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        calls = []
        for i in dict.fromkeys(ids):
            _, choices, version = found[i]
            calls += [
                RecordedCall(
                    i, c["prompt_ids"], c["response_ids"], c["logprobs"], c["text"], version, c["finish_reason"]
                )
                for c in json.loads(choices)
            ]
        return calls, []

    def counts(self) -> dict[str, int]:
        """Calls recorded, those that failed, and those rewarded."""
        with self._lock:
            total, failed, rewarded = self._db.execute(
                f"SELECT COUNT(*), SUM(status != 200), SUM(rewarded_at IS NOT NULL) FROM {TABLE}"
            ).fetchone()
        return {"calls": total, "failed_calls": failed or 0, "rewarded_calls": rewarded or 0}
