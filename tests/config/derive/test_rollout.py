"""Rules of trinity/config/derive/rollout.py, each through `trinity config render/validate/plan`: auxiliary models."""

import json

import yaml

from tests.conftest import MINIMAL

JUDGE = (
    "explorer:\n  auxiliary_models:\n    - model_path: /models/judge\n      engine_num: 2\n"
    "      tensor_parallel_size: 2\n"
)


def test_an_auxiliary_models_devices_count_with_the_rollout_engines_and_leave_the_trainer_the_rest(cli, write):
    result = cli("config", "render", "-c", write("run.yaml", MINIMAL + JUDGE), "hardware=a100", "--format", "json")
    assert result.code == 0, result.err
    config = json.loads(result.out)
    cluster, judge = config["cluster"], config["explorer"]["auxiliary_models"][0]
    assert (cluster["rollout_gpu_num"], cluster["explorer_gpu_num"], cluster["trainer_gpu_num"]) == (1, 5, 3)
    # served for the workflows, on the rollout engines' type, with the model's context length (upstream's rule)
    assert judge["enable_openai_api"] is True and judge["engine_type"] == "vllm"
    one = "explorer.auxiliary_models.0.tensor_parallel_size=1"  # a transformers engine drives one device
    cpu = cli("config", "render", "-c", write("run.yaml", MINIMAL + JUDGE), "hardware=cpu", "mode=explore", one)
    assert cpu.code == 0, cpu.err
    judge = yaml.safe_load(cpu.out)["explorer"]["auxiliary_models"][0]
    assert (judge["engine_type"], judge["dtype"]) == ("transformers", "float32")  # the CPU profile's recommendation
    plan = cli("run", "-c", write("run.yaml", MINIMAL + JUDGE), "hardware=a100", "--dry-run", "--format", "json")
    groups = {g["name"]: g for g in plan.json()["placement_groups"]}
    assert groups["auxiliary0"] == {"name": "auxiliary0", "strategy": "PACK", "bundles": [{"GPU": 2, "CPU": 2}] * 2}


def test_an_auxiliary_model_names_its_model_and_is_served(cli, write):
    text = MINIMAL + "explorer:\n  auxiliary_models:\n    - engine_num: 1\n      enable_openai_api: false\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=a100")
    assert result.code == 2
    # Trinity-RFT's former name of its vLLM engine is vLLM, with a note, as for the rollout model
    alias = MINIMAL + "explorer:\n  auxiliary_models:\n    - {model_path: /models/judge, engine_type: vllm_async}\n"
    named = cli("config", "render", "-c", write("run.yaml", alias), "hardware=a100")
    assert named.code == 0 and "engine_type: vllm\n" in named.out.split("auxiliary_models:")[1]
    assert "explorer.auxiliary_models[0].engine_type: 'vllm_async' is Trinity-RFT's former name" in named.err
    assert "explorer.auxiliary_models[0]: an auxiliary model names the model its engines serve" in result.err
    assert "hint: set explorer.auxiliary_models[0].model_path" in result.err
    assert "run.yaml:6:7: explorer.auxiliary_models[0].enable_openai_api: workflows reach an auxiliary model" in (
        result.err
    )


def test_auxiliary_models_are_refused_where_trainer_and_engines_take_turns_on_every_device(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", MINIMAL + JUDGE), "hardware=a100", "mode=colocate")
    assert result.code == 2
    assert "explorer.auxiliary_models: mode 'colocate' has the trainer and the rollout engines take turns" in (
        result.err
    )
    assert "hint: set mode=both" in result.err


def test_the_memory_plan_sizes_an_auxiliary_models_engines(cli, write):
    text = MINIMAL + "explorer:\n  auxiliary_models:\n    - model_path: Qwen/Qwen2.5-32B-Instruct\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=a100_40g", "model.max_model_len=4096")
    assert result.code == 2
    assert "explorer.auxiliary_models[0].gpu_memory_utilization: vLLM engine (Qwen/Qwen2.5-32B-Instruct" in result.err
    assert "explorer.auxiliary_models[0].tensor_parallel_size=4" in result.err


def test_a_workflow_that_asks_a_judge_needs_an_auxiliary_model(cli, write):
    text = MINIMAL + "buffer:\n  explorer_input:\n    taskset: {path: /data/t}\n"
    args = ("hardware=a100", "buffer.explorer_input.default_workflow_type=math_ruler_workflow")
    result = cli("config", "validate", "-c", write("run.yaml", text), *args)
    assert result.code == 2
    assert (
        "buffer.explorer_input.taskset.default_workflow_type: math_ruler_workflow scores each task's answers with its "
        "judge, the first auxiliary model, and there is none" in result.err
    )
    judged = text + JUDGE.replace("engine_num: 2", "engine_num: 1")
    assert "math_ruler_workflow scores" not in cli("config", "validate", "-c", write("run.yaml", judged), *args).err


def test_plan_memory_shows_the_auxiliary_engines_check(cli, write):
    text = MINIMAL + "explorer:\n  auxiliary_models:\n    - model_path: Qwen/Qwen2.5-7B-Instruct\n"
    result = cli("plan", "memory", "-c", write("run.yaml", text), "hardware=h100", "model.max_model_len=4096")
    assert result.code == 0, result.err
    assert "vLLM engine (Qwen/Qwen2.5-7B-Instruct, 1 device per engine): 16.5 GiB of 72.0 GiB" in result.out
