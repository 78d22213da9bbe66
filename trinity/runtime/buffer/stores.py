"""The storage types of the experience buffer behind one interface: add, take(n, step), rewind.

- `queue`: in memory; with `path: sqlite:///x.db` every experience is also in SQLite, so a
  restarted trainer loses nothing;
- `sql`: SQLite only (an explorer and a trainer process can share it);
- `file`: JSONL, read by position: step s consumes lines (s-1)*n .. s*n-1, so a resume needs no state;
- a data set (SFT): rows of a local data set, tokenised, served by position like `file`.
"""

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

    def drop_stale(self, min_version: int, step: int) -> int:
        """Drop the waiting experiences made by weights older than `min_version` (marked consumed by `step`)."""
        fresh = deque(e for e in self.items if e.weight_version >= min_version)
        dropped, self.items = len(self.items) - len(fresh), fresh
        if self.persist and dropped:
            self.persist.drop_stale(min_version, step)
        return dropped

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
    """A trainer's data set, read through its data selector (data_selector; upstream's default reads it in order):
    (prompt, response) token ids of each SFT sample, a chosen and a rejected one (adjacent) of each DPO pair, or one
    raw text whose every token but the first is trained (continued pre-training, as Trinity-RFT's formatter does).
    `data` says which (config/algorithms/presets.py)."""

    def __init__(
        self,
        rows: list[dict],
        fmt: Any,
        tokenizer: Any,
        selector: Any = None,
        template: str | None = None,
        data: str = "sft",
    ):
        from ...config.schema.buffer import DataSelectorConfig
        from ..data import selectors

        if fmt.enable_concatenated_multi_turn and (data != "sft" or fmt.prompt_type == "plaintext"):
            raise ValueError(
                "format.enable_concatenated_multi_turn trains the assistant turns of an SFT data set's messages; this "
                f"is a {data} data set of {fmt.prompt_type} rows: set prompt_type: messages, or leave it false"
            )
        self.samples = [ENCODERS[data](row, fmt, tokenizer, template) for row in rows]  # each a list of experiences
        self.selector = selectors.build(rows, selector or DataSelectorConfig())  # built from the rows: their features

    def add(self, experiences: list[Experience]) -> None:
        raise ValueError("an SFT data set is read-only")

    def take(self, n: int, step: int) -> list[Experience]:
        """The `n` experiences of train step `step`: n // len(sample) whole samples (a pair is two experiences), the
        selector's at positions (step - 1) x that count onward."""
        count = n // len(self.samples[0])
        picked = [self.samples[i] for i in self.selector.pick((step - 1) * count, count)]
        return [exp for sample in picked for exp in sample]

    def rewind(self, after_step: int | None) -> int:
        return 0


def _tokens(text: str, tokenizer: Any) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _sft(row: dict, fmt: Any, tokenizer: Any, template: str | None) -> list[Experience]:
    from ..data.prompts import sft_pair

    if fmt.enable_concatenated_multi_turn:
        return [_every_turn(row, fmt, tokenizer, template)]
    prompt, response = sft_pair(row, fmt, tokenizer, template)
    return [Experience(_tokens(prompt, tokenizer), _tokens(response, tokenizer) + [tokenizer.eos_token_id])]


def _every_turn(row: dict, fmt: Any, tokenizer: Any, template: str | None) -> Experience:
    """One conversation whose every assistant turn is trained, as a multi-turn rollout is: each reply's tokens and
    end of sequence marked as the model's, the other messages as the chat template renders them between."""
    from ..data.prompts import sft_turns, template_of, tools_of
    from ..workflows.conversation import ChatTemplate, Conversation

    opening, turns = sft_turns(row, fmt)
    chat = ChatTemplate(tokenizer, template_of(fmt, template), fmt.enable_thinking, tools_of(row, fmt))
    talk = Conversation(chat, opening)
    for text, after in turns:
        ids = _tokens(text, tokenizer) + [tokenizer.eos_token_id]
        talk.add_reply(ids, [0.0] * len(ids), text, 0)
        if after:
            talk.add_messages(after)
    return talk.experience(0.0, "")


def _pair(row: dict, fmt: Any, tokenizer: Any, template: str | None) -> list[Experience]:
    from ..data.prompts import dpo_triple

    prompt, chosen, rejected = dpo_triple(row, fmt, tokenizer, template)
    ids = _tokens(prompt, tokenizer)
    return [Experience(ids, _tokens(reply, tokenizer) + [tokenizer.eos_token_id]) for reply in (chosen, rejected)]


def _text(row: dict, fmt: Any, tokenizer: Any, template: str | None) -> list[Experience]:
    ids = tokenizer(str(row[fmt.prompt_key]))["input_ids"]  # with the tokenizer's special tokens, as upstream's
    return [Experience(ids[:1], ids[1:])]


# data kind -> a row's experiences
ENCODERS = {"sft": _sft, "pairs": _pair, "text": _text}
