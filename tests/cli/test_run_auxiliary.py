"""`trinity run` with an auxiliary model (Trinity-RFT's explorer.auxiliary_models) on the CPU: the demo's tiny model
explores 2-digit addition while a second copy of it, the auxiliary model, runs engines of its own that a workflow
asks through `self.auxiliary_models[0]`, an `openai.OpenAI` client of their endpoint (as upstream's workflows ask a
judge). The run's records show that the auxiliary engine started beside the rollout engine, answered every rollout's
question (as the model config.yaml names), each request in its own log."""

import importlib.util
import json
import os
import textwrap

import pytest
import yaml

from tests.cli.test_run import RUN, lines, trinity
from tests.session_ray import own_ray

pytest.importorskip("ray")

pytestmark = pytest.mark.ray

# A workflow of the user's own: the policy answers, the auxiliary model answers the same question through its OpenAI
# endpoint (/v1/completions), and the policy's answer is rewarded for agreeing with it. Every reply of the auxiliary
# model goes to the file the environment names, for the test to read.
WORKFLOW = textwrap.dedent(
    """
    import json
    import os

    from trinity.runtime.workflows.base import Workflow


    class AgreeWithTheJudge(Workflow):
        arguments = {}
        uses_tokenizer = False

        def run(self):
            judge = self.auxiliary_models[0]
            prompt = self.model.prompt(self.task)
            reply = judge.completions.create(model=judge.model_path, prompt=prompt, max_tokens=3, temperature=0)
            said = reply.choices[0].text
            with open(os.environ["JUDGE_REPLIES"], "a") as out:
                out.write(json.dumps({"prompt": prompt, "said": said, "model": reply.model}) + "\\n")
            return [
                self.experience(c, float(c.text.strip() == said.strip()), judge_answered=1.0)
                for c in self.model.generate(prompt, self.task.repeat_times)
            ]
    """
)


VLLM = pytest.param(
    "vllm",
    marks=[
        pytest.mark.vllm,
        pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM's CPU build is not installed"),
    ],
)


# transformers: unset, the auxiliary model takes the rollout engine's type (the demo's); vLLM: set on it alone
@pytest.mark.parametrize("engine", ["transformers", VLLM])
def test_a_workflow_asks_the_auxiliary_models_engine_which_starts_with_the_run(run_env, tmp_path, engine):
    (tmp_path / "judged_flow.py").write_text(WORKFLOW)
    replies = tmp_path / "replies.jsonl"
    env = {  # the workflow's module and its file are the run's own: a Ray of its own, its workers in its environment
        **own_ray(run_env),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), run_env.get("PYTHONPATH", "")]),
        "JUDGE_REPLIES": str(replies),
    }
    judge = {"model_path": f"{run_env['TRINITY_DEMO_DIR']}/model", "engine_num": 1, "enable_log_requests": True}
    if engine == "vllm":
        judge["engine_type"] = "vllm"
    args = (
        "~stages",
        "mode=explore",
        "buffer.total_steps=2",
        "buffer.batch_size=2",
        "algorithm.repeat_times=2",
        "buffer.explorer_input.eval_tasksets=[]",
        "buffer.trainer_input.experience_buffer.storage_type=file",
        "buffer.explorer_input.default_workflow_type=judged_flow:AgreeWithTheJudge",
        f"explorer.auxiliary_models=[{yaml.safe_dump(judge, default_flow_style=True).strip()}]",
        "cluster.ray_address=local",
    )
    proc = trinity(env, tmp_path, *args, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = tmp_path / RUN
    said = [json.loads(line) for line in replies.read_text().splitlines()]
    assert len(said) == 2 * 2  # one question per task, 2 tasks a step, 2 steps
    # the auxiliary engine served the model the config names, and answered with the demo's digits
    assert {s["model"] for s in said} == {judge["model_path"]}
    assert all(s["said"] and set(s["said"]) <= set("0123456789+=") for s in said), said
    experiences = [json.loads(line) for line in (run / "arith_experiences.jsonl").read_text().splitlines()]
    assert len(experiences) == 2 * 2 * 2 and all(e["metrics"]["judge_answered"] == 1.0 for e in experiences)
    # its actor started with the run, beside the rollout engine, and logged each request it took
    logs = os.listdir(run / "logs")
    assert {"auxiliary0.engine0.log", "rollout.engine0.log"} <= set(logs), logs
    assert (run / "logs" / "auxiliary0.engine0.log").read_text().count("prompt") >= 4
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["cluster"]["explorer_gpu_num"] == 2 and config["cluster"]["rollout_gpu_num"] == 1
    assert config["explorer"]["auxiliary_models"][0]["engine_type"] == engine
    assert config["explorer"]["rollout_model"]["engine_type"] == "transformers"
    assert [r["step"] for r in lines(run, "explorer")] == [1, 2]
