"""`frozen_lake_workflow`: walk a frozen lake to its goal over several turns (Trinity-RFT's `FrozenLakeWorkflow`,
trinity/common/workflows/envs/frozen_lake/workflow.py at 8b7fce3, after rLLM's; needs gymnasium, `trinity[gym]`).

Each row gives `size`, `p` and `seed` (defaults 1, 0.8, 42 as upstream; a size below 2 is refused) from which the
lake is generated with a path of at most `env_max_steps` moves (frozen_lake_env.py), or workflow_args' `desc` gives
the lake. The model reads a system prompt with the rules and the rendered lake, and answers with its next move in
triple backticks (Left, Down, Right, Up, or 1 to 4); up to `agent_max_steps` turns, each observation saying how many
are left and, when the last move changed nothing, that it was invalid. The episode ends on the goal (reward 1) or in a
hole (0). `repeat_times` episodes of a task play in step on their own copies of the lake, one engine call a turn;
each is one experience, only the model's turns trained. With workflow_args' `reward_fn_type` (and `reward_fn_args`),
that reward function scores the whole conversation instead, its `reward` score replacing the lake's (the lake's
reward where it raises, as upstream). Metrics: `env_steps` (moves made), `env_done` (the episode ended on G or H).
A reply's budget is the taskset's max_tokens or what model.max_model_len leaves (upstream: 10240 tokens after the
first prompt).
"""

import logging

from ...config.workflow_args import FrozenLakeArgs
from ..rewards import bind
from .base import Workflow
from .frozen_lake_env import Lake, generate, parse_action

log = logging.getLogger(__name__)

SYSTEM = """You are a helpful assistant walking on a frozen lake.

How to play FrozenLake
Goal: reach the goal (G): the player (P) must stand on it.

Symbols: _ frozen | O hole | G goal | P player

Rules:
1. Do not fall into a hole (O).
2. The ice may be slippery: a move may take you sideways to the direction you chose.

Moves (one of): Up | Down | Left | Right

Rewards: falling into a hole 0, reaching the goal +1.0.

Each turn you get the current observation and decide the next move. Think it through, then give the move in triple
backticks: only the NEXT move goes in the backticks, for example ```Up``` to move up. Plan to reach the goal in as few
moves as you can; the ice is rarely slippery, do not overthink it.
In every turn the move in the backticks MUST be one of Up, Down, Left, Right."""
INVALID = (
    "\nYour last response is invalid. Your position didn't change at all. Check your reasoning, the move you gave and "
    "the format of your response: give only the NEXT move in ``` ```, for example ```Up``` to move up."
)


class FrozenLakeWorkflow(Workflow):
    """Move across the lake one turn at a time; reaching the goal earns 1."""

    args_model = FrozenLakeArgs

    def run(self):
        settings = self.settings()
        rows = settings.desc or self._generated(settings)
        seed = int(self.task.row.get("seed", 42))
        lakes = [Lake.make(rows, settings.is_slippery, seed) for _ in range(self.task.repeat_times)]
        steps, done, rewards = [0] * len(lakes), [False] * len(lakes), [0.0] * len(lakes)
        turns = settings.agent_max_steps
        opening = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": observe(lakes[0], 0, turns)}]
        episodes = [self.model.conversation(self.task, [dict(m) for m in opening]) for _ in lakes]

        def step(i, episode, turn):
            before = lakes[i].render()
            rewards[i], done[i] = lakes[i].step(parse_action(episode.messages[-1]["content"]))
            steps[i] = turn
            if not done[i] and turn < turns:
                note = INVALID if lakes[i].render() == before else ""
                episode.add_messages([{"role": "user", "content": observe(lakes[i], turn, turns, note)}])
            return done[i]

        self.play(episodes, turns, step)
        judge = bind(settings.reward_fn_type, settings.reward_fn_args) if settings.reward_fn_type else None
        return [
            e.experience(self._reward(e, r, judge), self.task.uid, env_steps=float(s), env_done=float(d))
            for e, r, s, d in zip(episodes, rewards, steps, done)
        ]

    def _generated(self, settings: FrozenLakeArgs) -> list[str]:
        row = self.task.row
        return generate(
            int(row.get("size", 1)), float(row.get("p", 0.8)), int(row.get("seed", 42)), settings.env_max_steps
        )

    def _reward(self, episode, lake_reward: float, judge) -> float:
        """The lake's reward, or the judge's `reward` score of the whole conversation (the lake's where it fails)."""
        if judge is None:
            return lake_reward
        last = episode.messages[-1]
        reply = last["content"] if last["role"] == "assistant" else ""
        try:
            return judge(reply, None, messages=episode.messages, row=self.task.row).get("reward", lake_reward)
        except Exception as exc:  # upstream falls back to the lake's reward on any failure of the reward function
            log.warning("frozen_lake_workflow: %s failed, the lake's reward stands: %s", judge.name, exc)
            return lake_reward


def observe(lake: Lake, moves: int, turns: int, note: str = "") -> str:
    """The user's turn: the lake after `moves` moves, what is asked, and how many turns are left."""
    return (
        f"Current Observation ({moves}): \n{lake.render()}\n"
        "You have not achieved the goal, P has not reached G yet. Please give the next action."
        f"{note}\nThe maximum number of steps remaining is {turns - moves}."
    )
