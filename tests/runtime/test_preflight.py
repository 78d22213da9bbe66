"""Preflight on a model folder that ships its own code: refused untrusted (tests/cli/test_run_preflight.py),
let through when trusted, or when transformers knows its model type anyway."""

import json
import shutil

import pytest

pytest.importorskip("verl")

from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.runtime import preflight  # noqa: E402


def test_a_trusted_model_with_its_own_code_passes(remote_code_model, demo_assets, monkeypatch):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    preflight.check(resolve(Request(None, ("hardware=cpu", f"model.model_path={remote_code_model}", "model.trust_remote_code=true"))))


def test_code_for_a_model_type_transformers_knows_needs_no_trust(remote_code_model, demo_assets, monkeypatch, tmp_path):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    known = shutil.copytree(remote_code_model, tmp_path / "model")
    config = json.loads((known / "config.json").read_text())
    (known / "config.json").write_text(json.dumps(config | {"model_type": "qwen2"}))
    preflight.check(resolve(Request(None, ("hardware=cpu", f"model.model_path={known}"))))
