"""The explorer's tokenizer encodes as the engine's Hugging Face tokenizer does, from that tokenizer's own backend, and
holds no transformers (so no torch) until something other than encoding is asked of it."""

import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.test_role_imports import loaded_after
from trinity.runtime.data.tokenizer import Tokenizer, backend_of

# the demo's characters, its special tokens written out, and characters its vocabulary lacks
TEXT = st.lists(st.sampled_from([*"0123456789+= ", "<eos>", "<pad>", "<unk>", "x", "é", "\n"]), max_size=24).map(
    "".join
)


@pytest.fixture(scope="module")
def tokenizers(demo_assets, tmp_path_factory):
    """Hugging Face tokenizers of the demo: as saved, and one that adds a begin-of-sequence token and splits special
    tokens written in the text (both settings the backend must carry over)."""
    from tokenizers import processors
    from transformers import AutoTokenizer

    plain = AutoTokenizer.from_pretrained(demo_assets / "model")
    variant = AutoTokenizer.from_pretrained(demo_assets / "model", split_special_tokens=True)
    variant.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<pad> $A", special_tokens=[("<pad>", variant.pad_token_id)]
    )
    return {"plain": plain, "variant": variant}


@settings(max_examples=200, deadline=None)
@given(text=TEXT, special=st.booleans(), which=st.sampled_from(["plain", "variant"]))
def test_encoding_equals_hugging_faces(tokenizers, demo_assets, text, special, which):
    hf = tokenizers[which]
    ours = Tokenizer(str(demo_assets / "model"), False, backend_of(hf))
    assert ours.encode(text, add_special_tokens=special) == hf.encode(text, add_special_tokens=special)


def test_the_variant_differs_from_the_saved_tokenizer(tokenizers):
    """What the property test compares would not tell the two settings apart if neither changed the ids."""
    plain, variant = tokenizers["plain"], tokenizers["variant"]
    assert plain.encode("1<eos>", add_special_tokens=True) == [plain.convert_tokens_to_ids("1"), plain.eos_token_id]
    assert variant.encode("1<eos>", add_special_tokens=True)[0] == variant.pad_token_id
    assert variant.encode("1<eos>", add_special_tokens=False) != plain.encode("1<eos>", add_special_tokens=False)


def test_encoding_imports_no_transformers_and_anything_else_loads_it(tokenizers, demo_assets, tmp_path):
    spec = tmp_path / "backend.json"
    spec.write_text(json.dumps(backend_of(tokenizers["plain"])))
    make = (
        "import json; from trinity.runtime.data.tokenizer import Tokenizer; "
        f"t = Tokenizer({str(demo_assets / 'model')!r}, False, json.loads(open({str(spec)!r}).read())); "
        "assert t.encode('12+3=', add_special_tokens=False) == " + repr(tokenizers["plain"].encode("12+3="))
    )
    assert loaded_after(make) == []
    assert loaded_after(make + "; assert t.eos_token_id == " + repr(tokenizers["plain"].eos_token_id)) == [
        "torch",
        "transformers",
    ]


def test_without_a_backend_hugging_faces_tokenizer_encodes(tokenizers, demo_assets):
    ours = Tokenizer(str(demo_assets / "model"), False, None)
    assert ours.encode("12+3=", add_special_tokens=False) == tokenizers["plain"].encode("12+3=")
    assert ours("12+3=")["input_ids"] == tokenizers["plain"]("12+3=")["input_ids"] and len(ours) == len(
        tokenizers["plain"]
    )


def test_workflow_threads_asking_at_once_load_hugging_faces_tokenizer_once(demo_assets):
    ours = Tokenizer(str(demo_assets / "model"), False, None)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(ours.hf)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and all(hf is seen[0] for hf in seen)


def test_a_tokenizer_without_a_tokenizers_backend_or_with_its_own_encoding_has_no_spec(tokenizers):
    assert backend_of(object()) is None

    class Infilling(type(tokenizers["plain"])):  # as CodeLlama's: text around the backend's call
        def _encode_plus(self, text, *args, **kwargs):
            return super()._encode_plus(text.replace("<FILL>", ""), *args, **kwargs)

    own = Infilling.from_pretrained(tokenizers["plain"].name_or_path)
    assert backend_of(tokenizers["plain"]) is not None and backend_of(own) is None
