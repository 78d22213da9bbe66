"""Bounds on hostile YAML: aliases that expand without limit (a "billion laughs"), aliases that
refer to themselves, and nesting deep enough to exhaust the parser's or Python's stack.

A YAML parser shares an anchored node between its aliases, so parsing stays small; what explodes
is every later walk over the data (positions, merges, copies, validation), which sees each alias
expanded. Like hardened YAML loaders, count the nodes the aliases stand for while reading the
event stream, once per alias (an anchor's expanded size is known when its collection ends), and
stop at the first alias past the bound: the cost is linear in the file, whatever the factor.
"""

import yaml

from ...errors import Issue

MAX_ALIAS_NODES = 10_000  # nodes the aliases of one file may stand for; real configs use a few dozen
MAX_DEPTH = 50  # levels of nesting; real configs use about six
SHALLOW_BYTES = 32_768  # libyaml's composer recurses in C: a smaller file cannot nest deep enough to crash it


def needs_scan(text: str) -> bool:
    """Whether the file may hold an alias, or is large enough to nest past the C stack."""
    return "*" in text or len(text) > SHALLOW_BYTES


def scan_issue(loader: yaml.CSafeLoader, shown: str) -> Issue | None:
    """The first recursive alias, alias past the expansion bound, or collection past the depth bound; else None."""
    sizes: dict[str, int] = {}  # anchor -> nodes it expands to, once its node is complete
    frames: list[list] = [[None, 0]]  # [anchor, nodes so far] of each collection being read
    expanded = 0
    while loader.check_event():
        event = loader.get_event()
        if isinstance(event, yaml.CollectionStartEvent):
            if len(frames) > MAX_DEPTH:
                return depth_issue(_at(shown, event.start_mark))
            frames.append([event.anchor, 1])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, count = frames.pop()
        elif isinstance(event, yaml.AliasEvent):
            anchor, count = None, sizes.get(event.anchor, 0)  # an undefined alias is the parser's to report
            if any(frame[0] == event.anchor for frame in frames):
                return Issue(
                    f"YAML alias *{event.anchor} refers to the collection that contains it (a recursive alias)",
                    source=_at(shown, event.start_mark),
                    hint="an anchor can be used only after its collection ends",
                )
            expanded += count
            if expanded > MAX_ALIAS_NODES:
                return Issue(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES:,} nodes at *{event.anchor} (an alias bomb?)",
                    source=_at(shown, event.start_mark),
                    hint="write the values out, or anchor fewer nested collections",
                )
        elif isinstance(event, yaml.ScalarEvent):
            anchor, count = event.anchor, 1
        else:
            continue
        if anchor is not None:
            sizes[anchor] = count
        frames[-1][1] += count
    return None


def depth_issue(source: str) -> Issue:
    """A collection nested past MAX_DEPTH."""
    return Issue(
        f"YAML nested more than {MAX_DEPTH} levels deep",
        source=source,
        hint="a run config or profile needs a handful of levels",
    )


def _at(shown: str, mark: yaml.Mark) -> str:
    return f"{shown}:{mark.line + 1}:{mark.column + 1}"
