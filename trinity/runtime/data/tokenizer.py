"""The explorer's tokenizer: prompts are encoded by the `tokenizers` backend of the engine's own Hugging Face tokenizer
(its exact state, `backend_tokenizer.to_str()`), so a run whose prompts are plain text never imports transformers in
the explorer: transformers 5 imports torch with its tokenizers, ~390 MiB of the process. Everything else a workflow
may ask of a tokenizer (a chat template, decode, special tokens) loads Hugging Face's on first use, once."""

import threading
from typing import Any


class Tokenizer:
    """`encode` by the backend; any other attribute is Hugging Face's tokenizer's (loaded on first use)."""

    def __init__(self, model_path: str, trust_remote_code: bool, backend: dict | None) -> None:
        self._path, self._remote = model_path, trust_remote_code
        self._backend = _backend(backend) if backend is not None else None
        self._hf: Any = None
        self._loading = threading.Lock()  # workflows run in threads: the first to need it loads it

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`, as Hugging Face's `encode` gives them."""
        if self._backend is None:
            return self.hf.encode(text, add_special_tokens=add_special_tokens)
        return self._backend.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.hf(*args, **kwargs)

    def __len__(self) -> int:
        return len(self.hf)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not set yet (unpickling, a half-built instance): never load for these
            raise AttributeError(name)
        return getattr(self.hf, name)

    @property
    def hf(self) -> Any:
        """Hugging Face's tokenizer of the model."""
        with self._loading:
            if self._hf is None:
                from transformers import AutoTokenizer

                self._hf = AutoTokenizer.from_pretrained(self._path, trust_remote_code=self._remote)
        return self._hf


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
    return {"json": backend.to_str(), "split_special_tokens": bool(getattr(tokenizer, "split_special_tokens", False))}


def _backend(spec: dict) -> Any:
    from tokenizers import Tokenizer as Backend

    backend = Backend.from_str(spec["json"])
    backend.no_truncation()  # as Hugging Face's call without truncation or padding sets it
    backend.no_padding()
    backend.encode_special_tokens = spec["split_special_tokens"]
    return backend
