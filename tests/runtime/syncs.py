"""Drives an engine's memory-sync loads as the synchronizer does (sync/synchronizer.py), without Ray: the weights
cut into pieces by the same plan, each piece a flat host tensor (what trainer rank 0 puts into the object store)."""

import asyncio

from trinity.runtime.rollout.base import WeightSpec
from trinity.runtime.sync import pieces


def specs_of(weights: dict) -> list[WeightSpec]:
    return [WeightSpec(name, tuple(t.shape), str(t.dtype).removeprefix("torch.")) for name, t in weights.items()]


def memory_sync(engine, weights: dict, version: int, limit: int = 256 * 2**20) -> list[int]:
    """Load `weights` into `engine` a piece (of up to `limit` bytes) at a time; what each load_piece returned."""
    plan = pieces.plan(specs_of(weights), limit)

    async def run() -> list[int]:
        done = []
        for index, specs in enumerate(plan):
            flat = pieces.flatten([weights[s.name] for s in specs])
            done.append(await engine.load_piece(flat, specs, index, len(plan), version))
        return done

    return asyncio.run(run())
