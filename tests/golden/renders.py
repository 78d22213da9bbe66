"""Golden renders: what every example resolves to on every profile it is meant for."""

import os
from pathlib import Path

import yaml

from trinity.cli._common import dump
from trinity.config.compose import Request
from trinity.config.explain import explain
from trinity.config.explain import render_text as explain_text
from trinity.config.redact import redact
from trinity.config.resolve import resolve

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
UPDATE = "python tests/golden/update.py"


def pairs() -> list[tuple[str, str]]:
    """(example path relative to the repo, profile) from the manifest."""
    manifest = yaml.safe_load((HERE / "manifest.yaml").read_text())
    return [(example, profile) for example, profiles in manifest.items() for profile in profiles]


def golden_path(example: str, profile: str, kind: str = "render") -> Path:
    """The committed render (`<profile>.yaml`) or derivation record (`<profile>.derived.txt`) of a pair."""
    return HERE / Path(example).stem / (f"{profile}.yaml" if kind == "render" else f"{profile}.derived.txt")


def _resolved(example: str, profile: str):
    assert Path.cwd() == REPO and not any(k.startswith("TRINITY_") for k in os.environ), (
        "render goldens from a clean environment at the repo root"
    )
    return resolve(Request(REPO / example, (f"hardware={profile}",)))


def render(example: str, profile: str) -> str:
    """The render as committed: the issues as comments, then the redacted YAML (run from the repo root)."""
    resolved = _resolved(example, profile)
    header = "".join(f"# {line}\n" for issue in resolved.issues for line in issue.render().splitlines())
    return f"# trinity config render --config {example} hardware={profile}\n{header}" + dump(
        redact(resolved.config.model_dump(mode="json")), "yaml"
    )


def derived(example: str, profile: str) -> str:
    """Every key a rule set, each layer under it, the rule and the inputs it read (`--explain`, derived keys only)."""
    found = [item for item in explain(_resolved(example, profile)) if any(step.layer == "rule" for step in item.steps)]
    return (
        f"# trinity config render --config {example} hardware={profile} --explain (the keys a rule set)\n"
        + explain_text(found)
    )


GOLDEN = {"render": render, "derived": derived}
