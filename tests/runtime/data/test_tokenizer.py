"""The explorer's tokenizer encodes as the engine's Hugging Face tokenizer does, from that tokenizer's own backend, and
holds no transformers (so no torch) until something other than encoding is asked of it."""

import json
import pickle
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.roles.test_imports import loaded_after
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
    # saved in the backend's JSON, undone by Hugging Face at each call without truncation or padding
    variant.backend_tokenizer.enable_truncation(3)
    variant.backend_tokenizer.enable_padding(length=30, pad_id=variant.pad_token_id)
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


def test_other_calls_of_encode_are_hugging_faces(tokenizers, demo_assets):
    hf = tokenizers["plain"]
    ours = Tokenizer(str(demo_assets / "model"), False, backend_of(hf))
    assert ours.encode("12", "3=") == hf.encode("12", "3=")  # a text pair
    assert ours.encode("12", "3=", False) == hf.encode("12", "3=", False)  # and add_special_tokens by position
    assert ours.encode("12+34=", truncation=True, max_length=2) == hf.encode("12+34=", truncation=True, max_length=2)
    assert ours.encode(["1", "2"], is_split_into_words=True) == hf.encode(["1", "2"], is_split_into_words=True)


def test_it_pickles_as_what_it_was_made_of(tokenizers, demo_assets):
    ours = Tokenizer(str(demo_assets / "model"), False, backend_of(tokenizers["variant"]))
    ours.hf  # noqa: B018 (its lock and Hugging Face's tokenizer do not travel)
    copy = pickle.loads(pickle.dumps(ours))
    assert copy.encode("1<eos>2", add_special_tokens=True) == tokenizers["variant"].encode("1<eos>2")


def test_a_tokenizer_whose_code_fails_with_an_attribute_error_says_so_once(demo_assets, tmp_path):
    """Raised while loading inside a property, an AttributeError would be taken for a missing attribute (and asked of
    Hugging Face's tokenizer again, and again)."""
    for name in ("tokenizer.json", "config.json"):
        (tmp_path / name).write_bytes((demo_assets / "model" / name).read_bytes())
    (tmp_path / "broken.py").write_text(
        "from transformers import PreTrainedTokenizerFast\n\n\nclass Broken(PreTrainedTokenizerFast):\n"
        "    def __init__(self, *args, **kwargs):\n        raise AttributeError('no vocab_files_names here')\n"
    )
    config = {"tokenizer_class": "Broken", "auto_map": {"AutoTokenizer": [None, "broken.Broken"]}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    ours = Tokenizer(str(tmp_path), True, None)
    with pytest.raises(RuntimeError, match=r"loading the tokenizer of .*: AttributeError\('no vocab_files_names here'"):
        ours.eos_token_id  # noqa: B018


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
