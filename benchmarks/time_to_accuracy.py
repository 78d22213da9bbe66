"""Time to accuracy (issue 48): the demo's GRPO work from one SFT checkpoint, run five ways, each over several seeds,
with the held-out accuracy measured along the way:

    on-policy   trinity, strictly on-policy (sync_style fixed, sync_offset 0: explore -> train -> sync in turn)
    one-off     trinity, one step off (sync_offset 1: the explorer runs a step ahead of the trainer)
    async       trinity, fully async with batches in flight (sync_style fully_async, max_inflight_batches 2)
    trl         Hugging Face TRL's GRPOTrainer (in a virtualenv of its own: see grpo_step.py's header)
    plain       a plain PyTorch loop (generate and update in one process)

and, asked for with --modes, `async-over` (async, and explorer.over_rollout.ratio 0.25 with no wait after the
quorum; train batches of 96, what the quorum of a step writes). The work, its pieces and its settings are
grpo_step.py's. Every run is evaluated (greedy, the demo's 200 held-out problems) at its start, every --eval-every
steps and at its end (trinity: explorer.eval_interval, counted in explore steps, on the weights the engine holds;
TRL and the plain loop: every so many train steps, from a callback), and its clock runs from the end of the first
evaluation and stops while any evaluation runs, the same for all five (trinity's driver waits for an evaluation and
writes no line meanwhile: one began as the line before its own was written; where a train step runs beside an
evaluation, as one step off and async may, its work there is off the clock too). Start-up (Ray, actors, model
loading) is left out of the clock and reported beside it.

Reported for each mode and size: wall time to TRL's final held-out accuracy (the mean over seeds of TRL's last
evaluation) on the seeds' mean accuracy curve (the k-th evaluations averaged, in time and accuracy), and on how many
seeds each reached it; the ratio of that time to TRL's whole run; the final accuracy, mean +- standard error over
seeds; seconds per step (steady state, evaluations left out) and its ratio to TRL's. Goals (issue 48's "Done
means"): trinity's best mode reaches TRL's final accuracy in <= 0.8x TRL's wall time at 4.2 M parameters and
<= 1.0x at the demo's size, its final accuracy within one SE of TRL's (read as: not below TRL's by more than one SE;
above it is no miss, and whether it is within either way is printed too); strictly on-policy <= 1.3x TRL per step at
the demo's size. --report prints the table and the goals again from a results file, of a run finished or cut short.

    python benchmarks/time_to_accuracy.py [--steps 100] [--seeds 3] [--sizes demo,4.2m] [--eval-every 10]
        [--modes on-policy,one-off,async,trl,plain] [--trl-python .venv-trl/bin/python] [--threads 1]
        [--out results.json]

Sizes: `demo` is the demo's model (hidden 128, 2 layers: 0.53 M parameters), `4.2m` the same task at hidden 256,
4 layers (MLP 4x: 4.2 M parameters). A smoke run: --steps 10 --seeds 1 --eval-every 5 --sft-steps 50. The JSON
(--out) is rewritten after every run, so a run cut short leaves what it finished.
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grpo_step import REPO, in_subprocess, prepare, trinity_grpo, unpaused  # noqa: E402

SIZES = {"demo": (128, 2), "4.2m": (256, 4)}  # name -> (hidden size, layers)
TRINITY = {
    "on-policy": ("synchronizer.sync_style=fixed", "synchronizer.sync_offset=0"),
    "one-off": ("synchronizer.sync_style=fixed", "synchronizer.sync_offset=1"),
    "async": ("synchronizer.sync_style=fully_async", "explorer.max_inflight_batches=2"),
    "async-over": (
        "synchronizer.sync_style=fully_async",
        "explorer.max_inflight_batches=2",
        "explorer.over_rollout.ratio=0.25",
        "explorer.over_rollout.wait_after_min=0",
        "buffer.train_batch_size=96",  # what a step's quorum writes: 12 of its 16 tasks x 8 (validate asks for it)
    ),
}
MODES = [*TRINITY, "trl", "plain"]
DEFAULT_MODES = ["on-policy", "one-off", "async", "trl", "plain"]
GOALS = {"demo": 1.0, "4.2m": 0.8}  # trinity's best mode to TRL's final accuracy, x TRL's wall time
ON_POLICY_PER_STEP = 1.3  # strictly on-policy s/step, x TRL's, at the demo's size
TOLERANCE = 1e-9  # accuracies are k/200 and their means: equal means reached


# --- the pure helpers -----------------------------------------------------------------------------------------------


def series(evals: list[tuple[float, float, int, float]]) -> list[tuple[float, float]]:
    """(seconds, accuracy) of each evaluation (start, end, step, accuracy): the seconds on a clock that starts as the
    first evaluation ends and stops while any runs, read as each begins (the weights it measures existed then)."""
    pauses = [(start, end) for start, end, _, _ in evals]
    zero = unpaused(evals[0][1], pauses)
    return [(unpaused(start, pauses) - zero, value) for start, _, _, value in evals]


def time_to(points: list[tuple[float, float]], threshold: float) -> float | None:
    """The seconds of the first (seconds, accuracy) point at or above `threshold`; None if none is."""
    return next((t for t, value in points if value >= threshold - TOLERANCE), None)


def mean_se(values: list[float]) -> tuple[float | None, float | None]:
    """The mean and its standard error (sample standard deviation / sqrt(n); None for fewer than two values)."""
    if not values:
        return None, None
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return statistics.fmean(values), se


def mean_curve(curves: list[list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The seeds' k-th points averaged, seconds and accuracy (as far as the shortest curve goes)."""
    return [(statistics.fmean(p[0] for p in points), statistics.fmean(p[1] for p in points)) for points in zip(*curves)]


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


# --- the runs -------------------------------------------------------------------------------------------------------


def one_run(mode: str, work: Path, demo: Path, start: Path, steps: int, seed: int, every: int, trl: str | None):
    """One mode's run with `seed`: grpo_step's result (evals, step_times, s_per_step, accuracy, memory_mb, ...)."""
    if mode in TRINITY:
        overrides = (*TRINITY[mode], f"explorer.rollout_model.seed={seed}")
        return trinity_grpo(work, demo, start, steps, overrides, every)
    if mode == "trl" and not trl:
        return None
    python = trl if mode == "trl" else sys.executable
    return in_subprocess(mode, demo, start, steps, seed, work, python, every)


def summarise(runs: dict[str, list[dict]]) -> dict:
    """Each mode's numbers against TRL's, from `runs` (mode -> its seeds' results)."""
    trl = runs.get("trl") or []
    threshold = mean_se([r["accuracy"][1] for r in trl])[0]
    trl_wall = mean_se([series(r["evals"])[-1][0] for r in trl])[0]
    trl_step = mean_se([r["s_per_step"] for r in trl])[0]
    out = {"threshold": threshold, "trl_wall_s": trl_wall, "modes": {}}
    for mode, results in runs.items():
        if not results:
            continue
        curves = [series(r["evals"]) for r in results]
        curve = mean_curve(curves)
        reached = time_to(curve, threshold) if threshold is not None else None
        final, final_se = mean_se([r["accuracy"][1] for r in results])
        step, step_se = mean_se([r["s_per_step"] for r in results])
        out["modes"][mode] = {
            "seeds": len(results),
            "to_trl_final_s": reached,
            "to_trl_final_x_trl_wall": ratio(reached, trl_wall),
            "seeds_reaching": sum(threshold is not None and time_to(c, threshold) is not None for c in curves),
            "per_seed_to_trl_final_s": [time_to(c, threshold) if threshold is not None else None for c in curves],
            "final_accuracy": final,
            "final_accuracy_se": final_se,
            "start_accuracy": mean_se([r["accuracy"][0] for r in results])[0],
            "s_per_step": step,
            "s_per_step_se": step_se,
            "s_per_step_x_trl": ratio(step, trl_step),
            "wall_s": mean_se([c[-1][0] for c in curves])[0],
            "startup_s": mean_se([r["evals"][0][1] - r["launched"] for r in results])[0],
            "memory_mb": mean_se([r["memory_mb"] for r in results])[0],
            "curve": curve,
        }
    return out


def goals(sizes: dict[str, dict]) -> list[dict]:
    """Issue 48's goals, each with the numbers it was judged on (None: not measured in this run)."""
    found = []
    for size, summary in sizes.items():
        modes, trl = summary["modes"], summary["modes"].get("trl")
        if size in GOALS and trl:
            ours = {m: s for m, s in modes.items() if m in TRINITY}
            se = trl["final_accuracy_se"]
            gap = {m: s["final_accuracy"] - trl["final_accuracy"] for m, s in ours.items()}  # above TRL's: > 0
            within = {m: se is not None and gap[m] >= -se - TOLERANCE for m in ours}
            either_way = {m: se is not None and abs(gap[m]) <= se + TOLERANCE for m in ours}
            timed = {
                m: s["to_trl_final_x_trl_wall"] for m, s in ours.items() if s["to_trl_final_x_trl_wall"] is not None
            }
            best = min(timed, key=timed.get) if timed else None
            met = [m for m, x in timed.items() if x <= GOALS[size] and within[m]]
            found.append(
                {
                    "goal": f"{size}: trinity's best mode reaches TRL's final accuracy in <= {GOALS[size]}x TRL's "
                    "wall time, final accuracy within one SE of TRL's (not below it by more)",
                    "best": best,
                    "x_trl_wall": timed.get(best) if best else None,
                    "within_one_se": within.get(best) if best else None,
                    "within_one_se_either_way": either_way.get(best) if best else None,
                    "accuracy_minus_trl": gap.get(best) if best else None,
                    "trl_se": se,
                    "modes_meeting": met,
                    "met": bool(met),
                }
            )
        if size == "demo" and trl and "on-policy" in modes:
            x = modes["on-policy"]["s_per_step_x_trl"]
            found.append(
                {
                    "goal": f"demo: strictly on-policy <= {ON_POLICY_PER_STEP}x TRL per step",
                    "x_trl": x,
                    "met": x is not None and x <= ON_POLICY_PER_STEP,
                }
            )
    return found


def table(sizes: dict[str, dict]) -> str:
    num = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    lines = []
    for size, summary in sizes.items():
        lines.append(
            f"{size} ({summary.get('params', 0) / 1e6:.2f} M parameters): TRL's final accuracy "
            f"{num(summary['threshold'], '.3f')}, TRL's wall time {num(summary['trl_wall_s'], '.1f')} s"
        )
        lines.append(
            f"  {'mode':10} {'to TRL final s':>14} {'x TRL wall':>10} {'seeds':>5} {'final acc +- SE':>16} "
            f"{'s/step':>7} {'x TRL':>6} {'wall s':>7} {'start-up s':>10}"
        )
        for mode, s in summary["modes"].items():
            reached = num(s["to_trl_final_s"], ".1f") if s["to_trl_final_s"] is not None else "not reached"
            acc = f"{s['final_accuracy']:.3f} +- {num(s['final_accuracy_se'], '.3f')}"
            lines.append(
                f"  {mode:10} {reached:>14} {num(s['to_trl_final_x_trl_wall'], '.2f'):>10} "
                f"{s['seeds_reaching']}/{s['seeds']:<3} {acc:>16} {s['s_per_step']:7.3f} "
                f"{num(s['s_per_step_x_trl'], '.2f'):>6} {s['wall_s']:7.1f} {s['startup_s']:10.1f}"
            )
    return "\n".join(lines)


def goal_lines(found: list[dict]) -> str:
    lines = []
    for g in found:
        if "best" in g:
            numbers = f"best {g['best']}: {g['x_trl_wall'] if g['x_trl_wall'] is None else round(g['x_trl_wall'], 2)}x"
            if g["best"]:
                numbers += (
                    f", final accuracy {g['accuracy_minus_trl']:+.3f} against TRL's (one SE: "
                    f"{g['trl_se'] if g['trl_se'] is None else round(g['trl_se'], 3)}; within either way: "
                    f"{g['within_one_se_either_way']})"
                )
            numbers += f"; modes meeting it: {', '.join(g['modes_meeting']) or 'none'}"
        else:
            numbers = f"{g['x_trl'] if g['x_trl'] is None else round(g['x_trl'], 2)}x"
        lines.append(f"goal {'MET' if g['met'] else 'not met'}: {g['goal']} ({numbers})")
    return "\n".join(lines)


def params(start: Path) -> int:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(start).num_parameters()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="GRPO steps of each run (the demo's: 100)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..n-1 of each mode's sampling")
    parser.add_argument("--sizes", default="demo,4.2m", help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--eval-every", type=int, default=10, help="steps between held-out evaluations")
    parser.add_argument("--sft-steps", type=int, default=400, help="the SFT stage's steps (the demo's: 400)")
    default_trl = REPO / ".venv-trl" / "bin" / "python"
    parser.add_argument(
        "--trl-python",
        default=str(default_trl) if default_trl.exists() else None,
        help="an interpreter with TRL (default: .venv-trl's, where there is one); without one TRL is skipped",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="OMP_NUM_THREADS for every process of every run (trinity's roles take an exported value over their "
        "derived one); unset: each its own (trinity's roles 1, or 2 where they take turns; TRL and the plain loop one "
        "per core). On a machine busy with other work a process computing with 2 threads slows far more than one "
        "with 1 (each waits for the other's turn on a core)",
    )
    parser.add_argument("--report", type=Path, help="print the table and goals from this results file, and stop")
    parser.add_argument("--out", type=Path, help="write the results as JSON here (after every run)")
    args = parser.parse_args()
    if args.report:
        report = json.loads(args.report.read_text())
        for size, runs in report["runs"].items():
            report["sizes"][size] |= summarise({mode: results for mode, results in runs.items() if results})
        print(table(report["sizes"]))
        print(goal_lines(goals(report["sizes"])))
        print(f"load: {report['load_at_start']} at the start, {report.get('load_at_end')} at the end")
        return
    sizes, modes = args.sizes.split(","), args.modes.split(",")
    for name, known in ((sizes, SIZES), (modes, MODES)):
        if unknown := [n for n in name if n not in known]:
            parser.error(f"unknown: {', '.join(unknown)} (known: {', '.join(known)})")
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    work = Path(tempfile.mkdtemp(prefix="time-to-accuracy-"))
    report = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cpus": os.cpu_count(),
        "load_at_start": os.getloadavg(),
        "sizes": {},
        "runs": {},
    }
    print(f"work in {work}; load {os.getloadavg()}", flush=True)
    for size in sizes:
        width, layers = SIZES[size]
        started = time.time()
        start = prepare(work / size, 0, args.sft_steps, width, layers)
        runs = report["runs"][size] = {mode: [] for mode in modes}
        report["sizes"][size] = {"params": params(start), "width": width, "layers": layers}
        print(f"{size}: {report['sizes'][size]['params']} parameters, SFT {time.time() - started:.0f} s", flush=True)
        for seed in range(args.seeds):  # the modes take turns, so that the machine's load weighs on each alike
            for mode in modes:
                result = one_run(
                    mode, work / size / f"{mode}-{seed}", work / size / "demo", start, args.steps, seed,
                    args.eval_every, args.trl_python,
                )  # fmt: skip
                if result is None:
                    print(f"  {mode}: skipped (no --trl-python)", flush=True)
                    continue
                runs[mode].append(result)
                print(
                    f"  {size} {mode} seed {seed}: {result['s_per_step']:.3f} s/step, accuracy "
                    f"{result['accuracy'][0]:.3f} -> {result['accuracy'][1]:.3f}, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
                report["sizes"][size] |= summarise(runs)
                report["goals"] = goals(report["sizes"])
                report["load_at_end"] = os.getloadavg()
                if args.out:
                    args.out.write_text(json.dumps(report, indent=1))
        print(table({size: report["sizes"][size]}), flush=True)
    print(table(report["sizes"]))
    print(goal_lines(report["goals"]))
    print(f"load: {report['load_at_start']} at the start, {report['load_at_end']} at the end")


if __name__ == "__main__":
    main()
