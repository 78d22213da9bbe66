"""Committed renders of every example on every profile it is meant for: drift fails with the fix."""

import os

import pytest

from tests.golden.renders import REPO, UPDATE, golden_path, pairs, render


@pytest.mark.parametrize("example,profile", pairs())
def test_render_matches_golden(example, profile, monkeypatch):
    monkeypatch.chdir(REPO)
    for name in [k for k in os.environ if k.startswith("TRINITY_")]:
        monkeypatch.delenv(name)
    path = golden_path(example, profile)
    assert path.exists(), f"no golden render for {example} on {profile}; create it with: {UPDATE}"
    assert render(example, profile) == path.read_text(), f"{path.relative_to(REPO)} drifted; if the change is intended, run: {UPDATE}"


def test_no_stale_golden_files():
    wanted = {golden_path(e, p) for e, p in pairs()}
    present = {p for p in golden_path("x", "y").parent.parent.rglob("*.yaml") if p.name != "manifest.yaml" and p.parent.name != "verl"}  # verl/: verl's configs (test_verl_golden.py)
    assert present <= wanted, f"golden files without a manifest entry: {sorted(str(p) for p in present - wanted)}"
