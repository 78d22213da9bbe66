"""`trinity config render`: the reference config on every profile, formats, overrides, outputs."""

import json

import pytest
import yaml

from tests.conftest import MINIMAL, PROFILES, REFERENCE

CONTRACT = {
    "ascend910b": dict(device_type="npu", key="NPU", backend="hccl", sync="hccl", device="npu"),
    "ascend910b4": dict(device_type="npu", key="NPU", backend="hccl", sync="hccl", device="npu"),
    "ascend910c": dict(device_type="npu", key="NPU", backend="hccl", sync="hccl", device="npu"),
    "a100": dict(device_type="cuda", key="GPU", backend="nccl", sync="nccl", device="cuda"),
    "a100_40g": dict(device_type="cuda", key="GPU", backend="nccl", sync="nccl", device="cuda"),
    "h100": dict(device_type="cuda", key="GPU", backend="nccl", sync="nccl", device="cuda"),
    "h200": dict(device_type="cuda", key="GPU", backend="nccl", sync="nccl", device="cuda"),
    "cpu": dict(device_type="cpu", key="CPU", backend="gloo", sync="gloo", device="cpu"),
}


@pytest.mark.parametrize("profile", PROFILES)
def test_reference_config_renders_on_every_profile(cli, profile):
    result = cli("config", "render", "--config", REFERENCE, f"+hardware={profile}", "--format", "json")
    assert result.code == 0, result.err
    cfg, want = result.json(), CONTRACT[profile]
    assert cfg["hardware"]["name"] == profile
    assert cfg["hardware"]["device_type"] == want["device_type"]
    assert cfg["hardware"]["ray_resource_key"] == want["key"]
    assert cfg["hardware"]["collective_backend"] == want["backend"]
    assert cfg["synchronizer"]["sync_method"] == want["sync"]
    assert cfg["trainer"]["device"] == want["device"]
    assert cfg["trainer"]["use_torch_compile"] is False  # the reference file says so
    cluster = cfg["cluster"]
    assert (cluster["total_gpu_num"], cluster["rollout_gpu_num"], cluster["explorer_gpu_num"]) == (6, 4, 4)
    assert (cluster["trainer_gpu_num"], cluster["trainer_node_num"], cluster["trainer_gpu_num_per_node"]) == (2, 1, 2)
    assert cfg["synchronizer"]["weight_sync_world_size"] == 5
    assert set(cfg["env"]) == {"common", "trainer", "rollout"}
    assert all(isinstance(v, str) for role in cfg["env"].values() for v in role.values())


def test_reference_on_ascend_gets_npu_env_and_a_vendor_warning(cli):
    result = cli("config", "render", "--config", REFERENCE, "+hardware=ascend910b", "--format", "json")
    env = result.json()["env"]
    assert env["trainer"]["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"
    assert env["rollout"]["VLLM_ASCEND_ENABLE_NZ"] == "0"
    assert "PYTORCH_NPU_ALLOC_CONF" not in env["rollout"]  # no expandable segments under vLLM sleep mode
    assert result.json()["trainer"]["process_group_backend"] == "cpu:gloo,npu:hccl"
    assert "gsm8k.yaml:62:3: synchronizer.sync_method: 'nccl' is not the collective backend of ascend910b" in result.err
    assert "profiles/ascend910b.yaml:12:3" in result.err and "online" in result.err


def test_reference_on_a100_gets_cuda_env_and_no_warning(cli):
    result = cli("config", "render", "--config", REFERENCE, "hardware=a100", "--format", "json")
    assert result.err == ""
    cfg = result.json()
    assert cfg["env"]["rollout"]["NCCL_CUMEM_ENABLE"] == "0"
    assert cfg["env"]["trainer"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert cfg["trainer"]["process_group_backend"] == "cpu:gloo,cuda:nccl"
    assert cfg["trainer"]["max_token_len_per_gpu"] == 8192  # a token count, not a credential


def test_plain_and_plus_hardware_mean_the_same(cli):
    plain = cli("config", "render", "--config", REFERENCE, "hardware=h200").out
    plus = cli("config", "render", "--config", REFERENCE, "+hardware=h200").out
    forced = cli("config", "render", "--config", REFERENCE, "++hardware=h200").out
    assert plain == plus == forced and "name: h200" in plain


def test_yaml_is_the_default_format_and_parses(cli):
    result = cli("config", "render", "--config", REFERENCE, "hardware=a100")
    cfg = yaml.safe_load(result.out)
    assert cfg["hardware"]["name"] == "a100" and cfg["algorithm"]["optimizer"]["lr"] == 1e-5


def test_default_config_and_hardware(cli):
    cfg = cli("config", "render", "--format", "json").json()  # the embedded demo, on the hardware detected here
    assert (cfg["project"], cfg["name"]) == ("trinity-demo", "arith") and cfg["hardware"]["name"] == "cpu"


def test_overrides_in_hydra_grammar(cli):
    result = cli(
        "config",
        "render",
        "--config",
        REFERENCE,
        "hardware=a100",
        "trainer.save_interval=50",
        "explorer.rollout_model.engine_num=2",
        "~buffer.explorer_input.eval_tasksets",
        "buffer.explorer_input.taskset.format.system_prompt='Think step by step.'",
        "--format",
        "json",
    )
    cfg = result.json()
    assert cfg["trainer"]["save_interval"] == 50
    assert cfg["cluster"]["rollout_gpu_num"] == 2 and cfg["cluster"]["trainer_gpu_num"] == 4
    assert cfg["buffer"]["explorer_input"]["eval_tasksets"] == []
    assert cfg["buffer"]["explorer_input"]["taskset"]["format"]["system_prompt"] == "Think step by step."


def test_override_into_a_list_item(cli):
    cfg = cli(
        "config",
        "render",
        "--config",
        REFERENCE,
        "buffer.explorer_input.eval_tasksets.0.split=validation",
        "--format",
        "json",
    ).json()
    assert cfg["buffer"]["explorer_input"]["eval_tasksets"][0]["split"] == "validation"


def test_overrides_may_come_before_and_after_options(cli):
    result = cli(
        "config", "render", "trainer.save_interval=7", "--config", REFERENCE, "--format", "json", "hardware=a100"
    )
    assert result.json()["trainer"]["save_interval"] == 7 and result.json()["hardware"]["name"] == "a100"


def test_env_interpolation_is_typed_by_the_field(cli, write, monkeypatch):
    path = write(
        "run.yaml", MINIMAL + "trainer:\n  save_interval: ${oc.env:SAVE_EVERY,7}\n  grad_clip: ${oc.env:CLIP,0.5}\n"
    )
    assert cli("config", "render", "-c", path, "--format", "json").json()["trainer"]["save_interval"] == 7
    monkeypatch.setenv("SAVE_EVERY", "12")
    cfg = cli("config", "render", "-c", path, "--format", "json").json()
    assert cfg["trainer"]["save_interval"] == 12 and cfg["trainer"]["grad_clip"] == 0.5


def test_reference_env_defaults_follow_the_environment(cli, monkeypatch):
    monkeypatch.setenv("TRINITY_MODEL_PATH", "/data/qwen")
    cfg = cli("config", "render", "--config", REFERENCE, "--format", "json").json()
    assert cfg["model"]["model_path"] == "/data/qwen"
    assert cfg["explorer"]["rollout_model"]["model_path"] == "/data/qwen"


def test_interpolation_between_keys(cli, write):
    path = write("run.yaml", MINIMAL + "name: ${project}-run\nproject: demo\n")
    assert cli("config", "render", "-c", path, "--format", "json").json()["name"] == "demo-run"


def test_env_interpolations_beside_a_reference_and_inside_text(cli, write, monkeypatch):
    # env-only values resolve without the whole tree; one reference among them resolves with it: same results
    monkeypatch.setenv("TRINITY_TEST_PROJECT", "p")
    env_only = MINIMAL + "project: x-${oc.env:TRINITY_TEST_PROJECT,y}-z\nname: ${oc.env:TRINITY_TEST_UNSET,'a,b'}\n"
    cfg = cli("config", "render", "-c", write("env.yaml", env_only), "--format", "json").json()
    assert (cfg["project"], cfg["name"]) == ("x-p-z", "a,b")
    mixed = MINIMAL + "project: ${oc.env:TRINITY_TEST_PROJECT,y}\nname: ${project}-run\n"
    cfg = cli("config", "render", "-c", write("mixed.yaml", mixed), "--format", "json").json()
    assert (cfg["project"], cfg["name"]) == ("p", "p-run")
    missing = cli("config", "render", "-c", write("unset.yaml", MINIMAL + "project: ${oc.env:TRINITY_TEST_UNSET}\n"))
    assert missing.code == 2 and "environment variable TRINITY_TEST_UNSET is not set and has no default" in missing.err


def test_only_a_value_that_refers_to_another_key_builds_the_whole_tree(cli, write, monkeypatch):
    # the shortcut is taken where it may be: env-only values never build OmegaConf over the whole tree
    from trinity.config import interpolate

    monkeypatch.setenv("TRINITY_TEST_PROJECT", "p")
    built = []
    whole = interpolate._whole_tree
    monkeypatch.setattr(interpolate, "_whole_tree", lambda tree, where: built.append(1) or whole(tree, where))
    env_only = MINIMAL + "project: x-${oc.env:TRINITY_TEST_PROJECT,y}-z\n"
    assert cli("config", "render", "-c", write("env.yaml", env_only)).code == 0 and built == []
    mixed = MINIMAL + "project: ${oc.env:TRINITY_TEST_PROJECT,y}\nname: ${project}-run\n"
    assert cli("config", "render", "-c", write("mixed.yaml", mixed)).code == 0 and built == [1]


def test_env_values_read_without_the_grammar_are_what_omegaconf_reads(monkeypatch):
    # a plain `${oc.env:VAR,default}` is resolved without OmegaConf (its grammar is most of a render's resolution):
    # every value that shortcut takes must be OmegaConf's own, the variable set or not
    import random

    from omegaconf import OmegaConf

    from trinity.config.interpolate import _UNKNOWN, env_value

    monkeypatch.delenv("TRINITY_TEST_UNSET", raising=False)
    monkeypatch.setenv("TRINITY_TEST_SET", " 12 ")
    rnd = random.Random(0)
    defaults = ["./checkpoints", "Qwen/Qwen2.5-1.5B-Instruct", "7", "1e3", "true", "null", "inf", "nan", "1_000"]
    defaults += ["".join(rnd.choice("abeEfinlNrtuxA019._/-") for _ in range(rnd.randint(1, 6))) for _ in range(1500)]
    texts = ["${oc.env:TRINITY_TEST_SET}"]
    texts += [f"${{oc.env:{var},{d}}}" for var in ("TRINITY_TEST_UNSET", "TRINITY_TEST_SET") for d in defaults]
    taken = 0
    for text in texts:
        got = env_value(text)
        if got is not _UNKNOWN:
            taken += 1
            want = OmegaConf.create({"v": text})["v"]
            assert (got, type(got)) == (want, type(want)), text
    assert taken > len(texts) // 2
    assert env_value("${oc.env:TRINITY_TEST_UNSET}") is _UNKNOWN  # not set: OmegaConf's error report says so


def test_plain_hardware_overrides_read_without_the_grammar_are_what_hydra_reads():
    # `hardware=NAME` skips Hydra's override parser; every name it takes must be the one Hydra reads
    import random

    from hydra.core.override_parser.overrides_parser import OverridesParser

    from trinity.config.sources.overrides import plain_hardware

    parser = OverridesParser.create()
    rnd = random.Random(1)
    names = ["a100", "ascend910b", "cpu", "true", "True", "null", "nan", "Inf", "infinity", "e5", "yes", "off"]
    names += ["".join(rnd.choice("abefilnrstuxyINF019_") for _ in range(rnd.randint(1, 7))) for _ in range(800)]
    taken = 0
    for text in [f"{prefix}hardware={name}" for prefix in ("", "+", "++") for name in names]:
        name = plain_hardware(text)
        if name is not None:
            taken += 1
            parsed = parser.parse_override(text)
            assert (parsed.key_or_group, parsed.is_delete(), parsed.value()) == ("hardware", False, name), text
    assert taken > 1000
    assert plain_hardware("hardware=true") is None and plain_hardware("hardware=a,b") is None
    assert plain_hardware("~hardware") is None and plain_hardware("hardware@pkg=a100") is None


def test_secrets_are_masked_unless_asked(cli, write):
    path = write(
        "run.yaml",
        MINIMAL
        + "env:\n  common:\n    HF_TOKEN: hf_planted_secret\nmonitor:\n  monitor_type: wandb\n  monitor_args:\n    "
        "api_key: wandb_planted\n"
        "buffer:\n  explorer_input:\n    default_workflow_type: math_workflow\n    taskset:\n      name: t\n      "
        "format:\n        prompt_key: question\n",
    )
    for fmt in ("yaml", "json"):
        result = cli("config", "render", "-c", path, "--format", fmt)
        assert "planted" not in result.out + result.err
        assert "***" in result.out
    shown = cli("config", "render", "-c", path, "--format", "json", "--show-secrets").json()
    assert shown["env"]["common"]["HF_TOKEN"] == "hf_planted_secret"
    assert shown["monitor"]["monitor_args"]["api_key"] == "wandb_planted"
    masked = cli("config", "render", "-c", path, "--format", "json").json()
    assert masked["buffer"]["explorer_input"]["taskset"]["format"]["prompt_key"] == "question"  # not a credential
    assert masked["hardware"]["ray_resource_key"] == "CPU"


def test_output_file_is_written_atomically(cli, tmp_path):
    target = tmp_path / "resolved.yaml"
    target.write_text("old content\n")
    assert cli("config", "render", "--config", REFERENCE, "-o", target).code == 0
    assert yaml.safe_load(target.read_text())["hardware"]["name"] == "cpu"
    assert [p.name for p in tmp_path.iterdir()] == ["resolved.yaml"]  # no temporary left behind


def test_failed_render_leaves_the_output_untouched(cli, write, tmp_path):
    target = tmp_path / "resolved.yaml"
    target.write_text("old content\n")
    bad = write("bad.yaml", MINIMAL + "trainer:\n  save_interval: -1\n")
    assert cli("config", "render", "-c", bad, "-o", target).code == 2
    assert target.read_text() == "old content\n"


def test_render_validate_and_diff_create_nothing(cli, tmp_path, local_gsm8k):
    before = sorted(tmp_path.rglob("*"))  # validate reads the local data set the fixture made here
    render = cli("config", "render", "--config", REFERENCE, "hardware=ascend910b")
    validate = cli("config", "validate", "--config", REFERENCE, "hardware=ascend910b")
    diff = cli("config", "diff", "--config", REFERENCE, "hardware=ascend910b", "--vs", "hardware=a100")
    assert render.code == 0 and "device_type: npu" in render.out, render.err
    assert validate.code == 0 and validate.out == "valid for ascend910b (npu): 1 warning(s)\n", validate.err
    assert diff.code == 1 and "~ trainer.device: 'npu' -> 'cuda'" in diff.out, diff.err
    assert sorted(tmp_path.rglob("*")) == before


def test_json_output_is_one_object_on_stdout(cli):
    result = cli("config", "render", "--config", REFERENCE, "hardware=ascend910b", "--format", "json")
    assert result.code == 0 and json.loads(result.out)["hardware"]["name"] == "ascend910b"
    assert "warning:" in result.err and "warning" not in result.out
