"""`step_wise_alfworld_workflow`: an ALFWorld household game played one step at a time, one experience per step
(Trinity-RFT's `StepWiseAlfworldWorkflow`, trinity/common/workflows/envs/alfworld/alfworld_workflow.py at e9cc93a, a
`RewardPropagationWorkflow` of step_wise_workflow.py; needs alfworld and textworld, `trinity[alfworld]`).

The row's prompt column holds the path of the game's `game.tw-pddl` file (upstream's task_desc; ALFWorld's data set
puts one per task under `$ALFWORLD_DATA`). The game runs in TextWorld with ALFWorld's name demangler (upstream also
wraps its hand-coded expert, whose plan nothing reads). The model reads upstream's system prompt (think in
<think></think>, act in <action></action>, the game's commands) and each observation as `Observation: ...` (with a
reminder of the format after "Nothing happens."), for up to `max_env_steps` turns; the action is the text between the
first <action> and </action> (empty when there is none). The episode's reward is the game's at its end (1 when the
task is done), -0.1 when the turns run out, as upstream's.

Each step is an experience of its own: the conversation up to the step as the prompt (the tokens the model saw), the
step's reply as the response, the episode's reward on every step (upstream propagates it), all steps sharing an
`episode` id, so `multi_step_grpo` and `gigpo` read the episode's reward once and the steps as its turns. A step's
metrics: `step_reward` (the game's reward for that action; upstream's info key), `actual_env_steps` (upstream's:
the episode's steps), `env_done`. `repeat_times` episodes of a task play in step, one engine call a turn; an episode
whose context is full ends there (upstream ends one whose reply reached max_tokens).
"""

import threading
import uuid
from typing import Any

from ...config.workflow_args import AlfworldArgs
from ..experience import Experience
from .base import Workflow

SYSTEM = """
You are an agent interacting with a virtual text-based environment.

## Notes:
At each step, you should first think then perform action to fulfill the instruction. You should ALWAYS wrap your \
thinking with the <think> </think> tag and wrap your action with the <action> </action> tag.
You should ALWAYS take one action each step.
DO NOT try to interact with the user at anytime. Finish the task by yourself.

## Action Format:
Below are the available commands you can use:
  look:                             look around your current location
  inventory:                        check your current inventory(you can only have 1 item in your inventory)
  go to (receptacle):               move to a receptacle
  open (receptacle):                open a receptacle
  close (receptacle):               close a receptacle
  take (object) from (receptacle):  take an object from a receptacle
  move (object) to (receptacle):  place an object in or on a receptacle
  examine (something):              examine a receptacle or an object
  use (object):                     use an object
  heat (object) with (receptacle):  heat an object using a receptacle
  clean (object) with (receptacle): clean an object using a receptacle
  cool (object) with (receptacle):  cool an object using a receptacle
  slice (object) with (object):     slice an object using a sharp object

For example your output should be like this:
<think> To solve the task, I need first to ... </think><action>go to cabinet 1</action>
"""
NOT_DONE = -0.1  # upstream's reward of an episode that ran out of turns


def observe(observation: str) -> str:
    """An observation as the model reads it."""
    if "Nothing happens." in observation:
        observation += "Please check if the action you take is valid or you have carefully followed the action format."
    return "Observation: " + observation


def parse_action(reply: str) -> str:
    """The text of the reply's first <action> block, stripped; '' without one."""
    if "<action>" not in reply:
        return ""
    return reply.split("<action>", 1)[1].split("</action>", 1)[0].strip()


def make_game(game_file: str) -> Any:
    """The TextWorld environment of one ALFWorld game, its entity names demangled as ALFWorld's."""
    try:
        import textworld
        import textworld.gym
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
    except ImportError as exc:
        raise ImportError(
            f"step_wise_alfworld_workflow needs alfworld and textworld ({exc}): pip install 'trinity[alfworld]' where "
            "the explorer runs"
        ) from None
    infos = textworld.EnvInfos(description=True, inventory=True, admissible_commands=True)
    return textworld.gym.make(textworld.gym.register_game(game_file, infos, wrappers=[AlfredDemangler()]))


# TextWorld's game loading and its PDDL engine keep module-level state that is not thread-safe (two games loaded at
# once fail with "IndexError: pop from empty list"), and the explorer runs workflows in threads: every touch of a game
# holds this lock (a step is fast beside the model's turn).
GAMES = threading.RLock()


class StepWiseAlfworldWorkflow(Workflow):
    """Play an ALFWorld game turn by turn; every step an experience carrying the episode's reward."""

    args_model = AlfworldArgs

    def run(self) -> list[Experience]:
        turns = self.settings().max_env_steps
        game = str(self.task.row[self.task.format.prompt_key])
        with GAMES:
            games = [make_game(game) for _ in range(self.task.repeat_times)]
        try:
            return self._play(games, turns)
        finally:
            with GAMES:
                for env in games:
                    env.close()

    def _play(self, games: list, turns: int) -> list[Experience]:
        with GAMES:
            openings = [observe(env.reset()[0]) for env in games]
        episodes = [
            self.model.conversation(self.task, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": o}])
            for o in openings
        ]
        rewards, done = [NOT_DONE] * len(games), [False] * len(games)
        step_rewards: list[list[float]] = [[] for _ in games]

        def step(i, episode, turn):
            with GAMES:
                observation, reward, done[i], _ = games[i].step(parse_action(episode.messages[-1]["content"]))
            step_rewards[i].append(float(reward))
            if done[i]:
                rewards[i] = float(reward)
            elif turn < turns:
                episode.add_messages([{"role": "user", "content": observe(observation)}])
            return done[i]

        self.play(episodes, turns, step)
        return [
            exp
            for episode, reward, over, steps in zip(episodes, rewards, done, step_rewards)
            for exp in self._steps(episode.experience(reward, self.task.uid), steps, over)
        ]

    def _steps(self, whole: Experience, step_rewards: list[float], over: bool) -> list[Experience]:
        """One experience per turn of an episode's: the context before the turn, the turn, the episode's reward."""
        episode = f"{self.task.uid}/{uuid.uuid4().hex}"  # unique in the run: a task may run twice in a step
        turns = whole.turns()
        out = []
        for k, (start, end) in enumerate(turns):
            metrics = {"step_reward": step_rewards[k] if k < len(step_rewards) else 0.0}
            metrics |= {"actual_env_steps": float(len(step_rewards)), "env_done": float(over)}
            out.append(
                Experience(
                    prompt_ids=whole.prompt_ids + whole.response_ids[:start],
                    response_ids=whole.response_ids[start:end],
                    logprobs=whole.logprobs[start:end],
                    reward=whole.reward,
                    group=whole.group,
                    weight_version=whole.weight_version,
                    metrics={"accuracy": whole.metrics["accuracy"], **metrics},
                    truncated=whole.truncated and k == len(turns) - 1,
                    episode=episode,
                )
            )
        return out
