"""Experiences in SQLite: written when produced, marked with the train step that consumed them.

Marking (rather than deleting) makes a resume exact: a trainer restarted from the checkpoint of
step N gives back what steps after N consumed, and nothing is trained twice or lost. Each row also
records the stage that stored it, its explore step and the stage that consumed it (scope.py: what a
stage reads, gives back and drops; a database of an earlier trinity gains the columns, empty, and its
rows count as every stage's, as they did). An operation
SQLite refuses (a database locked past its busy timeout, a disk I/O error) is tried again, as
Trinity-RFT's SQL storage does (buffer/utils.py `async_run_with_retry_session`): max(1, max_retry_times)
attempts in all, max_retry_interval seconds apart, then the last error stands.
"""

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ..experience import Experience
from .scope import Resumed, Scope

SCHEMA = """
CREATE TABLE IF NOT EXISTS experiences (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    body TEXT NOT NULL,
    consumed_step INTEGER
)
"""
SCOPE_COLUMNS = {"stage": "TEXT", "explore_step": "INTEGER", "consumed_by": "TEXT"}  # added to older databases


T = TypeVar("T")


class SqliteStore:
    """A table of experiences in one SQLite file (WAL mode: an explorer and a trainer process may share it).
    `retries`: (max_retry_times, max_retry_interval) of the experience buffer; `busy_s`: how long one attempt waits
    for another process's lock; `scope`: the stage that stores and consumes through it (None: rows of no stage,
    any row read)."""

    def __init__(
        self, path: Path, retries: tuple[int, float] = (3, 1.0), busy_s: float = 60, scope: Scope | None = None
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.attempts, self.interval = max(1, retries[0]), retries[1]
        self.scope = scope
        self.db = sqlite3.connect(str(path), timeout=busy_s, isolation_level=None, check_same_thread=False)
        self._retried(lambda: self.db.execute("PRAGMA journal_mode=WAL"))
        self._retried(self._create)
        # the rows this stage may read: its own where it explores (and rows of no stage), else any
        self.readable = " AND (stage = :scope OR stage IS NULL)" if scope and scope.own_rows else ""
        self.names = {"scope": scope.name if scope else None}

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction, taking the write lock at its start (autocommit mode opens none by itself): another
        process sees all of it or none, and one killed inside it leaves nothing."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:  # SQLite may have rolled it back itself (a full disk): its error stands
                self.db.execute("ROLLBACK")
            raise

    def _create(self) -> None:
        with self._transaction():
            self.db.execute(SCHEMA)
            have = {row[1] for row in self.db.execute("PRAGMA table_info(experiences)")}
            for column, kind in SCOPE_COLUMNS.items():
                if column not in have:
                    self.db.execute(f"ALTER TABLE experiences ADD COLUMN {column} {kind}")

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

    def add(self, experiences: list[Experience], step: int | None = None) -> None:
        """Append in one transaction; `step`: the explore step that made them."""
        rows = [(e.to_json(), self.names["scope"], step) for e in experiences]

        def insert() -> None:
            with self._transaction():
                self.db.executemany("INSERT INTO experiences (body, stage, explore_step) VALUES (?, ?, ?)", rows)

        self._retried(insert)

    def take(self, n: int, step: int) -> list[Experience]:
        """The `n` oldest unconsumed experiences, marked consumed by `step`; fewer if fewer wait."""

        def mark() -> list:
            with self._transaction():
                rows = self.db.execute(
                    f"SELECT id, body FROM experiences WHERE consumed_step IS NULL{self.readable} ORDER BY id LIMIT :n",
                    self.names | {"n": n},
                ).fetchall()
                if len(rows) < n:
                    return []
                self.db.executemany(
                    "UPDATE experiences SET consumed_step = ?, consumed_by = ? WHERE id = ?",
                    [(step, self.names["scope"], row[0]) for row in rows],
                )
            return rows

        return [Experience.from_json(body) for _, body in self._retried(mark)]

    def drop_stale(self, min_version: int, step: int) -> int:
        """Mark the waiting experiences made by weights older than `min_version` consumed by `step`, unread (a
        rewind past `step` gives them back, to be judged again)."""
        return self._update(
            "UPDATE experiences SET consumed_step = :step, consumed_by = :scope "
            f"WHERE consumed_step IS NULL AND json_extract(body, '$.weight_version') < :version{self.readable}",
            self.names | {"step": step, "version": min_version},
        )

    def waiting(self) -> int:
        """Experiences this stage may read, not consumed yet."""
        query = f"SELECT COUNT(*) FROM experiences WHERE consumed_step IS NULL{self.readable}"
        return self._retried(lambda: self.db.execute(query, self.names).fetchone()[0])

    def rewind(self, after_step: int | None, resumed: bool = True) -> Resumed:
        """This stage set up from the checkpoint of its train step `after_step` (0: its start; None: it does not
        train, so nothing is given back or dropped): where it explores, its own rows of explore steps after it that no
        kept step took part of dropped, then what its steps after it consumed given back (scope.py). Rows consumed by
        no stage (an earlier trinity's, or through a store of no scope) count as its own where it `resumed` from a
        checkpoint or restarted, as they did. Its explore steps with rows stored are kept: a second run of one stores
        nothing."""
        mine = f"(consumed_by = :scope{' OR consumed_by IS NULL' if resumed or self.scope is None else ''})"
        values = self.names | {"k": after_step}

        def run() -> Resumed:
            dropped = given = 0
            with self._transaction():
                if after_step is not None and self.readable:
                    dropped = self.db.execute(DROP.format(mine=mine), values).rowcount
                if after_step is not None:
                    give_back = (
                        "UPDATE experiences SET consumed_step = NULL, consumed_by = NULL WHERE consumed_step > :k AND "
                    )
                    given = self.db.execute(give_back + mine, values).rowcount
                kept = self.db.execute(
                    "SELECT DISTINCT explore_step FROM experiences WHERE stage = :scope AND explore_step IS NOT NULL",
                    self.names,
                ).fetchall()
            return Resumed(given, dropped, frozenset(step for (step,) in kept), 0)

        done = self._retried(run)
        return done._replace(waiting=self.waiting())

    def _update(self, statement: str, values: dict) -> int:
        """Rows an UPDATE changed, in one transaction."""

        def run() -> int:
            with self._transaction():
                return self.db.execute(statement, values).rowcount

        return self._retried(run)

    def pending(self) -> list[Experience]:
        """Every unconsumed experience this stage may read, oldest first (to refill an in-memory queue)."""
        query = f"SELECT body FROM experiences WHERE consumed_step IS NULL{self.readable} ORDER BY id"
        return [
            Experience.from_json(b) for (b,) in self._retried(lambda: self.db.execute(query, self.names).fetchall())
        ]


# a stage's own rows of explore steps after the checkpoint that no kept train step took any of (a step partly taken
# stays whole: its second run stores nothing), waiting or taken by its steps after the checkpoint ({mine})
DROP = """
DELETE FROM experiences
WHERE stage = :scope AND explore_step > :k AND (consumed_step IS NULL OR (consumed_step > :k AND {mine}))
AND explore_step NOT IN (
    SELECT explore_step FROM experiences WHERE stage = :scope AND explore_step IS NOT NULL AND consumed_step <= :k
)
"""
