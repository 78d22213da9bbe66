"""trinity's own algorithm functions: the runtime package they live in, and the name each is registered under.

A function verl lacks is written in a module of `OWN` (trinity/runtime/trainer/algos/) and registered in verl's
registry under `trinity_<its entry's key>`: the prefix keeps it from ever taking a name of verl's. The name is made
here alone; the runtime module registers by the entry's key and reads the name from the entry.
"""

from dataclasses import replace
from typing import TypeVar

OWN = "trinity.runtime.trainer.algos."  # the package of trinity's own functions, one module per algorithm family
# An own entry's registry name before `named` fills it from the entry's key (a table is built before its keys are).
BY_KEY = "<trinity_ + the entry's key>"

Entry = TypeVar("Entry")


def registry_name(key: str) -> str:
    """The name the own function of entry `key` has in verl's registry."""
    return f"trinity_{key}"


def named(table: dict[str, Entry], field: str) -> dict[str, Entry]:
    """`table` with each entry whose `field` (its registry name) is BY_KEY named after its own key."""
    return {
        key: replace(entry, **{field: registry_name(key)}) if getattr(entry, field) == BY_KEY else entry
        for key, entry in table.items()
    }
