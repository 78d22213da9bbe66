"""verl's fused forward made to keep the rows asked for: at the kept positions the same log-probs, entropy and
gradients as verl's fused forward over every row, packed or padded, with the engine's labels; at most a chunk of rows
as plain logits (divided by the temperature as the kernel divides), more fused; any other call verl's own, except on
an lm_head FSDP2 shards on its own, read through its module (an SFT update there is the unfused one)."""

import shutil

import pytest

torch = pytest.importorskip("torch")

TEMPERATURE = 0.7


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


# packed: one row of every token, the positions kept; padded: three left-padded rows, the columns kept in each
PACKED = {"input_ids": torch.tensor([[1, 5, 7, 2, 9, 3, 4, 8, 6, 11]]), "position_ids": torch.arange(10)[None]}
PADDED = {
    "input_ids": torch.tensor([[0, 0, 5, 7, 2, 9], [0, 3, 4, 8, 6, 11], [1, 2, 3, 4, 5, 6]]),
    "attention_mask": torch.tensor([[0, 0, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]),
}
LAYOUTS = {"packed": (PACKED, torch.tensor([2, 3, 4, 7, 8])), "padded": (PADDED, torch.tensor([3, 4]))}


def kept_log_probs(model, inputs: dict, keep: torch.Tensor, whole: bool) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """The log-probs and entropy at the kept columns (read from every position's, where `whole`) and the gradients
    of their log-probs' sum plus their entropy's."""
    model.zero_grad()
    inputs = inputs | {"return_dict": True, "temperature": TEMPERATURE}
    if whole:
        out = model(**inputs)
        log_probs, entropy = out.log_probs[:, keep], out.entropy[:, keep]
    else:
        log_probs, entropy = from_output(model(**inputs, logits_to_keep=keep), inputs, keep)
    (log_probs.sum() + entropy.sum()).backward()
    return log_probs.detach(), entropy.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def from_output(out, inputs: dict, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs and entropy as the engine reads them: fused, or from the logits (already at the temperature)."""
    if out.logits is None:
        return out.log_probs, out.entropy
    labels = inputs.get("shift_labels", torch.roll(inputs["input_ids"], -1, -1))[:, keep]
    log_probs = out.logits.log_softmax(-1)
    return log_probs.gather(-1, labels[..., None])[..., 0], -(log_probs.exp() * log_probs).sum(-1)


@pytest.mark.parametrize("layout", ["packed", "padded"])
@pytest.mark.parametrize("chunk", [None, 2], ids=["plain", "fused"])
@pytest.mark.parametrize("labels", ["rolled", "the engine's"])
def test_the_kept_rows_log_probs_entropy_and_gradients_are_verls(fused_model, monkeypatch, layout, chunk, labels):
    from trinity.runtime.verl import fused_rows

    inputs, keep = LAYOUTS[layout]
    if labels == "the engine's":  # verl's engine passes its own rolled labels (packed); they are the ones used
        inputs = inputs | {"shift_labels": torch.randint(0, 40, inputs["input_ids"].shape, generator=_seeded())}
    whole = kept_log_probs(fused_model, inputs, keep, whole=True)
    fused_rows.keep_rows(fused_model)
    if chunk:  # more rows than a chunk: verl's fused kernel on them
        monkeypatch.setattr(fused_rows, "CHUNK_ROWS", chunk)
    out = fused_model(**inputs, logits_to_keep=keep, return_dict=True, temperature=TEMPERATURE)
    assert (out.logits is None) == bool(chunk)
    rows = inputs["input_ids"].shape[0]
    assert (out.logits if out.logits is not None else out.log_probs).shape[:2] == (rows, len(keep))
    kept = kept_log_probs(fused_model, inputs, keep, whole=False)
    torch.testing.assert_close(kept[0], whole[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(kept[1], whole[1], atol=1e-6, rtol=1e-5)
    for name, grad in whole[2].items():
        torch.testing.assert_close(kept[2][name], grad, atol=1e-6, rtol=1e-5, msg=name)


def _seeded() -> torch.Generator:
    return torch.Generator().manual_seed(1)


def test_a_chunk_of_rows_is_plain_one_more_fused_and_in_bf16_both_agree(fused_model, monkeypatch):
    """The logits are divided by the temperature in bf16 and made fp32 as the kernel does: both ways agree."""
    from trinity.runtime.verl import fused_rows

    fused_rows.keep_rows(fused_model.to(torch.bfloat16))
    inputs, keep = LAYOUTS["packed"]
    found = {}
    for chunk in (len(keep), len(keep) - 1):
        monkeypatch.setattr(fused_rows, "CHUNK_ROWS", chunk)
        out = fused_model(**inputs, logits_to_keep=keep, return_dict=True, temperature=TEMPERATURE)
        if out.logits is not None:
            assert out.logits.dtype == torch.float32
        found[out.logits is None] = from_output(out, inputs, keep)[0]
    torch.testing.assert_close(found[False], found[True], atol=1e-5, rtol=1e-5)


def test_a_call_keeping_no_rows_is_verls_own_and_positional_inputs_are_named_as_verl_names_them(fused_model):
    from trinity.runtime.verl import fused_rows

    inputs, keep = LAYOUTS["packed"]
    before = fused_model(**inputs, return_dict=True).log_probs
    fused_rows.keep_rows(fused_model)
    assert fused_rows.keeps_rows(type(fused_model).forward)
    torch.testing.assert_close(fused_model(**inputs, return_dict=True).log_probs, before)
    counted = fused_model(**inputs, return_dict=True, logits_to_keep=1)  # generate's count: verl's every position
    torch.testing.assert_close(counted.log_probs, before)
    positional = fused_model(inputs["input_ids"], logits_to_keep=keep, return_dict=True)
    torch.testing.assert_close(
        positional.logits, fused_model(input_ids=inputs["input_ids"], logits_to_keep=keep).logits
    )


def test_only_verls_fused_forward_is_replaced():
    from transformers import Qwen2ForCausalLM

    from trinity.runtime.verl import fused_rows

    class Plain(Qwen2ForCausalLM):
        pass

    model = Plain(tiny_config())
    fused_rows.keep_rows(model)
    assert type(model).forward is Qwen2ForCausalLM.forward
    assert not fused_rows.keeps_rows(type(model).forward)


def sharded_head(dtype: str, out) -> None:
    """In a process of its own (one gloo rank): an untied model in `dtype` whose lm_head FSDP2 shards as a unit of its
    own, as verl wraps one: its fused log-probs, entropy and gradients against the model unwrapped (verl's kernel on
    the head's own weight), for more kept rows than a chunk and for every position (no rows kept: an SFT batch's)."""
    import copy
    import os

    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from transformers import Qwen2ForCausalLM
    from verl.models.transformers.monkey_patch import patch_forward_with_backends

    from trinity.runtime.sync.group import free_port
    from trinity.runtime.verl import fused_rows

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo")

    class Untied(Qwen2ForCausalLM):
        pass

    torch.manual_seed(0)
    config = tiny_config()
    config.tie_word_embeddings = False
    model = Untied(config).to(getattr(torch, dtype))
    patch_forward_with_backends(model, use_fused_kernels=True, fused_kernels_backend="torch")
    fused_rows.keep_rows(model)
    fused_rows.CHUNK_ROWS = 1
    plain = copy.deepcopy(model)
    fully_shard(model.lm_head)
    fully_shard(model)
    inputs, keep = LAYOUTS["packed"]

    def computed(net, **asked) -> list:
        net.zero_grad()
        got = net(**inputs, **asked, return_dict=True, temperature=TEMPERATURE)
        (got.log_probs.float().sum() + got.entropy.float().sum()).backward()
        grads = [net.lm_head.weight.grad, net.model.norm.weight.grad]
        return [
            got.logits is None,
            got.log_probs,
            got.entropy,
            *(g.full_tensor() if hasattr(g, "full_tensor") else g for g in grads),
        ]

    found = {}
    try:
        for name, asked in (("kept rows", {"logits_to_keep": keep}), ("every position", {})):
            ours, theirs = computed(model, **asked), computed(plain, **asked)
            found[name] = [ours[0], theirs[0]] + [torch.equal(a, b) for a, b in zip(ours[1:], theirs[1:], strict=True)]
        found["the head's own forward after"] = "forward" not in vars(model.lm_head)
    except Exception as error:  # what the test shows, rather than a process that never answers
        found["error"] = repr(error)
    dist.destroy_process_group()
    out.put(found)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_lm_head_sharded_as_a_unit_of_its_own_is_read_through_its_module(dtype):
    """verl's fused kernel would read the head's sharded weight (and fail, "mixed torch.Tensor and DTensor"): run as
    the head module's forward, it gives what it gives on the head unwrapped, bit for bit, the gradients too."""
    from tests.runtime.trainer.spawn import spawned

    same = [True, True] + [True] * 4  # fused both ways; log-probs, entropy and both gradients equal
    found = spawned(sharded_head, dtype)
    assert found == {"kept rows": same, "every position": same, "the head's own forward after": True}


def untied_sft_update(demo_dir: str, model_dir: str, fused: bool, out) -> None:
    """In a process of its own: the demo's SFT trainer rank under FSDP2 on a copy of the demo model with its own
    lm_head, fused kernels on or off; one update's loss and gradient norm, the weights after, and whether FSDP2
    sharded the head as a unit of its own."""
    import os

    from tests.runtime.trainer.test_step import grpo_rank
    from trinity.platforms import get_platform
    from trinity.runtime.experience import Experience
    from trinity.runtime.trainer import batch as batches

    os.environ.update(get_platform("cpu").verl_env())  # before verl's first import, as grpo_rank sets it
    from torch.distributed.fsdp import FSDPModule

    from trinity.runtime.verl import engines

    engines.trains_unsharded = lambda config: False  # FSDP2, as on more than one rank
    overrides = (f"model.model_path={model_dir}", f"trainer.use_fused_kernels={str(fused).lower()}")
    rank = grpo_rank(demo_dir, *overrides, batch=4, stage="sft_warmup", model=model_dir)
    exps = [Experience([3, 4, 5, 6][: 2 + i % 3], [7, 8, 9, 10][: 1 + i], [], 0.0, "g") for i in range(4)]
    rank.steps.whole = exps
    rank.steps.bind_loss(1, batches.counts(exps))
    batch, _, _ = rank.steps.tensors(exps)
    found = rank.steps._metrics(rank.workers.actor.update_actor(batch), len(exps), 0.0)
    module = rank.workers.actor.actor.engine.module
    weights = {k: float(t.double().abs().sum()) for k, t in rank.full_weights().items()}
    from trinity.runtime.verl import fused_rows

    out.put(
        {
            "loss": found["loss"],
            "grad_norm": found["grad_norm"],
            "w": weights,
            "head": isinstance(module.lm_head, FSDPModule),
            "fused": fused_rows.keeps_rows(type(module).forward),  # trinity's fused forward, verl's patch before it
        }
    )


@pytest.mark.train  # real verl trainer ranks, each in a process of its own
def test_an_sft_update_with_fused_kernels_on_an_untied_model_under_fsdp2_is_the_unfused_one(demo_assets, tmp_path):
    """verl's own fused forward fails on this model's first SFT batch ("mixed torch.Tensor and DTensor")."""
    from transformers import AutoModelForCausalLM

    from tests.runtime.trainer.spawn import spawned

    model_dir = tmp_path / "untied"
    shutil.copytree(demo_assets / "model", model_dir)
    model = AutoModelForCausalLM.from_pretrained(demo_assets / "model")
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.get_input_embeddings().weight.detach().clone())
    model.save_pretrained(model_dir)
    fused = spawned(untied_sft_update, str(demo_assets), str(model_dir), True)
    unfused = spawned(untied_sft_update, str(demo_assets), str(model_dir), False)
    assert fused["head"] and unfused["head"]  # a unit of its own: the case verl's fused forward fails on
    assert (fused["fused"], unfused["fused"]) == (True, False)
    for key in ("loss", "grad_norm"):
        assert fused[key] == pytest.approx(unfused[key], rel=1e-5), key
    assert fused["w"] == pytest.approx(unfused["w"], rel=1e-6)
