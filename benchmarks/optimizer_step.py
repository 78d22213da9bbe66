"""The trainer's optimizer step on the CPU, three ways on the same FSDP2 rank: torch's default AdamW (one call per
parameter and operation, each through DTensor's dispatch), `foreach=True` and `fused=True` (the `cpu` profile's
`fused_optimizer`). Gradient clipping is timed with the step, as verl runs them. Each way is run twice, interleaved,
and reported as a ratio against the default measured in the same invocation; the weights after the same steps are
compared too.

    python benchmarks/optimizer_step.py [--model FOLDER] [--steps 40]

Without --model it builds the demo's model (trinity/demo.py) in a temporary folder.
"""

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

WAYS = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def step_times(model_path: Path, options: dict, steps: int) -> tuple[list[float], list]:
    """Seconds of clipping and AdamW per step (after 5 warm-up steps), and the weights after the last step."""
    import torch
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoModelForCausalLM
    from transformers.utils.logging import disable_progress_bar

    disable_progress_bar()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, **options)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / (2 * steps))  # a new lr every step
    tokens = torch.randint(0, model.config.vocab_size, (64, 12), generator=torch.Generator().manual_seed(0))
    times = []
    for _ in range(steps + 5):
        model(input_ids=tokens).logits.log_softmax(-1)[..., 0].mean().backward()
        started = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - started)
    return times[5:], [p.full_tensor().detach() for p in model.parameters()]


def main() -> None:
    """Time each variant's optimizer step, interleaved; print its mean, ratio to the default and weight drift."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a Hugging Face model folder (default: the demo's model)")
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # as a trainer rank on the cpu profile
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=0, world_size=1)
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model
        if model is None:
            from trinity import demo

            demo.build(Path(scratch), 0)
            model = Path(scratch) / "model"
        medians: dict[str, list[float]] = {way: [] for way in WAYS}
        weights = {}
        for _ in range(2):
            for way, options in WAYS.items():
                times, weights[way] = step_times(model, options, args.steps)
                medians[way].append(statistics.median(times))
    dist.destroy_process_group()
    base = statistics.mean(medians["default"])
    print(f"{'':8} {'ms/step':>8} {'x default':>10} {'max |w - w_default|':>20}")
    for way, runs in medians.items():
        drift = max((a - b).abs().max().item() for a, b in zip(weights[way], weights["default"]))
        print(f"{way:8} {1000 * statistics.mean(runs):8.2f} {statistics.mean(runs) / base:10.2f} {drift:20.1e}")


if __name__ == "__main__":
    main()
