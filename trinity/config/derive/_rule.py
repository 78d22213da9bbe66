"""What each derivation rule reads and writes, declared on it, so that the order of RULES is checked, not trusted.

A rule that reads a key a later rule writes would see the value before that rule made it. Each rule declares the
dotted keys it reads and writes (a key stands for everything under it; `*` for any list index or mapping key; a last
part `#` for the key's presence or a mapping's key set alone), and `order_conflicts` finds every read that a later
rule's write would change. A rule that means to read a value as the config wrote it, before a later rule fills it,
declares that key `before` instead: then no earlier rule may write it. tests/config/derive/test_order.py holds
RULES to `order_conflicts`, and the declarations to what the rules read and write on the examples.
"""

from collections.abc import Callable, Sequence

from ._context import Context

Rule = Callable[[Context], None]


def rule(
    reads: tuple[str, ...] = (), writes: tuple[str, ...] = (), before: tuple[str, ...] = ()
) -> Callable[[Rule], Rule]:
    """Declare the keys a rule reads (through ctx.get, user_set, input), the keys it writes (ctx.set), and the keys it
    reads as written, `before` the later rules that fill them."""

    def declare(fn: Rule) -> Rule:
        fn.reads, fn.writes, fn.before = reads, writes, before
        return fn

    return declare


def covers(declared: str, key: str) -> bool:
    """Whether `declared` names `key` or a key above it (`*` in it matches any one part)."""
    want, got = declared.split("."), key.split(".")
    return len(want) <= len(got) and all(w in ("*", g) for w, g in zip(want, got))


def overlaps(a: str, b: str) -> bool:
    """Whether two declared keys share a value: one is the other or lies under it."""
    return covers(a, b) or covers(b, a)


def order_conflicts(rules: Sequence[Rule]) -> list[str]:
    """Each read of a rule that a later rule in `rules` writes, and each value read as written that an earlier rule
    writes, worded; empty when the order is sound."""
    found = []
    for i, reader in enumerate(rules):
        found += _conflicts(reader, reader.reads, rules[i + 1 :], "later")
        found += _conflicts(reader, reader.before, rules[:i], "earlier")
    return found


def _conflicts(reader: Rule, keys: tuple[str, ...], writers: Sequence[Rule], where: str) -> list[str]:
    return [
        f"{rule_name(reader)} reads {key!r}, which the {where} {rule_name(writer)} writes ({write!r})"
        for writer in writers
        for key in keys
        for write in writer.writes
        if overlaps(key, write)
    ]


def rule_name(fn: Rule) -> str:
    return f"{fn.__module__.rpartition('.')[2]}.{fn.__name__}"


# Every taskset the explorer reads (buffer.py `tasksets`): the training one, the list of them, the evaluation ones.
TASKSETS = (
    "buffer.explorer_input.taskset",
    "buffer.explorer_input.tasksets.*",
    "buffer.explorer_input.eval_tasksets.*",
)


def each_taskset(*fields: str) -> tuple[str, ...]:
    """The keys `fields` (dotted, under a taskset) of every taskset."""
    return tuple(f"{taskset}.{name}" for taskset in TASKSETS for name in fields)
