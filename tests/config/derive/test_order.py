"""The order of RULES is checked, not trusted: each rule declares what it reads and writes (`@rule`), no rule reads
what a later rule writes, and the declarations hold for what the rules read and write on the examples."""

from pathlib import Path

import pytest

from tests.conftest import REFERENCE, REPO
from trinity.config.compose import Request
from trinity.config.derive import RULES
from trinity.config.derive._rule import covers, order_conflicts, overlaps, rule_name
from trinity.config.resolve import resolve
from trinity.errors import ConfigError

from .recording import dotted_keys, recording

EXAMPLES = sorted((REPO / "examples").rglob("*.yaml"))
PROFILES = ("cpu", "h100", "a100_40g", "ascend910b")
# the reference config under algorithms whose trainers read other data and functions
ALGORITHMS = ("ppo", "mix", "raft", "jsd", "gigpo", "sft", "dpo", "cpt")


def test_every_rule_declares_what_it_reads_and_writes():
    undeclared = [rule_name(r) for r in RULES if not all(hasattr(r, a) for a in ("reads", "writes", "before"))]
    assert undeclared == [], "declare them with @rule(reads=..., writes=...) (derive/_rule.py)"


def test_no_rule_reads_what_a_later_rule_writes():
    assert order_conflicts(RULES) == []


def dependencies(rules) -> list[tuple[int, str]]:
    """(index, what) of each rule whose next rule reads a key it writes: the pairs no swap may reorder."""
    return [
        (i, f"{rule_name(rules[i + 1])} reads {read!r} that {rule_name(rules[i])} writes")
        for i in range(len(rules) - 1)
        for read in rules[i + 1].reads
        if any(overlaps(read, write) for write in rules[i].writes)
    ]


@pytest.mark.parametrize("index,what", dependencies(RULES), ids=lambda v: v if isinstance(v, str) else "")
def test_swapping_a_rule_with_the_next_one_that_reads_its_output_is_refused(index, what):
    swapped = list(RULES)
    swapped[index], swapped[index + 1] = swapped[index + 1], swapped[index]
    assert order_conflicts(swapped) != []


def test_moving_a_rule_one_line_after_a_reader_of_its_output_is_refused():
    rules = list(RULES)
    shared = next(r for r in rules if r.__name__ == "shared_devices")
    rules.remove(shared)
    rules.insert(rules.index(next(r for r in rules if r.__name__ == "sleep_mode")) + 1, shared)  # after a reader
    assert any(
        "sleep_mode reads 'mode', which the later cluster.shared_devices writes" in c for c in order_conflicts(rules)
    )


def test_a_value_read_as_written_may_not_be_filled_before_it_is_read():
    rules = list(RULES)
    mix = next(r for r in rules if r.__name__ == "mix_batch")
    rules.remove(mix)
    rules.insert(rules.index(next(r for r in rules if r.__name__ == "train_batch_size")) + 1, mix)
    assert any("mix_batch reads 'buffer.train_batch_size', which the earlier" in c for c in order_conflicts(rules))


def requests():
    yield from (Request(path, (f"hardware={profile}",)) for path in EXAMPLES for profile in PROFILES)
    yield from (Request(REFERENCE, ("hardware=h100", f"algorithm.algorithm_type={a}")) for a in ALGORITHMS)


@pytest.fixture(scope="module")
def recorded():
    with recording() as record:
        for request in requests():
            try:
                resolve(request)
            except ConfigError:
                pass  # a refusal is derived too: what it read until then counts
    return record


def undeclared(found: set[str], declared: tuple[str, ...]) -> list[str]:
    """The keys of `found` no declared key covers; a presence read (`key.#`) is covered by a declared key under it too,
    as only a write of the key itself (or above), which overlaps that one, changes it."""
    return sorted(key for key in found if not any(covers(d, key) or _under(d, key) for d in declared))


def _under(declared: str, key: str) -> bool:
    return key.endswith(".#") and covers(key.removesuffix(".#"), declared)


def test_the_rules_read_only_what_they_declare_on_the_examples(recorded):
    extra = {rule_name(r): undeclared(dotted_keys(recorded.reads.get(r, set())), (*r.reads, *r.before)) for r in RULES}
    assert {rule: keys for rule, keys in extra.items() if keys} == {}


def test_the_rules_write_only_what_they_declare_on_the_examples(recorded):
    extra = {rule_name(r): undeclared(dotted_keys(recorded.writes.get(r, set())), r.writes) for r in RULES}
    assert {rule: keys for rule, keys in extra.items() if keys} == {}


def test_the_examples_exercise_every_rule(recorded):
    assert [rule_name(r) for r in RULES if r not in recorded.reads] == []


def test_the_reference_is_among_the_examples():
    assert Path(REFERENCE) in EXAMPLES
