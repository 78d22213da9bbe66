"""verl's policy engine with the vocabulary's logits at the response positions only: the same log-probs, entropy,
losses, gradient norms and weights after two updates as verl's own path, which computes every packed token's logits;
with as many rows of logits as response tokens."""

import pytest

from tests.runtime.trainer.spawn import spawned

torch = pytest.importorskip("torch")

# prompts of 2 and 3 tokens, responses of 1 to 3: positions shift with every row
EXPERIENCES = [([3, 4, 5][: 2 + i % 2], [6 + i % 3, 7, 8][: 1 + i % 3], float(i % 2), f"g{i // 4}") for i in range(8)]


def experiences():
    from trinity.runtime.experience import Experience

    return [Experience(p, r, [-1.5] * len(r), reward, group) for p, r, reward, group in EXPERIENCES]


def updates(demo_dir: str, responses_only: bool, extra: tuple, chunk: int | None, out) -> None:
    """In a process of its own: a demo trainer rank that recomputes the old policy before the update and trains with
    an entropy bonus (and `extra` overrides), on verl's own path (`responses_only` false) or trinity's (with fused
    kernels, at most `chunk` rows as logits); what it computes and how many rows each forward pass had."""
    from tests.runtime.trainer.test_step import grpo_rank
    from trinity.runtime.trainer import batch as batches

    overrides = ("algorithm.bypass_old_logprobs=false", "algorithm.entropy_loss_fn_args.entropy_coef=0.01", *extra)
    rank = grpo_rank(demo_dir, *overrides, "algorithm.optimizer.lr=1e-3", batch=8)
    from trinity.runtime.verl import fused_rows  # after the rank: verl reads the platform's env at import
    from trinity.runtime.verl.response_logits import ResponseLogitsEngine as Engine

    fused_rows.CHUNK_ROWS = chunk or fused_rows.CHUNK_ROWS
    rows, decide, prepare = [], Engine._responses_only, Engine.prepare_model_outputs
    Engine._responses_only = lambda self, *a: responses_only and decide(self, *a)
    Engine.prepare_model_outputs = lambda self, **kw: rows.append(_rows(kw["output"])) or prepare(self, **kw)
    rank.steps.old_in_update = False  # the forward pass before the update runs (LogProbs)
    exps, seen = experiences(), []
    for step in (1, 2):
        rank.steps.whole = exps
        rank.steps.bind_loss(step, batches.counts(exps))
        batch, built, _ = rank.steps.tensors(exps)
        seen.append(rank.steps._metrics(rank.workers.actor.update_actor(batch), len(exps), 0.0) | built)
    log_probs, entropy = rank.steps.logprobs.actor_and_entropy(batches.padded(exps, 0))
    weights = sum(float(t.double().abs().sum()) for t in rank.engine_weights().values())
    flat = {"log_probs": log_probs.flatten().tolist(), "entropy": entropy.flatten().tolist()}
    out.put({"steps": seen, "rows": rows, "w": weights, **flat})


def _rows(output) -> int:
    """The rows a forward pass computed: of logits, or of log-probs where fused."""
    return output.log_probs.numel() if output.logits is None else output.logits[..., 0].numel()


# a LoRA adapter (its base a PEFT model's) with a KL loss: the reference's forward pass is the adapter switched off;
# wrapped in FSDP2 as on a GPU, with FSDP2's CPU offload (a one-rank fp32 trainer is unsharded otherwise)
LORA = ("+model.lora_configs=[{lora_rank: 8}]", "algorithm.kl_loss_fn=low_var_kl", "trainer.offload_policy=true")
PACKED = ("trainer.use_remove_padding=true",)  # one packed row, as with a GPU's variable-length attention
LENGTHS = [(len(p) + len(r), len(r)) for p, r, _, _ in EXPERIENCES]  # (sequence, response)


def rows_computed(overrides: tuple) -> tuple[int, int]:
    """Rows of logits a forward pass computes: (ours, verl's). Packed: the responses' log-probs, every token. Padded
    (the CPU's default: no variable-length attention): the columns from the first response log-prob of any row to the
    last, every column, in each of the 8 rows."""
    if PACKED[0] in overrides:
        return sum(r for _, r in LENGTHS), sum(n for n, _ in LENGTHS)
    longest = max(n for n, _ in LENGTHS)
    return 8 * (longest - 1 - min(n - r - 1 for n, r in LENGTHS)), 8 * longest


UNFUSED = ("trainer.use_fused_kernels=false",)
# sampled at 0.7: the fused forward's logits come divided by the temperature, the engine's own are divided after
FUSED = ("trainer.use_fused_kernels=true", "buffer.explorer_input.taskset.rollout_args.temperature=0.7")


@pytest.mark.train  # real verl trainer ranks, each in a process of its own
@pytest.mark.parametrize(
    ("overrides", "chunk"),
    [(UNFUSED, None), ((*UNFUSED, *PACKED, *LORA), None), (FUSED, None), ((*FUSED, *PACKED), 4)],
    ids=["padded", "packed-lora", "fused-padded", "fused-packed-chunked"],
)
def test_the_responses_logits_alone_train_as_every_tokens_do(demo_assets, overrides, chunk):
    """Fused (the CPU's default): the rows as logits where at most a chunk of the fused kernel's (the demo's batch),
    else fused (4 rows a chunk here)."""
    ours = spawned(updates, str(demo_assets), True, overrides, chunk)
    verls = spawned(updates, str(demo_assets), False, overrides, chunk)
    passes = len(verls["rows"])  # every forward pass: the old policy's, LoRA's reference, the update's, the last one
    rows = rows_computed(overrides)
    assert (ours["rows"], verls["rows"]) == ([rows[0]] * passes, [rows[1]] * passes)
    for mine, theirs in zip(ours["steps"], verls["steps"], strict=True):  # the loss has the entropy bonus in it
        for key in ("loss", "grad_norm", "logprob_diff"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-7), (key, mine, theirs)
    assert ours["log_probs"] == pytest.approx(verls["log_probs"], abs=1e-5)
    assert ours["entropy"] == pytest.approx(verls["entropy"], abs=1e-5)
    assert ours["w"] == pytest.approx(verls["w"], rel=1e-6)


def test_an_output_of_another_width_than_the_positions_asked_for_is_refused():
    """A forward that ignores `logits_to_keep` (its class patched again) returns every position: read at the kept
    positions' places it would be wrong, so it is refused, saying why."""
    from trinity.runtime.verl.response_logits import _check_kept

    _check_kept(torch.zeros(2, 5, 7), 5)
    with pytest.raises(RuntimeError, match="returned 9 positions a row where 5 were asked for"):
        _check_kept(torch.zeros(2, 9), 5)
