"""What a derivation rule sees: the validated tree, the profile, provenance, and where to report."""

import json
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import Issue, Severity, dotted, undotted
from .. import modes
from ..merge import get_path
from ..profiles import LoadedProfile
from ..provenance import WRITTEN, Contribution, Provenance

# what RunStage.sync holds
SYNC_KEYS = ("sync_style", "sync_interval", "sync_offset", "explorer_sync_interval", "trainer_sync_interval")


@dataclass(frozen=True)
class RunStage:
    """One stage of a staged run as written (its own value, else the run's, else the schema's): what the rules that lay
    another stage out beside it read."""

    mode: str
    sync: dict[str, Any] | None  # synchronizer.<SYNC_KEYS>; None where they do not validate
    mode_written: bool = True  # a person wrote its mode (in the stage or the run); else the schema's default


@dataclass
class Context:
    """Mutable working tree of one derivation pass; rules read and set keys by dotted name."""

    data: dict[str, Any]
    loaded: LoadedProfile
    provenance: Provenance
    selection: str = ""
    run_stages: tuple[RunStage, ...] = ()  # a stage's: every stage of its run, in order
    stage_index: int | None = None  # a stage's: its place in run_stages
    driver: dict[str, str | None] | None = None  # this node's driver release, where device IPC depends on it
    issues: list[Issue] = field(default_factory=list)

    @property
    def facts(self):
        return self.loaded.profile.facts

    def stage_beside(self) -> RunStage | None:
        """The stage that trains and explores which this train-only stage is laid out beside, on the trainer's share of
        its devices (cluster.train_stage_devices: trainer): the next such stage of the run (its engines start beside
        this stage, and it keeps this stage's trainer ranks), else the last one before. None otherwise."""
        entry = modes.mode(self.get("mode"))
        if self.get("cluster.train_stage_devices") != "trainer" or not entry.trains or entry.runs_engines:
            return None
        here = self.stage_index if self.stage_index is not None else len(self.run_stages)
        after, before = self.run_stages[here + 1 :], self.run_stages[:here][::-1]
        beside = next((s for s in (*after, *before) if _trains_and_explores(s.mode)), None)
        if beside is None:
            return None
        # the mode it runs in on these devices: a `both` nobody wrote takes turns on a single device
        devices = self.get("cluster.node_num") * self.get("cluster.gpu_per_node")
        return replace(beside, mode=modes.on_devices(beside.mode, beside.mode_written, devices))

    def stage_devices_input(self) -> str:
        """Where cluster.train_stage_devices came from: the user, or the profile's fact."""
        key = "cluster.train_stage_devices"
        return self.input(key) if self.user_set(key) else self.fact("train_stage_devices")

    def get(self, key: str) -> Any:
        """The current value of a dotted key."""
        return get_path(self.data, undotted(key))

    def user_set(self, key: str) -> bool:
        """Whether a person gave the key a value (conf, file, override, stage), not a default or a profile."""
        return self.get(key) is not None and self.provenance.set_by(undotted(key), *WRITTEN)

    def where(self, key: str) -> str:
        """Where the key's value was written (a rule's own output does not count)."""
        return self.provenance.written_where(undotted(key))

    def input(self, key: str) -> str:
        """`key=value (source)` for a rule's inputs."""
        return f"{key}={self.get(key)!r} ({self.where(key) or 'schema default'})"

    def fact(self, name: str) -> str:
        """`profile.facts.name=value (file:line:col)` for a rule's inputs."""
        value = getattr(self.facts, name)
        value = value.model_dump() if hasattr(value, "model_dump") else value  # a nested fact reads as its YAML
        return f"{self.loaded.name}.{name}={value!r} ({self.loaded.where(('facts', name))})"

    def set(self, key: str, value: Any, rule: str, inputs: tuple[str, ...]) -> None:
        """Set a derived value and record which rule and inputs produced it."""
        parent = self.data
        parts = undotted(key)
        for part in parts[:-1]:
            parent = parent[part] if isinstance(parent, list) else parent.setdefault(part, {})
        parent[parts[-1]] = value
        self.provenance.add(parts, Contribution("rule", f"rule {rule}", value, inputs))

    def contradicts(self, ours: str, theirs: str, value: Any, what: str) -> bool:
        """Whether `value`, written at verl passthrough key `theirs`, contradicts trinity's `ours` as the user set it
        (verl's `what` is that setting): then an error names both."""
        if not self.user_set(ours) or self.get(ours) == value:
            return False
        self.report(
            "error",
            theirs,
            f"{json.dumps(value)} contradicts {ours}={json.dumps(self.get(ours))} ({self.where(ours)}): verl's {what}",
            allowed=json.dumps(self.get(ours)),
            hint=f"write only {ours}",
        )
        return True

    def set_as_written(self, key: str, value: Any, origin: str) -> None:
        """Set `key` to what a person wrote at `origin`, another spelling of the same setting: it counts as written
        there (user_set; its errors point at origin's line), as if the person had written `key` itself."""
        written = [c for c in self.provenance.chain(undotted(origin)) if c.layer in WRITTEN][-1]
        parent = self.data
        for part in undotted(key)[:-1]:
            parent = parent.setdefault(part, {})
        parent[undotted(key)[-1]] = value
        self.provenance.add(undotted(key), Contribution(written.layer, written.source, value, (origin,)))

    def section_as_written(self, key: str, origin: str) -> None:
        """Create the mapping `key` (null until now) as written where the mapping `origin` was: another spelling of
        the same section, whose own keys are then set with set_as_written."""
        parent = self.data
        for part in undotted(key)[:-1]:
            parent = parent.setdefault(part, {})
        parent[undotted(key)[-1]] = {}
        self.provenance.record_sections([undotted(key)], self.provenance.written_where(undotted(origin)))

    def report(self, severity: Severity, key: str, message: str, allowed: str = "", hint: str = "") -> None:
        """Add an error, warning or note about `key`, located where its value came from."""
        self.issues.append(
            Issue(
                message,
                key=dotted(undotted(key)),
                source=self.where(key),
                allowed=allowed,
                hint=hint,
                severity=severity,
            )
        )


def _trains_and_explores(mode: str) -> bool:
    return mode in modes.MODES and modes.MODES[mode].trains and modes.MODES[mode].runs_engines
