"""Experiences in SQLite: written when produced, marked with the train step that consumed them.

Marking (rather than deleting) makes a resume exact: a trainer restarted from the checkpoint of
step N gives back what steps after N consumed, and nothing is trained twice or lost.
"""

import sqlite3
from pathlib import Path

from ..experience import Experience

SCHEMA = """
CREATE TABLE IF NOT EXISTS experiences (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    body TEXT NOT NULL,
    consumed_step INTEGER
)
"""


class SqliteStore:
    """A table of experiences in one SQLite file (WAL mode: an explorer and a trainer process may share it)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), timeout=60, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(SCHEMA)

    def add(self, experiences: list[Experience]) -> None:
        """Append in one transaction."""
        with self.db:
            self.db.executemany("INSERT INTO experiences (body) VALUES (?)", [(e.to_json(),) for e in experiences])

    def take(self, n: int, step: int) -> list[Experience]:
        """The `n` oldest unconsumed experiences, marked consumed by `step`; fewer if fewer wait."""
        with self.db:
            rows = self.db.execute(
                "SELECT id, body FROM experiences WHERE consumed_step IS NULL ORDER BY id LIMIT ?", (n,)
            ).fetchall()
            if len(rows) < n:
                return []
            self.db.executemany(
                "UPDATE experiences SET consumed_step = ? WHERE id = ?", [(step, row[0]) for row in rows]
            )
        return [Experience.from_json(body) for _, body in rows]

    def drop_stale(self, min_version: int, step: int) -> int:
        """Mark the waiting experiences made by weights older than `min_version` consumed by `step`, unread (a
        rewind past `step` gives them back, to be judged again)."""
        with self.db:
            cursor = self.db.execute(
                "UPDATE experiences SET consumed_step = ? "
                "WHERE consumed_step IS NULL AND json_extract(body, '$.weight_version') < ?",
                (step, min_version),
            )
        return cursor.rowcount

    def waiting(self) -> int:
        """Experiences not consumed yet."""
        return self.db.execute("SELECT COUNT(*) FROM experiences WHERE consumed_step IS NULL").fetchone()[0]

    def rewind(self, after_step: int | None) -> int:
        """Give back what steps after `after_step` consumed (None: everything); returns how many."""
        with self.db:
            cursor = self.db.execute(
                "UPDATE experiences SET consumed_step = NULL WHERE consumed_step > ?",
                (after_step if after_step is not None else -1,),
            )
        return cursor.rowcount

    def pending(self) -> list[Experience]:
        """Every unconsumed experience, oldest first (to refill an in-memory queue on restart)."""
        return [
            Experience.from_json(b)
            for (b,) in self.db.execute("SELECT body FROM experiences WHERE consumed_step IS NULL ORDER BY id")
        ]
