"""`trinity profile lint`: every problem of every profile, each with file:line:col."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import ConfigError, Issue, split_source
from ..platforms.ray_constants import ray_accelerators
from .compose import Request
from .profiles import LoadedProfile, available, load_profile
from .resolve import resolve
from .schema import RunConfig
from .validate import fields_at


@dataclass(frozen=True)
class LintReport:
    checked: tuple[str, ...]
    issues: tuple[Issue, ...]

    @property
    def ok(self) -> bool:
        return not any(i.severity == "error" for i in self.issues)


def lint(targets: tuple[Path, ...] = (), extra_dirs: tuple[str, ...] = ()) -> LintReport:
    """Lint the given profile files or folders, or every profile this installation can use."""
    jobs = _jobs(targets, extra_dirs)
    issues: list[Issue] = []
    for name, dirs in jobs:
        for issue in _lint_one(name, dirs):
            if issue not in issues:  # a broken base is reported once, not once per profile that extends it
                issues.append(issue)
    return LintReport(tuple(name for name, _ in jobs), tuple(issues))


def _jobs(targets: tuple[Path, ...], extra_dirs: tuple[str, ...]) -> list[tuple[str, tuple[Path, ...]]]:
    if not targets:
        dirs = paths.profile_dirs(extra_dirs)
        return [(name, dirs) for name in available(dirs)]
    jobs = []
    for target in targets:
        if not target.exists():
            raise ConfigError([Issue("no such profile file or folder", source=str(target))])
        folder = target if target.is_dir() else target.parent
        dirs = paths.profile_dirs((str(folder), *extra_dirs))
        names = list(paths.profile_files(folder)) if target.is_dir() else [target.stem]
        jobs += [(name, dirs) for name in names]
    return jobs


def _lint_one(name: str, dirs: tuple[Path, ...]) -> list[Issue]:
    try:
        loaded = load_profile(name, dirs)
    except ConfigError as exc:
        return exc.issues
    issues = _when_keys(loaded) + _ray_names(loaded)
    try:
        request = Request(
            paths.data_dir("conf") / "minimal_run.yaml", (f"hardware={name}",), tuple(str(d) for d in dirs)
        )
        issues += [i for i in resolve(request).issues if i.severity == "warning"]
    except ConfigError as exc:
        issues += exc.issues
    return issues


def _when_keys(loaded: LoadedProfile) -> list[Issue]:
    """Each `env_when` key must be a run-config key."""
    issues = []
    for i, block in enumerate(loaded.profile.env_when):
        for key in block.when:
            parent, _, last = key.rpartition(".")
            fields = fields_at(RunConfig, tuple(parent.split("."))) if parent else list(RunConfig.model_fields)
            if last not in fields:
                where = loaded.where(("env_when", i, "when", key))
                issues.append(
                    Issue(
                        "is not a run-config key",
                        key=f"env_when[{i}].when.{key}",
                        source=where,
                        allowed=", ".join(fields) or "-",
                    )
                )
    return issues


def _ray_names(loaded: LoadedProfile) -> list[Issue]:
    """The resource key and visible-devices variables must be the ones the installed Ray uses."""
    facts = loaded.profile.facts
    known = ray_accelerators()
    if known is None or facts.ray_request == "none":
        return []
    where = loaded.where(("facts", "ray_resource_key"))
    if facts.ray_resource_key not in known:
        return [
            Issue(
                f"Ray knows no accelerator resource {facts.ray_resource_key!r}",
                key="facts.ray_resource_key",
                source=where,
                allowed=", ".join(sorted(known)),
            )
        ]
    managers = known[facts.ray_resource_key]
    issues = []
    for fact in ("visible_devices_env", "noset_visible_devices_env"):
        ray_values = {getattr(m, fact) for m in managers}
        if getattr(facts, fact) not in ray_values:
            issues.append(
                Issue(
                    f"{getattr(facts, fact)!r} is not what Ray uses for {facts.ray_resource_key}",
                    key=f"facts.{fact}",
                    source=loaded.where(("facts", fact)),
                    allowed=", ".join(sorted(str(v) for v in ray_values)),
                    hint=f"Ray's value comes from {managers[0].source}",
                )
            )
    return issues


def as_dict(issue: Issue) -> dict[str, Any]:
    """An issue with its source split into file, line and column, for CI annotations."""
    file, line, col = split_source(issue.source)
    return {**issue.as_dict(), "file": file, "line": line, "col": col}
