"""Experiences in SQLite: written when produced, marked with the train step that consumed them.

Marking (rather than deleting) makes a resume exact: a trainer restarted from the checkpoint of
step N gives back what steps after N consumed, and nothing is trained twice or lost. An operation
SQLite refuses (a database locked past its busy timeout, a disk I/O error) is tried again, as
Trinity-RFT's SQL storage does (buffer/utils.py `async_run_with_retry_session`): max(1, max_retry_times)
attempts in all, max_retry_interval seconds apart, then the last error stands.
"""

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..experience import Experience

SCHEMA = """
CREATE TABLE IF NOT EXISTS experiences (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    body TEXT NOT NULL,
    consumed_step INTEGER
)
"""


T = TypeVar("T")


class SqliteStore:
    """A table of experiences in one SQLite file (WAL mode: an explorer and a trainer process may share it).
    `retries`: (max_retry_times, max_retry_interval) of the experience buffer; `busy_s`: how long one attempt waits
    for another process's lock."""

    def __init__(self, path: Path, retries: tuple[int, float] = (3, 1.0), busy_s: float = 60):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.attempts, self.interval = max(1, retries[0]), retries[1]
        self.db = sqlite3.connect(str(path), timeout=busy_s, isolation_level=None, check_same_thread=False)
        self._retried(lambda: self.db.execute("PRAGMA journal_mode=WAL"))
        self._retried(lambda: self.db.execute(SCHEMA))

    def _retried(self, operation: Callable[[], T]) -> T:
        """`operation` (one transaction), tried again after an SQLite error until the attempts run out."""
        for attempt in range(1, self.attempts + 1):
            try:
                return operation()
            except sqlite3.OperationalError:
                if attempt == self.attempts:
                    raise
                time.sleep(self.interval)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def add(self, experiences: list[Experience]) -> None:
        """Append in one transaction."""
        rows = [(e.to_json(),) for e in experiences]

        def insert() -> None:
            with self.db:
                self.db.executemany("INSERT INTO experiences (body) VALUES (?)", rows)

        self._retried(insert)

    def take(self, n: int, step: int) -> list[Experience]:
        """The `n` oldest unconsumed experiences, marked consumed by `step`; fewer if fewer wait."""

        def mark() -> list:
            with self.db:
                rows = self.db.execute(
                    "SELECT id, body FROM experiences WHERE consumed_step IS NULL ORDER BY id LIMIT ?", (n,)
                ).fetchall()
                if len(rows) < n:
                    return []
                self.db.executemany(
                    "UPDATE experiences SET consumed_step = ? WHERE id = ?", [(step, row[0]) for row in rows]
                )
            return rows

        return [Experience.from_json(body) for _, body in self._retried(mark)]

    def drop_stale(self, min_version: int, step: int) -> int:
        """Mark the waiting experiences made by weights older than `min_version` consumed by `step`, unread (a
        rewind past `step` gives them back, to be judged again)."""
        return self._update(
            "UPDATE experiences SET consumed_step = ? "
            "WHERE consumed_step IS NULL AND json_extract(body, '$.weight_version') < ?",
            (step, min_version),
        )

    def waiting(self) -> int:
        """Experiences not consumed yet."""
        query = "SELECT COUNT(*) FROM experiences WHERE consumed_step IS NULL"
        return self._retried(lambda: self.db.execute(query).fetchone()[0])

    def rewind(self, after_step: int | None) -> int:
        """Give back what steps after `after_step` consumed (None: everything); returns how many."""
        return self._update(
            "UPDATE experiences SET consumed_step = NULL WHERE consumed_step > ?",
            (after_step if after_step is not None else -1,),
        )

    def _update(self, statement: str, values: tuple) -> int:
        """Rows an UPDATE changed, in one transaction."""

        def run() -> int:
            with self.db:
                return self.db.execute(statement, values).rowcount

        return self._retried(run)

    def pending(self) -> list[Experience]:
        """Every unconsumed experience, oldest first (to refill an in-memory queue on restart)."""
        query = "SELECT body FROM experiences WHERE consumed_step IS NULL ORDER BY id"
        return [Experience.from_json(b) for (b,) in self._retried(lambda: self.db.execute(query).fetchall())]
