"""The explorer's tokenizer: prompts are encoded by the `tokenizers` backend of the Hugging Face tokenizer the engine
loads (saved with `backend_tokenizer.to_str()`; the settings Hugging Face applies at each call, such as splitting
special tokens and no truncation, set again), so a run whose prompts are plain text never imports transformers in the
explorer: transformers 5 imports torch with its tokenizers, ~390 MiB of the process. Everything else a workflow may
ask of a tokenizer (a chat template, decode, special tokens) loads Hugging Face's on first use, once."""

import threading
from typing import Any


class Tokenizer:
    """`encode` of a text by the backend; anything else is Hugging Face's tokenizer's (loaded on first use)."""

    def __init__(self, model_path: str, trust_remote_code: bool, backend: dict | None) -> None:
        self._path, self._remote, self._spec = model_path, trust_remote_code, backend
        self._backend = _backend(backend) if backend is not None else None
        self._hf: Any = None
        self._loading = threading.Lock()  # workflows run in threads: the first to need it loads it

    def encode(self, text: Any, *args: Any, **kwargs: Any) -> list[int]:
        """Token ids of `text`, as Hugging Face's `encode` gives them (which takes any other call as it is)."""
        if self._backend is None or args or set(kwargs) - {"add_special_tokens"} or not isinstance(text, str):
            return self.hf.encode(text, *args, **kwargs)
        return self._backend.encode(text, add_special_tokens=kwargs.get("add_special_tokens", True)).ids

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.hf(*args, **kwargs)

    def __len__(self) -> int:
        return len(self.hf)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "hf":  # not set yet, or `hf` failing: never load (or recurse) for these
            raise AttributeError(name)
        return getattr(self.hf, name)

    def __reduce__(self) -> tuple:
        return Tokenizer, (self._path, self._remote, self._spec)

    @property
    def hf(self) -> Any:
        """Hugging Face's tokenizer of the model."""
        if self._hf is None:
            with self._loading:
                if self._hf is None:
                    self._hf = _load(self._path, self._remote)
        return self._hf


def _load(path: str, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except AttributeError as exc:  # raised inside a property, it would be taken for a missing attribute
        raise RuntimeError(f"loading the tokenizer of {path}: {exc!r}") from exc


# Where Hugging Face's encoding path is generic: a tokenizer class that overrides a step of it (CodeLlama's infilling,
# a model's own code) may change the text or the ids around the backend's call.
GENERIC = ("transformers.tokenization_utils_base", "transformers.tokenization_utils_tokenizers")
ENCODING_PATH = ("__call__", "encode", "_encode_plus")


def backend_of(tokenizer: Any) -> dict | None:
    """What `Tokenizer` encodes with, taken from a Hugging Face tokenizer: its backend's JSON and whether it splits
    special tokens written in the text (a setting Hugging Face applies at each call); None for a tokenizer without a
    `tokenizers` backend, or whose class encodes its own way (the explorer then loads Hugging Face's)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or any(getattr(type(tokenizer), f).__module__ not in GENERIC for f in ENCODING_PATH):
        return None
    try:
        saved = backend.to_str()
    except Exception:  # a component written in Python (a custom pre-tokenizer) cannot be saved
        return None
    return {"json": saved, "split_special_tokens": bool(getattr(tokenizer, "split_special_tokens", False))}


def _backend(spec: dict) -> Any:
    from tokenizers import Tokenizer as Backend

    backend = Backend.from_str(spec["json"])
    backend.no_truncation()  # as Hugging Face's call without truncation or padding sets it
    backend.no_padding()
    backend.encode_special_tokens = spec["split_special_tokens"]
    return backend
