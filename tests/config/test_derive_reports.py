"""Every report a derivation rule makes, word for word: the message, what is allowed and the hint are
what a user reads, so each is part of the contract (and a changed word fails here)."""

import pytest

from tests.conftest import MINIMAL, REPO

A100 = f"{REPO}/profiles/a100.yaml"
ASCEND = f"{REPO}/profiles/ascend910b.yaml"
EXPLORE_NOTE = (
    "note: schema default: synchronizer.sync_method: a collective sync needs explorer and trainer "
    "running side by side; in mode 'explore' it becomes 'checkpoint'\n"
)

# (run file after MINIMAL, CLI args, exit code, the whole of stderr)
REPORTS = {
    "more devices per node than the chip's node has": (
        "cluster:\n  gpu_per_node: 9\n",
        ["hardware=a100"],
        2,
        "trinity: 1 problem in the config\n"
        f"error: run.yaml:4:3: cluster.gpu_per_node: 9 devices per node, but one a100 node has 8 ({A100}:14:3)\n"
        "    allowed: 1..8\n"
        "    hint: lower cluster.gpu_per_node, raise cluster.node_num, or choose the right hardware profile\n",
    ),
    "an engine larger than a node that does not fill whole nodes": (
        "mode: explore\ncluster:\n  node_num: 2\n  gpu_per_node: 4\nexplorer:\n  rollout_model:\n    "
        "tensor_parallel_size: 6\n",
        ["hardware=a100"],
        2,
        "trinity: 1 problem in the config\n"
        "error: run.yaml:9:5: explorer.rollout_model.tensor_parallel_size: one engine needs 6 devices (TP x PP x "
        "DP); an engine larger than a node must span whole nodes of 4\n"
        "    allowed: devices per engine <= 4 or a multiple of 4\n"
        "    hint: change the parallel sizes so one engine fits a node or fills whole nodes\n" + EXPLORE_NOTE,
    ),
    "rollout takes every device": (
        "mode: both\nexplorer:\n  rollout_model:\n    engine_num: 8\n",
        ["hardware=a100"],
        2,
        "trinity: 1 problem in the config\n"
        "error: run.yaml:6:5: explorer.rollout_model.engine_num: no devices left for the trainer: 8 devices (1 "
        "node(s) x 8) minus 8 for rollout\n"
        "    allowed: rollout devices < 8\n"
        "    hint: lower explorer.rollout_model.engine_num or tensor_parallel_size, or raise cluster.node_num, or set "
        "mode=colocate (trainer and engines take turns on the devices)\n",
    ),
    "the trainer's share neither fits a node nor fills nodes": (
        "cluster:\n  node_num: 2\nexplorer:\n  rollout_model:\n    engine_num: 4\n",
        ["hardware=a100"],
        2,
        "trinity: 1 problem in the config\n"
        "error: run.yaml:7:5: explorer.rollout_model.engine_num: the trainer would get 12 devices (16 - 4 for "
        "rollout): that neither fits one node of 8 nor fills whole nodes\n"
        "    allowed: trainer devices <= 8 or a multiple of 8\n"
        "    hint: change the rollout size so the devices left over fit one node or fill whole nodes\n",
    ),
    "rollout larger than the cluster": (
        "mode: explore\nexplorer:\n  rollout_model:\n    engine_num: 9\n",
        ["hardware=a100"],
        2,
        "trinity: 1 problem in the config\n"
        "error: run.yaml:6:5: explorer.rollout_model.engine_num: rollout needs 9 devices but the cluster has 8\n"
        "    allowed: <= 8\n"
        "    hint: lower explorer.rollout_model.engine_num or raise cluster.node_num\n" + EXPLORE_NOTE,
    ),
    "a derived count written by hand": (
        "cluster:\n  trainer_gpu_num: 3\n",
        ["hardware=a100"],
        2,
        "trinity: 1 problem in the config\n"
        "error: run.yaml:4:3: cluster.trainer_gpu_num: is derived (7) and must not be set to 3\n"
        "    hint: remove cluster.trainer_gpu_num; set node_num, gpu_per_node or the engine sizes instead\n",
    ),
    "a trainer device that contradicts the hardware": (
        "trainer:\n  device: cuda\n",
        ["hardware=ascend910b"],
        0,
        "warning: run.yaml:4:3: trainer.device: 'cuda' contradicts hardware fact device_type='npu' of ascend910b "
        f"({ASCEND}:8:3); using 'npu'\n"
        "    allowed: 'npu'\n"
        "    hint: remove trainer.device: the hardware profile decides it\n",
    ),
    "torch.compile where the chip has no compiler": (
        "trainer:\n  use_torch_compile: true\n",
        ["hardware=ascend910b"],
        2,
        "trinity: 1 problem in the config\n"
        "error: run.yaml:4:3: trainer.use_torch_compile: torch.compile cannot be used for training on ascend910b: "
        "inductor has no NPU backend; every verl NPU recipe turns torch.compile off\n"
        "    allowed: false\n"
        "    hint: set trainer.use_torch_compile: false, or remove it to take the hardware's default\n",
    ),
    "a trainer strategy the hardware does not run": (
        "trainer:\n  trainer_strategy: megatron\n",
        ["hardware=ascend910b"],
        2,
        "trinity: 1 problem in the config\n"
        "error: run.yaml:4:3: trainer.trainer_strategy: 'megatron' does not run on ascend910b: Megatron training on "
        "Ascend NPUs is not supported yet (RFC #604 ToDo); use fsdp or fsdp2\n"
        "    allowed: fsdp, fsdp2\n"
        "    hint: set trainer.trainer_strategy=fsdp\n",
    ),
    "a response that leaves no room for the prompt": (
        "model:\n  model_path: /m\n  max_model_len: 1024\n  max_response_tokens: 1024\n",
        ["hardware=a100"],
        2,
        "trinity: 1 problem in the config\n"
        "error: run.yaml:4:3: model.max_response_tokens: 1024 leaves no room for a prompt in model.max_model_len=1024\n"
        "    allowed: < 1024\n"
        "    hint: raise model.max_model_len or lower model.max_response_tokens\n",
    ),
    "another vendor's collective": (
        "synchronizer:\n  sync_method: hccl\n",
        ["hardware=a100"],
        0,
        "warning: run.yaml:4:3: synchronizer.sync_method: 'hccl' is not the collective backend of a100, which is "
        f"'nccl' ({A100}:11:3); using 'nccl'\n"
        "    allowed: nccl, online, checkpoint, memory\n"
        "    hint: write sync_method: online to get the right collective on every hardware\n",
    ),
    "a collective in colocate mode": (
        "mode: colocate\nsynchronizer:\n  sync_method: nccl\n",
        ["hardware=a100"],
        0,
        "note: run.yaml:5:3: synchronizer.sync_method: a collective sync needs explorer and trainer running side by "
        "side; in mode 'colocate' it becomes 'memory'\n",
    ),
    "a collective timeout shorter than the sync timeout": (
        "synchronizer:\n  sync_timeout: 3600\nenv:\n  common:\n    HCCL_EXEC_TIMEOUT: '600'\n",
        ["hardware=ascend910b"],
        0,
        "warning: run.yaml:7:5: env.common.HCCL_EXEC_TIMEOUT: HCCL_EXEC_TIMEOUT=600 is shorter than "
        "synchronizer.sync_timeout=3600: a long weight sync will be cut off\n"
        "    allowed: >= 3600\n"
        "    hint: remove env.common.HCCL_EXEC_TIMEOUT to have it derived, or lower synchronizer.sync_timeout\n",
    ),
}


@pytest.mark.parametrize("case", list(REPORTS))
def test_each_rule_report_word_for_word(cli, write, case):
    text, args, code, expected = REPORTS[case]
    path = write("run.yaml", text if text.startswith("model:") else MINIMAL + text)
    result = cli("config", "render", "-c", path, *args)  # render: the rules alone (validate adds the memory fit)
    assert result.code == code
    assert result.err == expected


def test_a_dtype_the_chip_cannot_compute_in_word_for_word(cli, write, tmp_path):
    write("profiles/ascend910a.yaml", "extends: ascend910b\nfacts:\n  chip: Ascend910A\n  dtypes: [float16, float32]\n")
    rollout = "explorer:\n  rollout_model:\n    dtype: bfloat16\n"
    result = cli(
        "config",
        "render",
        "-c",
        write("run.yaml", MINIMAL + rollout),
        "hardware=ascend910a",
        "--profile-dir",
        tmp_path / "profiles",
    )
    assert result.code == 2
    assert result.err == (
        "trinity: 2 problems in the config\n"
        "error: run.yaml:5:5: explorer.rollout_model.dtype: bfloat16 is not supported by Ascend910A (ascend910a)\n"
        "    allowed: float16, float32\n"
        "    hint: set explorer.rollout_model.dtype=float16\n"
        "error: schema default: trainer.param_dtype: bfloat16 is not supported by Ascend910A (ascend910a)\n"
        "    allowed: float16, float32\n"
        "    hint: set trainer.param_dtype=float16\n"
    )
