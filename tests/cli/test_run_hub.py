"""`trinity run` trains from a model and a data set named only by hub id, served by a hub stand-in on loopback
(tests/hub_standin.py) through the real huggingface_hub client: the driver fetches each once before Ray, the roles
read local folders (no role asks the hub anything), and config.yaml records each name with the commit it ran."""

import re

import pytest
import yaml

from tests.cli.test_run import GRPO_ONLY, RUN, lines, trinity
from tests.hub_standin import folder_files

pytestmark = [pytest.mark.ray, pytest.mark.train]

CARD = """\
---
configs:
- config_name: plus
  data_files:
  - split: train
    path: plus/train-*
  - split: test
    path: plus/test-*
---
"""


def test_a_run_from_hub_names_fetches_once_and_records_the_commits(run_env, hub, demo_assets, tmp_path):
    model = hub.publish("model", "trinity-test/arith-tiny", folder_files(demo_assets / "model"))
    rows = {s: (demo_assets / "data" / f"{s}.jsonl").read_bytes() for s in ("train", "test")}
    data = hub.publish(
        "dataset",
        "trinity-test/arith",
        {"README.md": CARD.encode(), "plus/train-00000.jsonl": rows["train"], "plus/test-00000.jsonl": rows["test"]},
    )
    online = {k: v for k, v in run_env.items() if k != "HF_HUB_OFFLINE"}  # the session's default is offline
    env = online | {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf")}
    names = (
        "model.model_path=trinity-test/arith-tiny",
        "buffer.explorer_input.taskset.path=trinity-test/arith",
        "+buffer.explorer_input.taskset.subset_name=plus",
        "buffer.explorer_input.eval_tasksets.0.path=trinity-test/arith",
        "+buffer.explorer_input.eval_tasksets.0.subset_name=plus",
    )
    proc = trinity(env, tmp_path, *GRPO_ONLY, "buffer.total_steps=2", *names)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"fetching model trinity-test/arith-tiny at {model[:12]} from {hub.url}" in proc.stderr
    run = tmp_path / RUN
    assert [r["step"] for r in lines(run, "trainer")] == [1, 2]
    saved = yaml.safe_load(re.sub(r"^# sha256: .*\n", "", (run / "config.yaml").read_text()))
    assert [(f["name"], f["commit"], f["keys"]) for f in saved["fetched"]] == [
        ("trinity-test/arith-tiny", model, ["model.model_path"]),
        (
            "trinity-test/arith",
            data,
            ["buffer.explorer_input.taskset.path", "buffer.explorer_input.eval_tasksets[0].path"],
        ),
    ]
    assert saved["model"]["model_path"].endswith(f"models--trinity-test--arith-tiny/snapshots/{model}")
    assert saved["explorer"]["rollout_model"]["model_path"] == "trinity-test/arith-tiny"  # the name it is served by
    # the driver's fetch alone asked the hub: a look-up and a listing per repo, each file once
    assert sorted(hub.repo_requests()) == [
        "/api/datasets/trinity-test/arith/revision/main",
        f"/api/datasets/trinity-test/arith/tree/{data}",
        "/api/models/trinity-test/arith-tiny/revision/main",
        f"/api/models/trinity-test/arith-tiny/tree/{model}",
    ]
    gets = [p for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p]
    assert len(gets) == len(set(gets)) == len(folder_files(demo_assets / "model")) + 3
    evals = lines(run, "eval")
    assert evals and all(e["taskset"] == "arith-heldout" for e in evals)
    assert [r["experiences"] for r in lines(run, "explorer")] == [16, 16]
