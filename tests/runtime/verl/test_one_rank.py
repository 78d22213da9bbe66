"""A trainer of one rank computing in its weights' dtype trains its model unsharded (config/unsharded.py): the same
losses, gradient norms and weights as FSDP2's, and each resumes from the other's checkpoint."""

import pytest

from tests.runtime.trainer.spawn import spawned
from tests.runtime.verl.test_response_logits import experiences

torch = pytest.importorskip("torch")


def trained(demo_dir: str, unsharded: bool, save: str | None, resume: str | None, out) -> None:
    """In a process of its own: the demo's GRPO trainer rank built unsharded or with FSDP2 (from `resume`'s checkpoint
    where given), two updates (the second only, after a resume), a checkpoint saved to `save` between them; what each
    update computed and the weights after."""
    import os

    from tests.runtime.trainer.test_step import grpo_rank
    from trinity.platforms import get_platform
    from trinity.runtime.trainer import batch as batches

    os.environ.update(get_platform("cpu").verl_env())  # before verl's first import, as grpo_rank sets it
    from trinity.runtime.verl import engines

    engines.trains_unsharded = lambda config: unsharded  # the rule's answer for this run, either way
    rank = grpo_rank(demo_dir, "algorithm.optimizer.lr=1e-3", batch=8, resume=resume)
    from torch.distributed.fsdp import FSDPModule

    exps, seen = experiences(), {}
    for step in (1, 2)[bool(resume) :]:
        rank.steps.whole = exps
        rank.steps.bind_loss(step, batches.counts(exps))
        batch, built, _ = rank.steps.tensors(exps)
        seen[step] = rank.steps._metrics(rank.workers.actor.update_actor(batch), len(exps), 0.0) | built
        if step == 1 and save:
            rank.save(save, step, hf=False)
    weights = {k: float(t.double().abs().sum()) for k, t in rank.full_weights().items()}
    out.put({"steps": seen, "w": weights, "fsdp": isinstance(rank.workers.actor.actor.engine.module, FSDPModule)})


def assert_same_updates(ours: dict, theirs: dict) -> None:
    for step, mine in ours["steps"].items():
        for key in ("loss", "grad_norm", "pg_clipfrac", "actor/lr"):
            if key in mine:
                assert mine[key] == pytest.approx(theirs["steps"][step][key], rel=1e-5, abs=1e-7), (step, key)
    assert ours["w"] == pytest.approx(theirs["w"], rel=1e-6)


@pytest.mark.train  # real verl trainer ranks, each in a process of its own
def test_an_unsharded_model_trains_and_resumes_as_fsdp2s_does(demo_assets, tmp_path):
    demo = str(demo_assets)
    fsdp2 = spawned(trained, demo, False, str(tmp_path / "fsdp2"), None)
    plain = spawned(trained, demo, True, str(tmp_path / "plain"), None)
    assert (fsdp2["fsdp"], plain["fsdp"]) == (True, False)
    assert_same_updates(plain, fsdp2)
    # each resumes from the other's checkpoint (DTensors into plain tensors, and back) to the same second update
    plain_from_fsdp2 = spawned(trained, demo, True, None, str(tmp_path / "fsdp2"))
    fsdp2_from_plain = spawned(trained, demo, False, None, str(tmp_path / "plain"))
    assert (plain_from_fsdp2["fsdp"], fsdp2_from_plain["fsdp"]) == (False, True)
    assert_same_updates(plain_from_fsdp2, fsdp2)
    assert_same_updates(fsdp2_from_plain, plain)


def reloaded(out) -> None:
    """In a process of its own (a one-rank gloo group): a small model built unsharded or with FSDP2 on one rank, one
    AdamW step, its model and optimizer state saved (torch.save, as verl's checkpoints are), one more step; the same
    state loaded into a model built the other way, one step there: whether the weights after agree, each way."""
    import io
    import os

    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    from trinity.runtime.sync.group import free_port
    from trinity.runtime.verl.one_rank import _module_state_as_here, _optimizer_state_as_here

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo")

    def built(sharded: bool):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
        if sharded:
            fully_shard(model[0])
            fully_shard(model)
        model.register_load_state_dict_pre_hook(_module_state_as_here)
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
        optimizer.register_load_state_dict_pre_hook(_optimizer_state_as_here)
        return model, optimizer

    def step(model, optimizer) -> list:
        model(torch.ones(2, 4)).square().sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        return [(p.full_tensor() if isinstance(p, DTensor) else p).detach().clone() for p in model.parameters()]

    def saved(state: dict) -> dict:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        return torch.load(buffer, weights_only=False)

    def resumed(sharded: bool) -> bool | str:
        model, optimizer = built(sharded)
        step(model, optimizer)
        state, moments = saved(model.state_dict()), saved(optimizer.state_dict())
        expected = step(model, optimizer)
        other, its_optimizer = built(not sharded)
        try:
            other.load_state_dict(state)
            its_optimizer.load_state_dict(moments)
            got = step(other, its_optimizer)
        except Exception as error:  # what the test shows, rather than a process that never answers
            return repr(error)
        return all(torch.allclose(a, b, rtol=0, atol=1e-7) for a, b in zip(expected, got, strict=True))

    agree = {"fsdp2 -> unsharded": resumed(True), "unsharded -> fsdp2": resumed(False)}
    dist.destroy_process_group()
    out.put(agree)


def test_fsdp2s_state_on_one_rank_and_an_unsharded_models_load_each_other():
    assert spawned(reloaded) == {"fsdp2 -> unsharded": True, "unsharded -> fsdp2": True}
