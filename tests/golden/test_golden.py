"""Committed renders (and where each derived value came from) of every example on every profile it is
meant for: drift fails with the fix."""

import os

import pytest

from tests.golden.renders import GOLDEN, REPO, UPDATE, golden_path, pairs


@pytest.mark.parametrize("kind", list(GOLDEN))
@pytest.mark.parametrize("example,profile", pairs())
def test_render_matches_golden(example, profile, kind, monkeypatch):
    monkeypatch.chdir(REPO)
    for name in [k for k in os.environ if k.startswith("TRINITY_")]:
        monkeypatch.delenv(name)
    path = golden_path(example, profile, kind)
    assert path.exists(), f"no golden {kind} for {example} on {profile}; create it with: {UPDATE}"
    assert GOLDEN[kind](example, profile) == path.read_text(), (
        f"{path.relative_to(REPO)} drifted; if the change is intended, run: {UPDATE}"
    )


def test_no_stale_golden_files():
    wanted = {golden_path(e, p, kind) for e, p in pairs() for kind in GOLDEN}
    # verl/: verl's configs (test_verl_golden.py)
    present = {
        p
        for p in golden_path("x", "y").parent.parent.rglob("*")
        if p.suffix in (".yaml", ".txt") and p.name != "manifest.yaml" and p.parent.name != "verl"
    }
    assert present <= wanted, f"golden files without a manifest entry: {sorted(str(p) for p in present - wanted)}"
