"""The storage types of the experience buffer behind one interface: add, take(n, step), rewind.

- `queue`: in memory; with `path: sqlite:///x.db` every experience is also in SQLite, so a
  restarted trainer loses nothing;
- `sql`: SQLite only (an explorer and a trainer process can share it);
- `file`: JSONL, read by position: step s consumes lines (s-1)*n .. s*n-1, so a resume needs no state;
- a data set (SFT): rows of a local data set, tokenised, served by position like `file`.
"""

import random
from collections import deque
from pathlib import Path
from typing import Any

from ..experience import Experience
from .sqlite_store import SqliteStore

SQLITE_PREFIX = "sqlite:///"


def sqlite_path(url: str, run_dir: Path) -> Path:
    """`sqlite:///x.db` -> a path; a relative one lives in the run directory."""
    path = Path(url[len(SQLITE_PREFIX) :])
    return path if path.is_absolute() else run_dir / path


class MemoryQueue:
    def __init__(self, persist: SqliteStore | None = None):
        self.items: deque = deque()
        self.persist = persist
        if persist:  # a restarted run picks up what was produced and not consumed
            self.items.extend(persist.pending())

    def add(self, experiences: list[Experience]) -> None:
        if self.persist:
            self.persist.add(experiences)
        self.items.extend(experiences)

    def take(self, n: int, step: int) -> list[Experience]:
        if len(self.items) < n:
            return []
        if self.persist:
            self.persist.take(n, step)  # same order as the queue: oldest first
        return [self.items.popleft() for _ in range(n)]

    def rewind(self, after_step: int | None) -> int:
        if not self.persist:
            return 0
        count = self.persist.rewind(after_step)
        self.items = deque(self.persist.pending())
        return count


class JsonlFile:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def add(self, experiences: list[Experience]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write("".join(e.to_json() + "\n" for e in experiences))

    def take(self, n: int, step: int) -> list[Experience]:
        with self.path.open(encoding="utf-8") as fh:
            lines = [line for line in fh if line.endswith("\n")][(step - 1) * n : step * n]
        return [Experience.from_json(line) for line in lines] if len(lines) == n else []

    def rewind(self, after_step: int | None) -> int:
        return 0  # reading by position needs no bookkeeping


class DataSet:
    """SFT samples: (prompt, response) token ids of a local data set, one shuffled pass per epoch."""

    def __init__(self, rows: list[dict], fmt: Any, tokenizer: Any, seed: int, template: str | None = None):
        from ..data.prompts import sft_pair

        self.samples = [self._encode(*sft_pair(row, fmt, tokenizer, template), tokenizer) for row in rows]
        self.seed = seed
        self.orders: dict[int, list[int]] = {}

    @staticmethod
    def _encode(prompt: str, response: str, tokenizer: Any) -> Experience:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        response_ids = tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        return Experience(prompt_ids, response_ids)

    def add(self, experiences: list[Experience]) -> None:
        raise ValueError("an SFT data set is read-only")

    def take(self, n: int, step: int) -> list[Experience]:
        size = len(self.samples)
        return [self.samples[self._order(i // size)[i % size]] for i in range((step - 1) * n, step * n)]

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self.orders:
            self.orders = {epoch: list(range(len(self.samples)))}  # one epoch's order at a time
            random.Random(self.seed + epoch).shuffle(self.orders[epoch])
        return self.orders[epoch]

    def rewind(self, after_step: int | None) -> int:
        return 0
