"""`trinity config validate` with models and data sets named by hub id, against a hub stand-in on loopback through the
real huggingface_hub client: a name in the cache is fine offline; offline and not cached, a missing repo, a gated one,
a missing revision, subset or split are exit 2 at the key that names them; a hub out of reach is a warning."""

import json

import pytest

from tests.conftest import REFERENCE
from tests.hub_standin import gsm8k_like

ROWS = [{"question": f"{i}+{i}?", "answer": f"#### {2 * i}"} for i in range(4)]
QWEN = "Qwen/Qwen2.5-1.5B-Instruct"
QWEN_CONFIG = {"model_type": "qwen2", "hidden_size": 1536, "num_hidden_layers": 28, "vocab_size": 151936}


def publish_rfc(hub, model=True):
    """What the RFC's config names, on the stand-in: openai/gsm8k (gsm8k's layout) and, unless not, the model."""
    hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]))
    if model:
        hub.publish("model", QWEN, {"config.json": json.dumps(QWEN_CONFIG).encode()})


def into_cache(hub, repo_id, repo_type="dataset"):
    """The repo downloaded into the test's hub cache as `hf download` would: by huggingface_hub itself."""
    import os

    from huggingface_hub import snapshot_download

    cache = os.path.join(os.environ["HF_HOME"], "hub")
    return snapshot_download(repo_id, repo_type=repo_type, cache_dir=cache, endpoint=hub.url)


@pytest.mark.parametrize("profile, warnings", [("a100", 0), ("ascend910b", 1)])  # ascend910b: sync_method: nccl
def test_the_rfc_config_validates_unchanged_offline_with_gsm8k_in_the_cache(cli, hub, monkeypatch, profile, warnings):
    publish_rfc(hub, model=False)
    into_cache(hub, "openai/gsm8k")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    asked = len(hub.requests)
    result = cli("config", "validate", "-c", REFERENCE, f"hardware={profile}")
    assert result.code == 0, result.err
    assert result.out.startswith(f"valid for {profile}") and f"{warnings} warning(s)" in result.out
    # only run reads the model: validate notes it, as it checks no local model folder either
    assert f"note: {REFERENCE}:13:3: model.model_path: '{QWEN}' is not in the hub cache" in result.err
    assert len(hub.requests) == asked  # offline: the hub is not asked


def test_offline_and_not_cached_is_exit_2_naming_the_name_the_variable_and_the_cache(cli, hub, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = cli("config", "validate", "-c", REFERENCE, "hardware=a100")
    assert result.code == 2 and not hub.requests
    cache = tmp_path / "hf" / "hub"
    assert (
        "gsm8k.yaml:26:7: buffer.explorer_input.taskset.path: 'openai/gsm8k' is not in the hub cache "
        f"({cache}) and HF_HUB_OFFLINE is set: trinity cannot download it" in result.err
    )
    assert "`hf download openai/gsm8k --repo-type dataset`" in result.err
    assert "gsm8k.yaml:37:7: buffer.explorer_input.eval_tasksets[0].path" in result.err


def test_online_the_hub_is_asked_once_per_name_and_the_config_is_valid(cli, hub):
    publish_rfc(hub)
    result = cli("config", "validate", "-c", REFERENCE, "hardware=a100")
    assert result.code == 0 and "0 warning(s)" in result.out, result.err
    asked = [path for method, path, _ in hub.requests if path.startswith("/api/")]
    assert sorted(asked) == ["/api/datasets/openai/gsm8k/revision/main", f"/api/models/{QWEN}/revision/main"]


def test_a_name_the_hub_does_not_have_is_exit_2_at_its_key(cli, hub, write):
    publish_rfc(hub)
    text = REFERENCE.read_text().replace("openai/gsm8k}", "openai/gsm8kk}", 1)
    result = cli("config", "validate", "-c", write("rfc.yaml", text), "hardware=a100")
    assert result.code == 2
    assert (
        f"rfc.yaml:26:7: buffer.explorer_input.taskset.path: 'openai/gsm8kk' is neither a path on this machine nor a "
        f"data set on {hub.url}" in result.err
    )
    assert "a private repo needs HF_TOKEN" in result.err and "eval_tasksets" not in result.err


def test_a_gated_model_asks_for_a_token_and_the_token_is_never_shown(cli, hub, monkeypatch):
    hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]))
    hub.publish("model", QWEN, {"config.json": b"{}"}, gated=True, granted=frozenset({"hf_granted_token"}))
    result = cli("config", "validate", "-c", REFERENCE, "hardware=a100")
    assert result.code == 2
    assert f"model.model_path: '{QWEN}' is gated on {hub.url} and no token was sent (HF_TOKEN is not set)" in result.err
    assert "then set HF_TOKEN" in result.err
    monkeypatch.setenv("HF_TOKEN", "hf_refused_token")
    result = cli("config", "validate", "-c", REFERENCE, "hardware=a100")
    assert result.code == 2 and "the account of HF_TOKEN has no access to it (403" in result.err
    assert "hf_refused_token" not in result.err
    monkeypatch.setenv("HF_TOKEN", "hf_granted_token")
    result = cli("config", "validate", "-c", REFERENCE, "hardware=a100")
    assert result.code == 0 and "hf_granted_token" not in result.out + result.err


@pytest.mark.parametrize("cached", [False, True])
def test_a_subset_or_split_the_data_set_lacks_is_exit_2_at_that_key(cli, hub, monkeypatch, write, cached):
    publish_rfc(hub)
    if cached:  # read from the cached card and files, offline
        into_cache(hub, "openai/gsm8k")
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    text = REFERENCE.read_text().replace("subset_name: 'main'", "subset_name: 'mian'", 1)
    result = cli(
        "config",
        "validate",
        "-c",
        write("rfc.yaml", text),
        "hardware=a100",
        "buffer.explorer_input.eval_tasksets.0.split=dev",
    )
    assert result.code == 2
    assert (
        "rfc.yaml:27:7: buffer.explorer_input.taskset.subset_name: openai/gsm8k: no subset 'mian'; its card names "
        "main, socratic" in result.err
    )
    assert (
        "override 'buffer.explorer_input.eval_tasksets.0.split=dev': buffer.explorer_input.eval_tasksets[0].split: "
        "openai/gsm8k: no split 'dev' of subset 'main'; its card's splits: train, test" in result.err
    )


def test_a_revision_the_repo_lacks_and_a_pinned_one(cli, hub):
    publish_rfc(hub)
    hub.publish("dataset", "openai/gsm8k", gsm8k_like(ROWS, ROWS[:1]), revision="v1")
    ok = cli(
        "config", "validate", "-c", REFERENCE, "hardware=a100", "buffer.explorer_input.taskset.path=openai/gsm8k@v1"
    )
    assert ok.code == 0, ok.err
    bad = cli(
        "config", "validate", "-c", REFERENCE, "hardware=a100", "buffer.explorer_input.taskset.path=openai/gsm8k@v9"
    )
    assert bad.code == 2 and f"'openai/gsm8k' has no revision 'v9' on {hub.url}" in bad.err


def test_a_hub_out_of_reach_is_one_warning_and_validate_goes_on(cli, online):
    # online, an empty hub cache, HF_ENDPOINT a closed port (tests/conftest.py)
    result = cli("config", "validate", "-c", REFERENCE, "hardware=a100")
    assert result.code == 0 and "1 warning(s)" in result.out
    assert result.err.count("warning:") == 1
    assert "out of reach within 5 s (ConnectError" in result.err and f"{QWEN}, openai/gsm8k not checked" in result.err
    assert "set HF_HUB_OFFLINE=1" in result.err


@pytest.mark.timeout(60)
def test_a_hub_that_never_answers_is_a_warning_after_the_bound_not_a_hang(cli, hub):
    hub.hang()
    result = cli("config", "validate", "-c", REFERENCE, "hardware=a100")
    assert result.code == 0 and "out of reach within 5 s (ReadTimeout" in result.err


@pytest.mark.parametrize("switch", ["VLLM_USE_MODELSCOPE", "VERL_USE_MODELSCOPE"])
def test_a_model_asked_of_modelscope_is_refused_with_the_way_to_fetch_it(cli, monkeypatch, switch):
    """Trinity-RFT's users send model downloads to ModelScope with vLLM's or verl's switch; trinity fetches from the
    Hugging Face hub only, and says so instead of fetching the model from elsewhere than asked."""
    monkeypatch.setenv(switch, "True")
    result = cli("config", "validate", "-c", REFERENCE, "hardware=a100")
    assert result.code == 2
    assert f"model.model_path: {switch} is set, which sends model downloads to ModelScope" in result.err
    assert f"`modelscope download {QWEN} --local_dir models/Qwen2.5-1.5B-Instruct`" in result.err
    monkeypatch.setenv(switch, "0")
    assert cli("config", "validate", "-c", REFERENCE, "hardware=a100").code == 0


def test_render_and_dry_run_never_ask_the_hub(cli, hub):
    publish_rfc(hub)
    assert cli("config", "render", "-c", REFERENCE, "hardware=a100").code == 0
    assert cli("run", "-c", REFERENCE, "hardware=a100", "--dry-run").code == 0
    assert hub.repo_requests() == []
