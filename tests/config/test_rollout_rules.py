"""What the rollout engines may ask of the hardware, from profile data: vLLM's CPU build (no sleep mode, a KV
cache sized from host memory), and auxiliary models, checked as rollout engines are. Each
through `trinity config validate/render`, as a user runs it."""

import pytest

from tests.conftest import MINIMAL

VLLM = "algorithm:\n  repeat_times: 2\nexplorer:\n  rollout_model:\n    engine_type: vllm\n"


@pytest.fixture
def validate(cli, write):
    def _validate(text: str, *args: str):
        return cli("config", "validate", "-c", write("run.yaml", MINIMAL + text), *args)

    return _validate


@pytest.fixture
def rendered(cli, write):
    def _render(text: str, *args: str):
        result = cli("config", "render", "-c", write("run.yaml", MINIMAL + text), "--format", "json", *args)
        assert result.code == 0, result.err
        return result.json()

    return _render


# --- sleep mode ---------------------------------------------------------------------------------------------


def test_colocate_with_vllm_on_cpu_is_refused_with_the_reason(validate):
    result = validate("mode: colocate\n" + VLLM, "hardware=cpu")
    assert result.code == 2 and result.err.startswith("trinity: 1 problem in the config\n")
    assert (
        "error: run.yaml:8:5: explorer.rollout_model.engine_type: mode 'colocate' with engine type 'vllm' needs "
        "vLLM's sleep mode, which cpu lacks (cpu.rollout_sleep_mode=False (" in result.err
    )
    assert (
        "profiles/cpu.yaml:20:3)): vLLM's CPU build has no sleep mode (it refuses enable_sleep_mode at start), "
        "so a vLLM engine cannot free its memory for a colocated trainer\n"
        "    allowed: transformers\n"
        "    hint: set explorer.rollout_model.engine_type=transformers, or mode=both\n"
    ) in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    "args",
    [
        ("hardware=cpu", "mode=colocate"),
        ("hardware=cpu", "mode=both", "explorer.rollout_model.engine_type=vllm"),
        ("hardware=a100", "mode=colocate", "explorer.rollout_model.engine_type=vllm"),
    ],
)
def test_colocate_stays_valid_with_transformers_on_cpu_and_with_vllm_where_it_sleeps(validate, args):
    result = validate("algorithm:\n  repeat_times: 2\n", *args)
    assert result.code == 0, result.err


def test_a_stage_that_colocates_vllm_on_cpu_is_refused_in_that_stage(validate):
    text = VLLM + "stages:\n  - stage_name: one\n  - stage_name: two\n    mode: colocate\n"
    result = validate(text, "hardware=cpu")
    assert (
        result.code == 2
        and "needs vLLM's sleep mode, which cpu lacks" in result.err
        and "(in stage 'two')" in result.err
    )


# --- the KV cache ---------------------------------------------------------------------------------------------


def test_a_vllm_engine_on_cpu_gets_the_profiles_kv_cache_size_with_its_provenance(cli, write):
    path = write("run.yaml", MINIMAL + VLLM)
    result = cli("config", "render", "-c", path, "hardware=cpu", "--explain", "explorer.rollout_model.kv_cache_mib")
    assert result.code == 0, result.err
    assert "explorer.rollout_model.kv_cache_mib = 512" in result.out
    assert "rule kv_cache                                512  <- cpu.rollout_kv_cache_mib=512 (" in result.out
    assert "profiles/cpu.yaml:24:3), explorer.rollout_model.engine_type='vllm' (run.yaml:7:5)" in result.out


def test_a_users_kv_cache_size_wins_and_other_engines_and_hardware_get_none(rendered):
    assert rendered(VLLM + "    kv_cache_mib: 64\n", "hardware=cpu")["explorer"]["rollout_model"]["kv_cache_mib"] == 64
    # transformers
    assert (
        rendered("algorithm:\n  repeat_times: 2\n", "hardware=cpu")["explorer"]["rollout_model"]["kv_cache_mib"] is None
    )
    # sized by gpu_memory_utilization
    assert rendered(VLLM, "hardware=a100")["explorer"]["rollout_model"]["kv_cache_mib"] is None


def test_a_kv_cache_size_for_an_engine_without_one_is_refused_where_it_is_written(validate):
    result = validate("explorer:\n  rollout_model:\n    kv_cache_mib: 256\n", "hardware=cpu")
    assert result.code == 2
    assert (
        "run.yaml:5:5: explorer.rollout_model.kv_cache_mib: a KV cache size is vLLM's, but the engine is 'transformers'"
        in result.err
    )
    assert "hint: remove it, or set explorer.rollout_model.engine_type=vllm" in result.err


def test_a_gpu_memory_share_that_fails_vllm_on_cpu_is_reported_with_the_reason(validate):
    result = validate(VLLM + "    gpu_memory_utilization: 0.9\n", "hardware=cpu")
    assert result.code == 0
    assert (
        "warning: run.yaml:8:5: explorer.rollout_model.gpu_memory_utilization: 0.9 is above 0.5, the most cpu allows "
        "(cpu.max_gpu_memory_utilization=0.5 (" in result.err
    )
    assert (
        "profiles/cpu.yaml:23:3)): vLLM's CPU build takes gpu_memory_utilization as a share of the host memory of "
        "NUMA node 0, and 0.9 fails at start" in result.err
    )
    assert (
        "    allowed: <= 0.5\n    hint: set explorer.rollout_model.gpu_memory_utilization to at most 0.5, or remove "
        "it (the KV cache is sized by explorer.rollout_model.kv_cache_mib=512 here)\n" in result.err
    )
    assert validate(VLLM + "    gpu_memory_utilization: 0.9\n", "hardware=cpu", "--strict").code == 2


@pytest.mark.parametrize(
    "text,args",
    [
        (VLLM + "    gpu_memory_utilization: 0.5\n", ("hardware=cpu",)),
        (VLLM + "    gpu_memory_utilization: 0.95\n", ("hardware=a100",)),
        (
            "explorer:\n  rollout_model:\n    gpu_memory_utilization: 0.9\nalgorithm:\n  repeat_times: 2\n",
            ("hardware=cpu",),
        ),
    ],
)
def test_a_memory_share_within_the_hardwares_bound_or_unused_is_not_reported(validate, text, args):
    result = validate(text, *args)
    assert result.code == 0 and "gpu_memory_utilization" not in result.err


def test_the_schema_default_share_on_cpu_is_not_the_users_and_not_reported(validate):
    result = validate(VLLM, "hardware=cpu")
    assert result.code == 0 and "gpu_memory_utilization" not in result.err


# --- auxiliary models -----------------------------------------------------------------------------------------


def test_auxiliary_models_devices_and_dtypes_are_checked_like_the_rollout_engines(validate):
    text = (
        "explorer:\n  auxiliary_models:\n    - model_path: /models/judge\n      engine_num: 8\n      dtype: float16\n"
    )
    result = validate(text, "hardware=cpu", "mode=explore")
    assert result.code == 2
    assert "explorer.auxiliary_models[0].dtype: float16 is not supported" in result.err
    assert "explorer.auxiliary_models: rollout needs 9 devices, 8 of them the auxiliary models' engines," in result.err


# --- the OpenAI endpoint ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key, value", [("base_port", "8100"), ("api_key", "s3cret"), ("tool_call_parser", "hermes")])
def test_the_endpoints_settings_without_the_endpoint_are_refused_by_name(validate, key, value):
    result = validate(f"explorer:\n  rollout_model:\n    {key}: {value}\n", "hardware=a100")
    assert result.code == 2 and result.err.startswith("trinity: 1 problem in the config\n"), result.err
    assert (
        f"explorer.rollout_model.{key}: {key} configures the engines' OpenAI endpoint, which is not served"
        in result.err
    )
    assert f"hint: set explorer.rollout_model.enable_openai_api: true, or remove {key}" in result.err
    assert "s3cret" not in result.err  # a key is a credential: masked, even in an error


def test_the_endpoints_settings_are_taken_with_it_and_the_default_key_anywhere(validate, rendered):
    assert validate("explorer:\n  rollout_model:\n    api_key: EMPTY\n", "hardware=a100").code == 0
    text = (
        "explorer:\n  rollout_model:\n    enable_openai_api: true\n    base_port: 8100\n    tool_call_parser: hermes\n"
    )
    rollout = rendered(text, "hardware=a100")["explorer"]["rollout_model"]
    assert (rollout["enable_openai_api"], rollout["base_port"], rollout["tool_call_parser"]) == (True, 8100, "hermes")


def test_an_agent_workflow_without_the_endpoint_is_refused_where_its_taskset_names_it(validate):
    text = "buffer:\n  explorer_input:\n    taskset: {path: /data/t}\n    default_workflow_type: react_agent_workflow\n"
    result = validate(text, "hardware=a100")
    assert result.code == 2 and result.err.startswith("trinity: 1 problem in the config\n"), result.err
    assert (
        "explorer.rollout_model.enable_openai_api: buffer.explorer_input.taskset runs react_agent_workflow, whose "
        "agent calls the engines' OpenAI endpoint, and no endpoint is served" in result.err
    )
    assert "allowed: true" in result.err
    served = validate(text + "explorer:\n  rollout_model:\n    enable_openai_api: true\n", "hardware=a100")
    assert "enable_openai_api" not in served.err and "trinity: 1 problem" in served.err  # the data path's, alone


def test_an_agent_needs_the_endpoint_to_read_its_tool_calls(validate):
    text = (
        "buffer:\n  explorer_input:\n    taskset: {path: /data/t}\n    default_workflow_type: react_agent_workflow\n"
        "explorer:\n  rollout_model:\n    enable_openai_api: true\n"
    )
    result = validate(text, "hardware=a100")
    assert (
        "explorer.rollout_model.tool_call_parser: buffer.explorer_input.taskset runs react_agent_workflow, whose agent "
        "offers tools, and the endpoint reads no tool calls" in result.err
    )
    assert "allowed: hermes, brackets" in result.err


def test_engines_past_the_last_port_and_a_serve_run_without_its_endpoint_are_one_error_each(validate):
    ports = validate(
        "explorer:\n  rollout_model:\n    enable_openai_api: true\n    engine_num: 4\n    base_port: 65534\n"
    )
    assert ports.code == 2 and ports.err.startswith("trinity: 1 problem in the config\n"), ports.err
    assert "engine i listens on base_port + i: 4 engines from 65534 pass port 65535" in ports.err
    assert "allowed: at most 65532" in ports.err
    text = "mode: serve\nexplorer:\n  rollout_model:\n    enable_openai_api: false\n    base_port: 8000\n"
    serve = validate(text + "buffer:\n  trainer_input:\n    experience_buffer: {storage_type: sql}\n", "hardware=a100")
    assert serve.code == 2 and serve.err.startswith("trinity: 1 problem in the config\n"), serve.err
    assert "explorer.rollout_model.enable_openai_api: mode 'serve' serves the rollout engines" in serve.err


# --- the endpoint's tool and reasoning settings (Trinity-RFT's vLLM server flags) -----------------------------

AGENT = (
    "buffer:\n  explorer_input:\n    taskset: {path: /data/t}\n    default_workflow_type: react_agent_workflow\n"
    "explorer:\n  rollout_model:\n    enable_openai_api: true\n    tool_call_parser: hermes\n"
)


def test_a_tool_call_format_asks_for_auto_tool_choice_unless_the_config_says_false(rendered, validate):
    served = "explorer:\n  rollout_model:\n    enable_openai_api: true\n"
    assert rendered(served)["explorer"]["rollout_model"]["enable_auto_tool_choice"] is False
    parsed = rendered(served + "    tool_call_parser: hermes\n")["explorer"]["rollout_model"]
    assert parsed["enable_auto_tool_choice"] is True  # derived from the parser (rule auto_tool_choice)
    off = rendered(served + "    tool_call_parser: hermes\n    enable_auto_tool_choice: false\n")
    assert off["explorer"]["rollout_model"]["enable_auto_tool_choice"] is False
    agent = validate(AGENT + "    enable_auto_tool_choice: false\n", "hardware=a100")
    assert (
        "error: run.yaml:11:5: explorer.rollout_model.enable_auto_tool_choice: buffer.explorer_input.taskset runs "
        "react_agent_workflow, whose agent asks for tool calls (tool_choice auto), which the endpoint refuses"
        in agent.err
    )


def test_auto_tool_choice_without_a_call_format_is_refused_as_vllm_refuses_to_start(validate):
    result = validate("explorer:\n  rollout_model:\n    enable_openai_api: true\n    enable_auto_tool_choice: true\n")
    assert result.code == 2
    assert (
        "error: run.yaml:6:5: explorer.rollout_model.enable_auto_tool_choice: auto tool choice needs a tool-call "
        "format to read calls from replies (vLLM refuses to start with --enable-auto-tool-choice and no "
        "--tool-call-parser)" in result.err
    )


@pytest.mark.parametrize("setting", ["reasoning_parser: qwen3", "enable_auto_tool_choice: true"])
def test_the_endpoints_reply_settings_without_an_endpoint_are_refused(validate, setting):
    name = setting.split(":")[0]
    result = validate(f"explorer:\n  rollout_model:\n    tool_call_parser: hermes\n    {setting}\n")
    assert result.code == 2
    assert (
        f"error: run.yaml:6:5: explorer.rollout_model.{name}: {name} configures the engines' OpenAI endpoint, which "
        "is not served" in result.err
    )


def test_a_vllm_reasoning_parser_trinity_does_not_port_is_refused_by_name(validate):
    result = validate("explorer:\n  rollout_model:\n    enable_openai_api: true\n    reasoning_parser: granite\n")
    assert result.code == 2
    assert (
        "explorer.rollout_model.reasoning_parser: known Trinity-RFT value, not supported by trinity yet: 'granite'"
        in (result.err)
    )
    assert "it splits deepseek_r1's and qwen3's <think>...</think>" in result.err
    unknown = validate("explorer:\n  rollout_model:\n    enable_openai_api: true\n    reasoning_parser: qwen4\n")
    assert unknown.code == 2 and "did you mean 'qwen3'?" in unknown.err


# --- serve mode's proxy (Trinity-RFT's explorer/proxy/) -------------------------------------------------------

SERVE = "mode: serve\nbuffer:\n  trainer_input:\n    experience_buffer: {storage_type: sql}\nexplorer:\n"


def test_the_proxys_keys_take_upstreams_defaults_and_a_users_values(rendered):
    explorer = rendered(SERVE + "  rollout_model: {engine_num: 2}\n", "hardware=cpu")["explorer"]
    proxy = {k: explorer[k] for k in ("listen_address", "proxy_port", "service_status_check_interval")}
    assert proxy == {"listen_address": "0.0.0.0", "proxy_port": 8010, "service_status_check_interval": 60}
    assert (explorer["min_running_model_num"], explorer["db_url"]) == (1, None)
    text = (
        "  listen_address: 127.0.0.1\n  proxy_port: 0\n  service_status_check_interval: 5\n"
        "  min_running_model_num: 2\n  db_url: sqlite:///calls/proxy.db\n  rollout_model: {engine_num: 2}\n"
    )
    explorer = rendered(SERVE + text, "hardware=cpu")["explorer"]
    assert [explorer[k] for k in ("listen_address", "proxy_port", "min_running_model_num", "db_url")] == [
        "127.0.0.1",
        0,
        2,
        "sqlite:///calls/proxy.db",
    ]
    assert rendered(SERVE + "  listen_address: node-3.cluster.local\n", "hardware=cpu")["explorer"]["listen_address"]


@pytest.mark.parametrize(
    "line, where, message, hint",
    [
        (
            "  proxy_port: 70000\n",
            "run.yaml:8:3: explorer.proxy_port",
            "input should be less than or equal to 65535 (got 70000)",
            "allowed: <= 65535",
        ),
        (
            "  listen_address: 0.0.0.0:8010\n",
            "run.yaml:8:3: explorer.listen_address",
            "'0.0.0.0:8010' is neither an IP address nor a host name",
            "hint: write the port in explorer.proxy_port, the address alone here",
        ),
        (
            "  listen_address: http://localhost\n",
            "run.yaml:8:3: explorer.listen_address",
            "'http://localhost' is neither an IP address nor a host name",
            "hint: write the address alone (0.0.0.0, 127.0.0.1, a host name), not a URL",
        ),
        (
            "  db_url: postgresql://trinity:pw@db/proxy\n",
            "run.yaml:8:3: explorer.db_url",
            "the proxy records its calls in SQLite; 'postgresql' is another database",
            "hint: write sqlite:///proxy_history.db (in the run directory)",
        ),
        (
            "  db_url: sqlite:///\n",
            "run.yaml:8:3: explorer.db_url",
            "'sqlite:///' is not a SQLite URL with a path",
            "allowed: sqlite:///<path>",
        ),
        (
            "  min_running_model_num: 3\n  rollout_model: {engine_num: 2}\n",
            "run.yaml:8:3: explorer.min_running_model_num",
            "the proxy keeps 3 engines serving while the others take new weights, and the run has 2 "
            "(explorer.rollout_model.engine_num)",
            "allowed: 1..2",
        ),
        (
            "  min_running_model_num: 0\n",
            "run.yaml:8:3: explorer.min_running_model_num",
            "input should be greater than 0 (got 0)",
            "allowed: > 0",
        ),
        (
            "  service_status_check_interval: 0\n",
            "run.yaml:8:3: explorer.service_status_check_interval",
            "input should be greater than 0 (got 0)",
            "allowed: > 0",
        ),
        (
            "  proxy_port: 8101\n  rollout_model: {engine_num: 2, base_port: 8100}\n",
            "run.yaml:8:3: explorer.proxy_port",
            "engine 1's OpenAI endpoint listens on 8101 (explorer.rollout_model.base_port=8100 + its number), where "
            "the proxy would listen",
            "hint: change explorer.proxy_port or explorer.rollout_model.base_port",
        ),
    ],
)
def test_a_bad_proxy_value_is_exit_2_where_it_is_written(validate, line, where, message, hint):
    result = validate(SERVE + line, "hardware=cpu")
    assert result.code == 2 and result.err.startswith("trinity: 1 problem in the config\n"), result.err
    assert f"error: {where}: " in result.err and message in result.err, result.err
    assert hint in result.err and "Traceback" not in result.err


def test_the_proxys_keys_outside_serve_mode_change_nothing_and_say_so(validate):
    result = validate("explorer:\n  proxy_port: 9000\n  db_url: sqlite:///h.db\n", "hardware=cpu")
    assert result.code == 0, result.err
    assert (
        "note: run.yaml:4:3: explorer.proxy_port: changes nothing: only serve mode runs the proxy in front of the "
        "engines\n    hint: remove explorer.proxy_port, or set mode: serve" in result.err
    )
    assert "run.yaml:5:3: explorer.db_url: changes nothing" in result.err
