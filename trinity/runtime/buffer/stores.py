"""The storage types of the experience buffer behind one interface: add(experiences, step), take(n, step),
rewind(after_step, resumed) (scope.py: what a stage's setup gives back and drops).

- `queue`: in memory; with `path: sqlite:///x.db` every experience is also in SQLite, so a
  restarted trainer loses nothing;
- `sql`: SQLite only (an explorer and a trainer process can share it);
- `file`: JSONL, read by position: step s consumes the lines it may read (s-1)*n .. s*n-1, so what a
  resume gives back needs no record (what it drops is taken out of the file);
- a data set (SFT): rows of a local data set, tokenised, served by position like `file`.
"""

import json
import os
from collections import deque
from pathlib import Path
from typing import Any

from ...utils.atomic import write_text_atomic
from ..experience import Experience
from .scope import NOTHING, Resumed, Scope
from .sqlite_store import SqliteStore

STORED_BY, EXPLORE_STEP = "_stored_by", "_explore_step"  # a JSONL line's keys beside its experience's fields

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

    def add(self, experiences: list[Experience], step: int | None = None) -> None:
        if self.persist:
            self.persist.add(experiences, step)
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

    def rewind(self, after_step: int | None, resumed: bool = True) -> Resumed:
        if not self.persist:
            return NOTHING  # a new queue: what an earlier setup held is gone with its process
        done = self.persist.rewind(after_step, resumed)
        self.items = deque(self.persist.pending())
        return done


class JsonlFile:
    """One experience a line, read by position; where a stage writes or reads it (`scope`), each line starts with the
    stage that stored it and its explore step, and the stage reads the lines scope.py gives it."""

    def __init__(self, path: Path, scope: Scope | None = None):
        self.path, self.scope = path, scope
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        # a line this stage stored starts with its mark; a line of no stage with its experience's first field
        self.own = None if scope is None else "{" + json.dumps(STORED_BY) + ":" + json.dumps(scope.name) + ","
        self.marked = "{" + json.dumps(STORED_BY) + ":"

    def add(self, experiences: list[Experience], step: int | None = None) -> None:
        mark = {STORED_BY: self.scope.name, EXPLORE_STEP: step} if self.scope else {}
        with self.path.open("r+b") as fh:
            _cut_torn_line(fh)
            fh.seek(0, os.SEEK_END)
            fh.write("".join(e.to_json(**mark) + "\n" for e in experiences).encode())

    def take(self, n: int, step: int) -> list[Experience]:
        lines = self._lines()
        read = [lines[i] for i in self._readable(lines)][(step - 1) * n : step * n]
        return [Experience.from_dict(_fields(json.loads(line))) for line in read] if len(read) == n else []

    def rewind(self, after_step: int | None, resumed: bool = True) -> Resumed:
        """Reading by position gives back by itself; a stage that explores and trains drops the lines of its explore
        steps after `after_step` (None: it does not train) that no kept step read (the file replaced whole: a reader
        never sees half of it). Its explore steps with lines stored are kept."""
        lines = self._lines()
        readable = self._readable(lines)
        read = (after_step or 0) * (self.scope.batch_size if self.scope else 0)  # the lines kept train steps consumed
        steps = {
            i: json.loads(line)[EXPLORE_STEP] for i, line in enumerate(lines) if self.own and line.startswith(self.own)
        }
        dropped: set[int] = set()
        if after_step is not None and self.scope is not None and self.scope.own_rows:
            consumed = {steps.get(i) for i in readable[:read]}
            dropped = {i for i in readable[read:] if (steps.get(i) or 0) > after_step and steps[i] not in consumed}
        if dropped:
            write_text_atomic(self.path, "".join(line for i, line in enumerate(lines) if i not in dropped))
        kept = frozenset(step for i, step in steps.items() if i not in dropped) - {None}
        return Resumed(0, len(dropped), kept, max(0, len(readable) - len(dropped) - read))

    def _lines(self) -> list[str]:
        with self.path.open(encoding="utf-8") as fh:
            return [line for line in fh if line.endswith("\n")]  # a line still being written waits

    def _readable(self, lines: list[str]) -> list[int]:
        """The positions of the lines this stage reads: a stage that explores and trains its own (and lines of no
        stage), another every line."""
        if self.scope is None or not self.scope.own_rows:
            return list(range(len(lines)))
        return [i for i, line in enumerate(lines) if line.startswith(self.own) or not line.startswith(self.marked)]


def _cut_torn_line(fh: Any) -> None:
    """Cut a last line without its end (a writer killed inside its write) off the file open in `fh` (binary): this
    process writes the file now, and its next line would be glued to the fragment."""
    end = fh.seek(0, os.SEEK_END)
    if end == 0:
        return
    fh.seek(end - 1)
    if fh.read(1) == b"\n":
        return
    block, at = 1 << 16, end
    while at > 0:
        at = max(0, at - block)
        fh.seek(at)
        chunk = fh.read(min(block, end - at))
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            fh.truncate(at + cut + 1)
            return
    fh.truncate(0)


def _fields(row: dict) -> dict:
    """An experience's own fields of a JSONL line."""
    return {key: value for key, value in row.items() if key not in (STORED_BY, EXPLORE_STEP)}


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

    def rewind(self, after_step: int | None, resumed: bool = True) -> Resumed:
        return NOTHING  # read by position through the selector


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
