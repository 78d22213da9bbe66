"""Where a vLLM engine's memory-sync pieces wait on a node (trinity/runtime/rollout/vllm_staging.py); the engine's
syncs through them: test_vllm_engine.py."""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from trinity.runtime.rollout import vllm_staging  # noqa: E402


@pytest.fixture(autouse=True)
def roots(monkeypatch, tmp_path):
    """This node's piece roots (shared memory, the temporary folder) in tmp_path."""
    monkeypatch.setattr(vllm_staging, "piece_roots", lambda: (tmp_path / "shm", tmp_path / "tmp"))


def test_a_sync_starting_clears_what_an_earlier_one_left_but_not_another_parts_draft(tmp_path):
    """Two parts of one engine on one node (colocate, TP 2) write piece 0 together: the one starting first must not
    remove the other's draft; an older sync's pieces go."""
    folder = tmp_path / "shm" / "pieces" / "rollout.engine0"
    folder.mkdir(parents=True)
    (folder / "v4-3").write_bytes(b"old")
    (folder / ".v5-0.999").write_bytes(b"another part's draft")
    source = vllm_staging.staged(torch.ones(3), Path("pieces/rollout.engine0"), 5, 0)
    assert source == "pieces/rollout.engine0/v5-0"
    assert sorted(f.name for f in folder.iterdir()) == [".v5-0.999", "v5-0"]


def test_runs_on_two_rays_of_one_machine_stage_their_pieces_and_adapters_apart():
    """Each new Ray numbers its jobs from 01000000: two runs on one machine, each on a Ray of its own (two test files at
    once, two users), would share the folders of their pieces and adapters by the job id alone, and one run's sync
    would load the other's bytes, or lose them to its close. One cluster's job is one name, and one folder."""
    name = vllm_staging.launch_name
    assert name("10.0.0.5:6379", "01000000") != name("10.0.0.5:41227", "01000000")
    assert name("10.0.0.5:6379", "01000000") != name("10.0.0.5:6379", "02000000")
    assert name("10.0.0.5:6379", "01000000") == name("10.0.0.5:6379", "01000000")
    assert name("[::1]:6379", "01000000") == "___1__6379-01000000"
