"""The site the corpus configs of this folder are validated and run on, as a user's site without a network would be:
huggingface_hub's cache (`HF_HOME`, `HF_HUB_OFFLINE=1`) holding every hub name they give, and the local data
folders they name, relative to the working directory they are run from.

Two caches: `validation_site` holds each model's real config.json (its shape, no weights: the memory check is the
real one) and each data set's card with its real subsets, splits and columns (a row or two); `run_cache` holds tiny
stand-ins under the same names, which `trinity run` trains on the CPU (tests/upstream_examples/test_corpus_runs.py).
"""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CONFIGS = sorted(HERE.glob("*.yaml"))


def plant(cache: Path, repo_type: str, repo_id: str, files: dict[str, bytes | str]) -> Path:
    """A repo at one commit in huggingface_hub's cache layout (`<type>s--<org>--<name>/refs/main`,
    `snapshots/<commit>/...`); returns the snapshot folder."""
    data = {path: body.encode() if isinstance(body, str) else body for path, body in files.items()}
    commit = hashlib.sha1(repr(sorted((p, hashlib.sha1(b).hexdigest()) for p, b in data.items())).encode()).hexdigest()
    storage = cache / "--".join((f"{repo_type}s", *repo_id.split("/")))
    snapshot = storage / "snapshots" / commit
    for path, body in data.items():
        (snapshot / path).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / path).write_bytes(body)
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    return snapshot


def jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def card(*subsets: dict) -> str:
    """A data set card whose front matter lists its subsets (`configs:`), as the hub's cards do."""
    return "---\n" + json.dumps({"configs": list(subsets)}) + "\n---\n"


def _qwen2(hidden, intermediate, layers, heads, kv_heads, vocab, tied, positions=32768, window=131072) -> dict:
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "vocab_size": vocab,
        "max_position_embeddings": positions,
        "sliding_window": window,
        "tie_word_embeddings": tied,
        "torch_dtype": "bfloat16",
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-06,
        "hidden_act": "silu",
        "bos_token_id": 151643,
        "eos_token_id": 151645,
    }


# The models the configs name, with the shapes of their config.json on the hub.
MODELS = {
    "Qwen/Qwen2.5-1.5B-Instruct": _qwen2(1536, 8960, 28, 12, 2, 151936, True),
    "Qwen/Qwen2.5-3B-Instruct": _qwen2(2048, 11008, 36, 16, 2, 151936, True),
    "Qwen/Qwen2.5-7B-Instruct": _qwen2(3584, 18944, 28, 28, 4, 152064, False),
    "Qwen/Qwen3-1.7B": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "rope_theta": 1000000,
        "rms_norm_eps": 1e-06,
        "hidden_act": "silu",
        "bos_token_id": 151643,
        "eos_token_id": 151645,
    },
}
DAPO_ROW = {
    "data_source": "math_dapo",
    "prompt": "What is 1+1?",
    "solution": "2",
    "ability": "MATH",
    "reward_model": {"ground_truth": "2", "style": "rule-lighteval/MATH_v2"},
    "extra_info": {"index": "0"},
    "source_prompt": [{"role": "user", "content": "What is 1+1?"}],
}
# The data sets the configs name, each in its repo's layout: subsets and splits as its card or its file names give
# them, one row with its real columns.
DATASETS = {
    "openai/gsm8k": {
        "README.md": card(
            {"config_name": "main", "data_files": [{"split": s, "path": f"main/{s}-*"} for s in ("train", "test")]},
            {
                "config_name": "socratic",
                "data_files": [{"split": s, "path": f"socratic/{s}-*"} for s in ("train", "test")],
            },
        ),
        **{
            f"{subset}/{split}-00000-of-00001.jsonl": jsonl({"question": "What is 1+1?", "answer": "1+1=2\n#### 2"})
            for subset in ("main", "socratic")
            for split in ("train", "test")
        },
    },
    "open-r1/DAPO-Math-17k-Processed": {
        "README.md": card(
            *(
                {"config_name": subset, "data_files": [{"split": "train", "path": f"{subset}/train-*"}]}
                for subset in ("all", "cn", "en")
            )
        ),
        **{f"{subset}/train-00000-of-00001.jsonl": jsonl(DAPO_ROW) for subset in ("all", "cn", "en")},
    },
    "HuggingFaceH4/aime_2024": {
        "data/train-00000-of-00001.jsonl": jsonl(
            {"id": 60, "problem": "What is 1+1?", "solution": "1+1=2", "answer": "2", "url": "u", "year": "2024"}
        )
    },
    "math-ai/amc23": {"test.jsonl": jsonl({"id": 0, "question": "What is 1+1?", "answer": 2.0, "url": "u"})},
    "math-ai/aime25": {"test.jsonl": jsonl({"problem": "What is 1+1?", "answer": "2", "id": "0"})},
}
# Local data the configs name relative to the working directory, as their users prepare it (one row each).
LOCAL_DATA = {
    "examples/grpo_alfworld/alfworld_data": {
        f"{split}.jsonl": jsonl({"game_file": f"json_2.1.1/{split}/pick_and_place_simple-1/trial_1/game.tw-pddl"})
        for split in ("train", "test")
    },
    "examples/grpo_intercode_sql/intercode_sql_data": {
        "train.jsonl": jsonl({"query_idx": 0}),
        "test.jsonl": jsonl({"query_idx": 1}),
        "raw/ic_spider_dev.json": json.dumps([{"query": "SELECT 1", "db": "concert_singer", "extra": {}}]),
    },
    "placeholder": {"train.jsonl": jsonl({"prompt": "What is 1+1?", "response": "2"})},
    "data/dapo-validation": {"test.jsonl": jsonl({"question": "What is 1+1?", "ground_truth": "2"})},
    "data/dapo-math": {"train.jsonl": jsonl({"question": "What is 1+1?", "ground_truth": "2"})},
    "data/frozenlake": {
        f"{split}.jsonl": jsonl({"size": 4, "p": 0.8, "seed": seed}) for split, seed in (("train", 0), ("test", 1))
    },
    "alfworld": {"json_2.1.1/train/pick_and_place_simple-1/trial_1/game.tw-pddl": "{}"},
    "checkpoints": {},
}


def plant_local(folder: Path) -> None:
    for name, files in LOCAL_DATA.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        for path, body in files.items():
            (folder / name / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / name / path).write_text(body)


@pytest.fixture(scope="session")
def validation_site(tmp_path_factory) -> Path:
    """A working folder with the configs' local data, and its hub cache (`hf/hub`) holding every name they give."""
    site = tmp_path_factory.mktemp("site")
    for name, config in MODELS.items():
        plant(site / "hf" / "hub", "model", name, {"config.json": json.dumps(config, indent=2)})
    for name, files in DATASETS.items():
        plant(site / "hf" / "hub", "dataset", name, files)
    plant_local(site)
    (site / "models" / "Qwen2.5-3B-Instruct").mkdir(parents=True)  # a model the user downloaded: its config.json
    (site / "models" / "Qwen2.5-3B-Instruct" / "config.json").write_text(json.dumps(MODELS["Qwen/Qwen2.5-3B-Instruct"]))
    yield site
    shutil.rmtree(site, ignore_errors=True)


# The stand-ins' chat templates: each message's text as it is (the demo's model knows digits, + and = only), and role
# by role for the character model.
PLAIN_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
ROLE_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def model_files(folder: Path, chat_template: str) -> dict[str, bytes]:
    """A model folder's files, its tokenizer given a chat template as the hub's instruct models have one."""
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    tokenizer = json.loads(files["tokenizer_config.json"]) | {"chat_template": chat_template}
    return files | {"tokenizer_config.json": json.dumps(tokenizer).encode()}


def gsm8k_row(row: dict) -> dict:
    """A demo problem in GSM8K's columns: the question, and the worked answer ending in `#### <answer>`."""
    return {"question": row["prompt"], "answer": f"{row['prompt']}{row['response']}\n#### {row['response']}"}


@pytest.fixture(scope="session")
def run_cache(demo_assets, tmp_path_factory) -> Path:
    """An HF_HOME whose hub cache holds tiny stand-ins under the hub names the run configs give: the demo's model (32
    positions, a character vocabulary of digits, + and =) as Qwen/Qwen2.5-1.5B-Instruct; a character model of printable
    ASCII with 8192 positions (the ALFWorld and FrozenLake prompts are a few thousand characters) as Qwen/Qwen3-1.7B
    and Qwen/Qwen2.5-3B-Instruct; four training and two test problems of the demo's in GSM8K's layout and columns as
    openai/gsm8k."""
    from tests.runtime.workflows.scripted import char_tokenizer
    from trinity.demo import MODEL_SHAPE, save_model

    home = tmp_path_factory.mktemp("runhf")
    hub = home / "hub"
    plant(hub, "model", "Qwen/Qwen2.5-1.5B-Instruct", model_files(demo_assets / "model", PLAIN_TEMPLATE))
    chars = home / "chars"
    save_model(chars, char_tokenizer(), MODEL_SHAPE | {"max_position_embeddings": 8192}, seed=0)
    for name in ("Qwen/Qwen3-1.7B", "Qwen/Qwen2.5-3B-Instruct"):
        plant(hub, "model", name, model_files(chars, ROLE_TEMPLATE))
    rows = [json.loads(line) for line in (demo_assets / "data" / "test.jsonl").read_text().splitlines()[:6]]
    main = {"train": rows[:4], "test": rows[4:]}
    plant(
        hub,
        "dataset",
        "openai/gsm8k",
        {
            "README.md": card(
                {"config_name": "main", "data_files": [{"split": s, "path": f"main/{s}-*"} for s in ("train", "test")]}
            ),
            **{f"main/{s}-00000-of-00001.jsonl": jsonl(*map(gsm8k_row, main[s])) for s in main},
        },
    )
    yield home
    shutil.rmtree(home, ignore_errors=True)
