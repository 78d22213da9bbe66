"""Whose rows a persisted experience store serves, and what a stage's (re)start does to them.

A store in a file (`sql`, a `queue` over SQLite, `file`) outlives a stage: every stage of a run defaults to the same
file, and a train run may read what another run's explorer stored. So each row records the stage that stored it and
its explore step, and each consumption the stage that consumed it (its `Scope`: the run's identity, the stage's name
and what it does, so one config run as `explore`, `serve`, `train` and `both` keeps four scopes). A stage
that explores and trains reads only what it explored; a stage that only trains reads whatever waits.

When a stage that trains sets up, resumed from the checkpoint of its train step k (k = 0: from its start), the store
- gives back what the stage's train steps after k consumed (never another stage's consumption), and
- where the stage also explores, drops the rows of its explore steps after k that no train step up to k consumed: the
  explorer resumes at explore step k + 1 and makes them again (their weights may be lost with the steps after k).
  An explore step after k of which a train step up to k consumed part (explore steps that stored fewer experiences
  than a train step takes) is kept whole, and its second run stores nothing: each row is trained once.
A stage that does not train (explore, serve) gives back and drops nothing; an explore step it stored already is not
stored again when its stage restarts.
"""

from typing import NamedTuple


class Scope(NamedTuple):
    """The stage that stores and consumes a store's rows."""

    name: str  # scope_name's
    own_rows: bool  # the stage explores and trains: it reads only what it explored
    batch_size: int = 0  # experiences one of its train steps takes (a store read by position counts in them)


class Resumed(NamedTuple):
    """What a stage's setup did to a persisted store."""

    given_back: int  # rows the stage's train steps after the checkpoint had consumed
    dropped: int  # rows of its explore steps after the checkpoint, to be explored again
    kept_steps: frozenset[int]  # its explore steps whose rows stay stored (a second run of one stores nothing)
    waiting: int  # rows the stage may read that no kept train step consumed


NOTHING = Resumed(0, 0, frozenset(), 0)


def scope_name(run_id: str, stage: str, does: dict[str, bool]) -> str:
    """A stage's name in a store: its run's identity (records/run_dir.py run_id), its name and what it `does` (of
    explores, serves, trains), so a `both` run never takes an `explore`, `serve` or `train` run of the same directory
    for itself (their stages share a name), and a resume on hardware that turns `both` into `colocate` keeps its
    rows."""
    return f"{run_id}#{stage}#{'+'.join(part for part, on in does.items() if on)}"
