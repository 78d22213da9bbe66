"""Log-probs a block of rows per call: verl's values and gradients, whatever the dtype and however the rows split into
blocks; verl's own call where it uses a kernel."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("row_elements", [1, 40, 1 << 24], ids=["a row a call", "two rows a call", "every row"])
@pytest.mark.parametrize("shape", [(7,), (1, 7), (3, 5)], ids=["rows", "one packed row", "padded rows"])
def test_the_log_probs_and_their_gradients_are_verls_row_by_row_ones(monkeypatch, dtype, row_elements, shape):
    """Bit for bit (verl's fp32 and fp64 way is the logsumexp, its narrower one the log-softmax), in blocks of at
    most ROW_ELEMENTS logits whatever the shape."""
    from verl.utils.torch_functional import logprobs_from_logits_v2

    from trinity.runtime.verl import log_probs

    monkeypatch.setattr(log_probs, "ROW_ELEMENTS", row_elements)
    monkeypatch.setattr(log_probs, "_verl_uses_a_kernel", lambda: False)  # this machine's case, pinned
    blocks = []
    block = log_probs._block
    monkeypatch.setattr(log_probs, "_block", lambda part, at: blocks.append(part.numel()) or block(part, at))
    torch.manual_seed(0)
    logits = (torch.randn(*shape, 20) * 4).to(dtype).requires_grad_()
    labels = torch.randint(20, shape)
    ours = log_probs.log_probs(logits, labels)
    verls = (
        logprobs_from_logits_v2(logits, labels)
        if len(shape) == 1
        else torch.stack([logprobs_from_logits_v2(row, at) for row, at in zip(logits, labels)])
    )  # verl's engine hands it rows x vocabulary; higher dimensions, row by row
    assert ours.dtype == verls.dtype and ours.shape == shape and torch.equal(ours, verls)
    assert max(blocks) <= max(row_elements, 20)  # a row at least
    (mine,) = torch.autograd.grad(ours.sum(), logits)
    (theirs,) = torch.autograd.grad(verls.sum(), logits)
    assert torch.equal(mine, theirs)


def test_where_verl_uses_a_kernel_it_is_verls_own_call(monkeypatch):
    import verl.utils.torch_functional as verl_F

    from trinity.runtime.verl import log_probs

    calls = []
    monkeypatch.setattr(verl_F, "NPU_CROSS_ENTROPY_LOSS_AVAILABLE", True)  # torch_npu's kernel, which cannot be here
    monkeypatch.setattr(verl_F, "logprobs_from_logits", lambda *a, **k: calls.append((a, k)) or "verl's")
    assert log_probs.log_probs(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), inplace_backward=False) == "verl's"
    assert calls[0][1] == {"inplace_backward": False}


def test_flash_attn_cross_entropy_is_verls_unless_verl_is_told_not_to(monkeypatch):
    import verl.utils.torch_functional as verl_F

    from trinity.runtime.verl import log_probs

    monkeypatch.setattr(verl_F, "NPU_CROSS_ENTROPY_LOSS_AVAILABLE", False)
    monkeypatch.setattr(verl_F, "FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE", True)  # flash-attn's kernel: not here
    monkeypatch.delenv("VERL_DISABLE_FLASH_ATTN_CE", raising=False)
    assert log_probs._verl_uses_a_kernel()
    monkeypatch.setenv("VERL_DISABLE_FLASH_ATTN_CE", "1")
    assert not log_probs._verl_uses_a_kernel()
    monkeypatch.setattr(verl_F, "FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE", False)
    monkeypatch.delenv("VERL_DISABLE_FLASH_ATTN_CE")
    assert not log_probs._verl_uses_a_kernel()
