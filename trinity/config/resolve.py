"""The config pipeline: compose -> resolve interpolations -> validate -> derive -> validate."""

from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError, Issue
from . import lora, modes
from .compose import Composed, Request, compose
from .derive import SYNC_KEYS, RunStage, derive
from .interpolate import resolve_interpolations
from .merge import deep_merge
from .profiles import LoadedProfile
from .provenance import WRITTEN, Provenance
from .schema import RunConfig
from .schema.run import STAGE_SECTIONS
from .schema.synchronizer import SynchronizerConfig
from .sources.yaml_file import display_path
from .upstream import refusal
from .validate import validate


@dataclass(frozen=True)
class ResolvedConfig:
    """The validated, derived, frozen run config, the profile it was resolved for, and how."""

    config: RunConfig
    profile: LoadedProfile
    provenance: Provenance
    issues: tuple[Issue, ...]  # warnings and notes; errors never get this far
    stages: tuple[tuple[str, RunConfig], ...] = ()
    stage_provenance: tuple[Provenance, ...] = ()  # where each stage's values came from, in stage order
    # what `trinity run` fetched for the names of hub repos it replaced with local folders (config.hub.local)
    fetched: tuple[dict[str, Any], ...] = ()

    @property
    def runs(self) -> tuple[tuple[str | None, RunConfig], ...]:
        """What runs, in order: each stage's (name, config), or the root config alone (None, config)."""
        return self.stages or ((None, self.config),)

    def stage(self, name: str) -> RunConfig:
        """The resolved config of one stage."""
        for stage_name, config in self.stages:
            if stage_name == name:
                return config
        known = ", ".join(n for n, _ in self.stages) or "none"
        raise ConfigError([Issue(f"no stage named '{name}'", key="stages", allowed=known)])

    def labelled(self) -> list[tuple[str, RunConfig, Provenance]]:
        """(label for a message, config, provenance) of each stage, or of the run when it has none (stages replace
        it)."""
        staged = [(f" (in stage '{n}')", c, p) for (n, c), p in zip(self.stages, self.stage_provenance)]
        return staged or [("", self.config, self.provenance)]

    def of(self, stage: str | None) -> tuple[RunConfig, Provenance]:
        """The config and provenance of one stage, or of the root config (None)."""
        if stage is None:
            return self.config, self.provenance
        config = self.stage(stage)
        return config, self.stage_provenance[[n for n, _ in self.stages].index(stage)]


def resolve(request: Request | Composed, strict: bool = False) -> ResolvedConfig:
    """Resolve a run config (a request or a composed tree) for its hardware; all problems in one ConfigError."""
    composed = compose(request) if isinstance(request, Request) else request
    config, issues = _resolve_tree(composed.tree, composed)
    stages, stage_provenance, stage_issues = _resolve_stages(composed, {_said(i) for i in issues})
    issues += stage_issues
    if strict:
        issues = [as_strict(i) for i in issues]
    if any(i.severity == "error" for i in issues):
        raise ConfigError(issues)
    return ResolvedConfig(
        config, composed.profile, composed.provenance, tuple(issues), tuple(stages), tuple(stage_provenance)
    )


def _resolve_tree(
    tree: dict[str, Any],
    composed: Composed,
    provenance: Provenance | None = None,
    run_stages: tuple[RunStage, ...] = (),
    stage_index: int | None = None,
) -> tuple[RunConfig, list[Issue]]:
    provenance = provenance or composed.provenance

    def where(path: tuple) -> str:  # a key no layer wrote belongs in the user's file
        return provenance.where(path) or display_path(composed.user.path)

    plain, unresolved = resolve_interpolations(tree, where)
    try:
        typed = validate(RunConfig, plain, where, known=refusal)
    except ConfigError as exc:
        # A leaf that failed to resolve was left out; do not report it again as missing.
        failed = {i.key for i in unresolved}
        raise ConfigError(unresolved + [i for i in exc.issues if i.key not in failed]) from None
    if unresolved:
        raise ConfigError(unresolved)
    data, issues = derive(
        typed.model_dump(), composed.profile, provenance, composed.selection, run_stages, stage_index, composed.driver
    )
    if any(i.severity == "error" for i in issues):
        raise ConfigError(issues)
    return validate(RunConfig, data, where, known=refusal), issues


def _said(issue: Issue) -> tuple:
    return issue.severity, issue.key, issue.source, issue.message


def _resolve_stages(
    composed: Composed, said: set[tuple]
) -> tuple[list[tuple[str, RunConfig]], list[Provenance], list[Issue]]:
    """Each stage deep-merged into the root config and resolved on its own; a warning or note the run's own resolution
    already `said` is not said again for each stage."""
    stages, provenances, issues, errors = [], [], [], []
    run = _run_stages(composed)
    for i, stage in enumerate(composed.tree.get("stages") or []):
        if not isinstance(stage, dict):
            continue  # the root validation already reported it
        provenance = composed.provenance.copy()
        provenance.record_tree("stage", _stage_sections(stage), lambda p, i=i: composed.user.where(("stages", i, *p)))
        tree = _stage_tree(composed.tree, stage)
        label = f"stage '{stage.get('stage_name', i)}'"
        try:
            config, found = _resolve_tree(tree, composed, provenance, run, i)
            stages.append((stage.get("stage_name", str(i)), config))
            provenances.append(provenance)
            issues += [in_stage(issue, label) for issue in found if _said(issue) not in said]
        except ConfigError as exc:
            errors += [in_stage(issue, label) for issue in exc.issues]
    handoffs = _handoff_issues(stages, provenances) + lora.handoff_issues(stages, provenances)
    errors += [i for i in handoffs if i.severity == "error"]
    issues += [i for i in handoffs if i.severity != "error"]
    if errors:
        raise ConfigError(errors + issues)
    return stages, provenances, issues


def _stage_sections(stage: dict[str, Any]) -> dict[str, Any]:
    """What a stage sets over the run's config."""
    return {k: v for k, v in stage.items() if k in STAGE_SECTIONS and v is not None}


def _stage_tree(tree: dict[str, Any], stage: dict[str, Any]) -> dict[str, Any]:
    """The run's tree with one stage's sections merged in."""
    return deep_merge({**tree, "stages": []}, _stage_sections(stage))


def _run_stages(composed: Composed) -> tuple[RunStage, ...]:
    """Each stage's mode and sync settings (its own, else the run's, else the schema's; interpolations resolved), and
    whether a person wrote its mode, for the rules that lay a stage out beside the others."""
    tree = composed.tree
    root_mode = composed.provenance.set_by(("mode",), *WRITTEN)
    entries = [s if isinstance(s, dict) else {} for s in tree.get("stages") or []]  # one per entry
    return tuple(
        _run_stage(resolve_interpolations(_stage_tree(tree, stage), lambda path: "")[0], root_mode or "mode" in stage)
        for stage in entries
    )


def _run_stage(merged: dict[str, Any], mode_written: bool) -> RunStage:
    """One stage's RunStage; its sync None where its settings do not validate (its own resolution says why)."""
    mode = str(merged.get("mode") or RunConfig.model_fields["mode"].default)
    section = merged.get("synchronizer") or {}
    sync = None
    if isinstance(section, dict):
        try:
            valid = SynchronizerConfig.model_validate({k: section[k] for k in SYNC_KEYS if k in section})
            sync = {key: getattr(valid, key) for key in SYNC_KEYS}
        except ValidationError:
            pass
    return RunStage(mode, sync, mode_written)


def _handoff_issues(stages: list[tuple[str, RunConfig]], provenances: list[Provenance]) -> list[Issue]:
    """A stage that trains hands its last checkpoint to the next stage as its model: that checkpoint needs Hugging Face
    weights."""
    issues = []
    for (name, config), provenance in list(zip(stages, provenances))[:-1]:
        if modes.mode(config.mode).trains and config.trainer.save_hf_checkpoint == "never":
            key = "trainer.save_hf_checkpoint"
            message = (
                f"'never' leaves stage '{name}' without Hugging Face weights, but the next stage starts from "
                "its last checkpoint"
            )
            issues.append(
                Issue(
                    message,
                    key=key,
                    source=provenance.where(("trainer", "save_hf_checkpoint")),
                    allowed="last, always",
                    hint="set it to last (the default) in every stage but the final one",
                )
            )
    return issues


def in_stage(issue: Issue, label: str) -> Issue:
    """The issue, its message saying which stage it is about."""
    return replace(issue, message=f"{issue.message} (in {label})")


def as_strict(issue: Issue) -> Issue:
    """Under --strict a warning is an error."""
    if issue.severity != "warning":
        return issue
    return replace(issue, hint=issue.hint + " (an error under --strict)", severity="error")
