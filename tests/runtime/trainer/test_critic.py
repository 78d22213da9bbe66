"""PPO's critic on a real trainer rank: one update moves it, a checkpoint keeps it, it runs the model config the run
changes (model.rope_theta) as the actor does."""

import pytest

from tests.runtime.trainer.spawn import spawned


def ppo_critic(demo_dir: str, folder: str, out) -> None:
    """In a process of its own: a PPO trainer rank updates its critic on one batch and saves it; a rank resumed from
    that checkpoint has the same critic, a new one (a fresh value head) does not."""
    import os

    os.environ["TRINITY_DEMO_DIR"] = demo_dir
    import torch

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.experience import Experience
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer import batch as batches
    from trinity.runtime.trainer.rank import TrainerRank

    # model.rope_theta: the actor and the critic both run the changed model config (weights/model_config.py)
    overrides = (
        "hardware=cpu",
        "+stages.1.algorithm.algorithm_type=ppo",
        "buffer.train_batch_size=8",
        "+model.rope_theta=100.0",
    )
    config = resolve(Request(None, overrides)).stage("grpo")
    os.environ.update(get_platform("cpu").verl_env())
    port, model = free_port(), f"{demo_dir}/model"

    def rank(resume=None):
        trainer = TrainerRank(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
        trainer.setup("127.0.0.1", port, model, 4, None, resume)
        return trainer

    exps = [Experience([3, 4, 5], [6, 7], [-1.0, -1.0], reward=float(i % 2), group=f"g{i // 4}") for i in range(8)]
    tensors = batches.padded(exps, 0)
    trained = rank()
    critic = trained.workers.critic
    before = critic.values(tensors)
    trained.steps.whole = exps  # rank 0's step batch, as taken from the buffer
    _, _, (batch, values, returns, total) = trained.steps.tensors(exps)  # the critic's values, GAE
    extra = critic.update(batch, values, returns, total)
    after = critic.values(tensors)
    trained.save(folder, 1, hf=False)
    out.put(
        {
            "critic_loss": extra["critic_loss"],
            "moved": not torch.allclose(before, after),
            "resumed": torch.allclose(rank(folder).workers.critic.values(tensors), after),
            "fresh": torch.allclose(rank().workers.critic.values(tensors), after),
            "ropes": [w.model_config.hf_config.rope_parameters for w in (trained.workers.actor.actor, critic.worker)],
        }
    )


@pytest.mark.train  # a real verl trainer rank with a critic, in a process of its own
def test_a_ppo_trainer_updates_its_critic_and_a_resume_restores_it(demo_assets, tmp_path):
    seen = spawned(ppo_critic, str(demo_assets), str(tmp_path / "global_step_1"))
    assert seen["critic_loss"] > 0 and seen["moved"], seen  # one update moved the value head
    assert seen["resumed"] and not seen["fresh"], seen  # the saved critic comes back; a new one is not it
    assert (tmp_path / "global_step_1" / "critic_state").is_dir()
    assert seen["ropes"] == [{"rope_type": "default", "rope_theta": 100.0}] * 2
