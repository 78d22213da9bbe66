"""Whose rows a persisted experience store serves, and what a stage's (re)start does to them.

A store in a file (`sql`, a `queue` over SQLite, `file`) outlives a stage: every stage of a run defaults to the same
file, and a train run may read what another run's explorer stored. So each row records the stage that stored it and
its explore step, and each consumption the stage that consumed it (its `Scope`: the run's identity, the stage's name
and whether it explores and trains, so one config run as `explore`, `train` and `both` keeps three scopes). A stage
that explores and trains reads only what it explored; a stage that only trains reads whatever waits.

When a stage that trains sets up, resumed from the checkpoint of its train step k (k = 0: from its start), the store
- gives back what the stage's train steps after k consumed (never another stage's consumption), and
- where the stage also explores, drops the rows of its explore steps after k that no train step up to k consumed: the
  explorer resumes at explore step k + 1 and makes them again (their weights may be lost with the steps after k).
  An explore step after k of which a train step up to k consumed part (explore steps that stored fewer experiences
  than a train step takes) is kept whole, and its second run stores nothing: each row is trained once.
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


def scope_name(run_id: str, stage: str, explores: bool, trains: bool) -> str:
    """A stage's name in a store: its run's identity (records/run_dir.py run_id), its name and what it does, so a
    `both` run never takes an `explore` or `train` run of the same directory for itself (their stages share a name)."""
    does = "+".join(part for part, on in (("explores", explores), ("trains", trains)) if on)
    return f"{run_id}#{stage}#{does}"
