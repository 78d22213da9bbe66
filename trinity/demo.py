"""The embedded demo's assets, built here with no download: a character tokenizer trained with
`tokenizers`, a tiny Qwen2 model from a config, and 2-digit addition problems with a held-out split.
`model-feedback/` is the same model with the feedback characters of the multi-turn example
(examples/arith_feedback) in its vocabulary; `model-tools/` and `data-tools/` are the tool-use example's
(examples/arith_tools): 3-term sums, and SFT conversations that answer most of them at once and call the
calculator for a few.

`trinity run` without --config builds them on first use under $TRINITY_DEMO_DIR (default
./trinity-demo) and then runs examples/arith/arith.yaml on them.
"""

import json
import os
import random
import sys
from pathlib import Path

DIR_ENV = "TRINITY_DEMO_DIR"
DEFAULT_DIR = "./trinity-demo"
HELD_OUT = 200  # problems never seen in SFT or GRPO
SPECIALS = ("<pad>", "<eos>", "<unk>")
FEEDBACK = "<>?"  # arith_feedback_workflow's replies: too low, too high, not a number
TOOL_CALL = "[]"  # the brackets tool-call format
TOOL_SHARE = 0.1  # of the tool example's SFT conversations, those that call the calculator
MODEL_SHAPE = dict(
    hidden_size=128,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=32,
)


def demo_dir() -> Path:
    """Where the demo's assets live: $TRINITY_DEMO_DIR, else ./trinity-demo."""
    return Path(os.environ.get(DIR_ENV) or DEFAULT_DIR)


def complete(folder: Path) -> bool:
    """Whether `folder` holds every asset (each part is published whole, so present means complete)."""
    parts = [folder / f"{m}/model.safetensors" for m in ("model", "model-feedback", "model-tools")]
    return all(p.exists() for p in parts) and all((folder / d / "test.jsonl").exists() for d in ("data", "data-tools"))


def ensure(folder: Path, seed: int = 0) -> bool:
    """Build the assets unless a complete set is there; returns whether it built them."""
    if complete(folder):
        return False
    build(folder, seed)
    return True


def problems(seed: int) -> tuple[list[dict], list[dict]]:
    """(train, held-out) rows of `a+b=` for a, b in 0..99; the answer is the response."""
    rows = [{"prompt": f"{a}+{b}=", "response": str(a + b)} for a in range(100) for b in range(100)]
    random.Random(seed).shuffle(rows)
    return rows[HELD_OUT:], rows[:HELD_OUT]


def tool_problems(seed: int, count: int = 20000) -> tuple[list[dict], list[dict]]:
    """(train, held-out) rows of `a+b+c=` for a, b, c in 10..99, drawn without repeats."""
    rng = random.Random(seed)
    seen: dict[tuple, None] = {}
    while len(seen) < count + HELD_OUT:
        seen[tuple(rng.randrange(10, 100) for _ in range(3))] = None
    rows = [{"prompt": f"{a}+{b}+{c}=", "response": str(a + b + c)} for a, b, c in seen]
    return rows[HELD_OUT:], rows[:HELD_OUT]


def tool_conversations(rows: list[dict], seed: int) -> list[dict]:
    """SFT conversations of the tool rows: a share TOOL_SHARE call the calculator (`[a+b+c]`, its result, the answer),
    the rest answer at once."""
    rng = random.Random(seed + 1)
    out = []
    for row in rows:
        user, answer = {"role": "user", "content": row["prompt"]}, {"role": "assistant", "content": row["response"]}
        if rng.random() < TOOL_SHARE:
            call = {"role": "assistant", "content": f"[{row['prompt'][:-1]}]"}
            out.append({"messages": [user, call, {"role": "tool", "content": row["response"]}, answer]})
        else:
            out.append({"messages": [user, answer]})
    return out


def build(folder: Path, seed: int = 0) -> None:
    """Write data/{train,test}.jsonl, data-tools/{train,test,sft}.jsonl, model/, model-feedback/ and model-tools/
    (tokenizer, config, weights), each folder published whole."""
    from .utils.atomic import publish_dir

    train, test = problems(seed)
    tool_train, tool_test = tool_problems(seed)
    folder.mkdir(parents=True, exist_ok=True)

    def data(sets: dict[str, list[dict]]):
        def write(tmp: Path) -> None:
            for name, rows in sets.items():
                (tmp / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

        return write

    tool_data = {"train": tool_train, "test": tool_test, "sft": tool_conversations(tool_train, seed)}
    parts = (
        ("data", data({"train": train, "test": test})),
        ("model", lambda tmp: _model(tmp, train, seed)),
        ("model-feedback", lambda tmp: _model(tmp, train, seed, FEEDBACK)),
        ("data-tools", data(tool_data)),
        ("model-tools", lambda tmp: _model(tmp, tool_train, seed, TOOL_CALL)),
    )
    for name, fill in parts:
        if not (folder / name).exists():
            publish_dir(fill, folder / name)


def _model(folder: Path, rows: list[dict], seed: int, extra: str = "") -> None:
    save_model(folder, _tokenizer(rows, extra), MODEL_SHAPE, seed)


def save_model(folder: Path, tokenizer, shape: dict, seed: int, vocab_size: int | None = None) -> None:
    """A Qwen2 of `shape` with tied embeddings and weights drawn from `seed`, saved with `tokenizer` in `folder`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer.save_pretrained(folder)
    config = Qwen2Config(
        vocab_size=vocab_size or len(tokenizer),
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **shape,
    )
    torch.manual_seed(seed)
    Qwen2ForCausalLM(config).save_pretrained(folder)


def _tokenizer(rows: list[dict], extra: str = ""):
    """One token per character, its vocabulary learned from the problems and `extra`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    raw.decoder = decoders.Fuse()
    raw.train_from_iterator(
        [*(r["prompt"] + r["response"] for r in rows), *([extra] if extra else [])],
        trainers.WordLevelTrainer(special_tokens=list(SPECIALS)),
    )
    return PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


if __name__ == "__main__":  # `trinity run` builds here: the build's torch would otherwise stay in its driver
    from transformers.utils.logging import disable_progress_bar

    disable_progress_bar()  # a bar per model saved, in the middle of `trinity run`'s output
    ensure(Path(sys.argv[1]))
