"""verl's fused forward made to keep the rows asked for: at the kept positions the same log-probs, entropy and
gradients as verl's fused forward over every row; a few rows as plain logits, more fused; any other call verl's own."""

import pytest

torch = pytest.importorskip("torch")


def tiny_config():
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
    )


@pytest.fixture
def fused_model():
    """A tiny Qwen2 of a class of its own (verl patches the class's forward), with verl's fused forward (torch)."""
    from transformers import Qwen2ForCausalLM
    from verl.models.transformers.monkey_patch import patch_forward_with_backends

    class Tiny(Qwen2ForCausalLM):
        pass

    torch.manual_seed(0)
    model = Tiny(tiny_config())
    patch_forward_with_backends(model, use_fused_kernels=True, fused_kernels_backend="torch")
    return model


INPUT_IDS = torch.tensor([[1, 5, 7, 2, 9, 3, 4, 8, 6, 11]])
KEPT = torch.tensor([2, 3, 4, 7, 8])


def kept_log_probs(model, keep: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """The kept positions' log-probs and entropy (of every position's, where `keep` is None) and the gradients of
    their log-probs' sum plus their entropy's."""
    model.zero_grad()
    inputs = {"input_ids": INPUT_IDS, "position_ids": torch.arange(10)[None], "return_dict": True, "temperature": 0.7}
    if keep is None:
        out = model(**inputs)
        log_probs, entropy = out.log_probs[0, KEPT], out.entropy[0, KEPT]
    else:
        out = model(**inputs, logits_to_keep=keep)
        log_probs, entropy = _from(out, KEPT)
    (log_probs.sum() + entropy.sum()).backward()
    return log_probs.detach(), entropy.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _from(out, kept: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if out.logits is None:
        return out.log_probs[0], out.entropy[0]
    logits = out.logits[0] / 0.7
    labels = torch.roll(INPUT_IDS, -1, -1)[0, kept]
    log_probs = logits.log_softmax(-1)
    return log_probs.gather(-1, labels[:, None])[:, 0], -(log_probs.exp() * log_probs).sum(-1)


@pytest.mark.parametrize("chunk", [None, 2], ids=["plain", "fused"])
def test_the_kept_rows_log_probs_entropy_and_gradients_are_verls(fused_model, monkeypatch, chunk):
    from trinity.runtime.verl import fused_rows

    whole = kept_log_probs(fused_model, None)
    fused_rows.keep_rows(fused_model)
    if chunk:  # more rows than a chunk: verl's fused kernel on them
        monkeypatch.setattr(fused_rows, "CHUNK_ROWS", chunk)
    out = fused_model(input_ids=INPUT_IDS, logits_to_keep=KEPT, return_dict=True, temperature=0.7)
    assert (out.logits is None) == bool(chunk)
    assert (out.logits if out.logits is not None else out.log_probs).shape[:2] == (1, len(KEPT))
    if out.logits is not None:
        assert out.logits.dtype == torch.float32
    kept = kept_log_probs(fused_model, KEPT)
    torch.testing.assert_close(kept[0], whole[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(kept[1], whole[1], atol=1e-6, rtol=1e-5)
    for name, grad in whole[2].items():
        torch.testing.assert_close(kept[2][name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_a_call_keeping_no_rows_is_verls_own_and_positional_inputs_are_named_as_verl_names_them(fused_model):
    from trinity.runtime.verl import fused_rows

    before = fused_model(input_ids=INPUT_IDS, return_dict=True).log_probs
    fused_rows.keep_rows(fused_model)
    assert fused_rows.keeps_rows(type(fused_model).forward)
    torch.testing.assert_close(fused_model(input_ids=INPUT_IDS, return_dict=True).log_probs, before)
    positional = fused_model(INPUT_IDS, logits_to_keep=KEPT, return_dict=True)
    torch.testing.assert_close(positional.logits, fused_model(input_ids=INPUT_IDS, logits_to_keep=KEPT).logits)


def test_only_verls_fused_forward_is_replaced():
    from transformers import Qwen2ForCausalLM

    from trinity.runtime.verl import fused_rows

    class Plain(Qwen2ForCausalLM):
        pass

    model = Plain(tiny_config())
    fused_rows.keep_rows(model)
    assert type(model).forward is Qwen2ForCausalLM.forward
    assert not fused_rows.keeps_rows(type(model).forward)
