"""step_wise_alfworld_workflow on a real TextWorld game with ALFWorld's own domain and grammar: a tiny stand-in of a
`game.tw-pddl` file of ALFWorld's data set (one apple, a countertop, a fridge; the task: put the apple in the fridge)
played by scripted replies through real conversations: the observations the model reads, its actions parsed, one
experience per step with the conversation before it as its prompt, the episode's reward on every step, an episode
id shared by its steps, and an episode that runs out of turns rewarded -0.1, as upstream's."""

import json
from importlib import resources

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from tests.runtime.workflows.scripted import Scripted, char_tokenizer  # noqa: E402
from trinity.config.schema.buffer import FormatConfig  # noqa: E402
from trinity.runtime.workflows import Task, load  # noqa: E402
from trinity.runtime.workflows.alfworld import NOT_DONE, SYSTEM, observe, parse_action  # noqa: E402
from trinity.runtime.workflows.base import check_args  # noqa: E402

APPLE = "Apple_bar__plus_00_dot_10_bar__plus_00_dot_90_bar__minus_01_dot_20"
COUNTER = "CounterTop_bar__minus_00_dot_50_bar__plus_00_dot_90_bar__minus_01_dot_00"
FRIDGE = "Fridge_bar__plus_01_dot_20_bar__plus_00_dot_00_bar__plus_00_dot_50"
START, AT_COUNTER, AT_FRIDGE = (
    "loc_bar_0_bar_0_bar_0_bar_30",
    "loc_bar_1_bar_0_bar_0_bar_30",
    "loc_bar_2_bar_0_bar_0_bar_30",
)
PROBLEM = f"""(define (problem standin)
 (:domain alfred)
 (:objects
  agent1 - agent
  {START} {AT_COUNTER} {AT_FRIDGE} - location
  {APPLE} - object
  {COUNTER} {FRIDGE} - receptacle
  AppleType - otype
  CounterTopType FridgeType - rtype
 )
 (:init
  (= (total-cost) 0)
  (atLocation agent1 {START})
  (receptacleAtLocation {COUNTER} {AT_COUNTER})
  (receptacleAtLocation {FRIDGE} {AT_FRIDGE})
  (objectAtLocation {APPLE} {AT_COUNTER})
  (inReceptacle {APPLE} {COUNTER})
  (pickupable {APPLE})
  (objectType {APPLE} AppleType)
  (receptacleType {COUNTER} CounterTopType)
  (receptacleType {FRIDGE} FridgeType)
  (canContain CounterTopType AppleType)
  (canContain FridgeType AppleType)
  (openable {FRIDGE})
 )
 (:goal (exists (?o - object) (and (objectType ?o AppleType) (inReceptacle ?o {FRIDGE}))))
)
"""
SOLVED = [
    "<think>The apple is on the countertop.</think><action>go to countertop 1</action>",
    "<action>take apple 1 from countertop 1</action>",
    "<action>go to fridge 1</action>",
    "<action>open fridge 1</action>",
    "<think>Put it in.</think><action>move apple 1 to fridge 1</action>",
]


@pytest.fixture(scope="module")
def game(tmp_path_factory):
    """The stand-in game file, laid out as ALFWorld's data set's: ALFWorld's own domain and grammar (the task filled in
    where the grammar leaves it, as alfworld's add_task_to_grammar does), a tiny problem."""
    data = resources.files("alfworld") / "data"
    grammar = (data / "alfred.twl2").read_text().replace("UNKNOWN GOAL", "put some apple in fridge")
    domain = (data / "alfred.pddl").read_text()
    path = tmp_path_factory.mktemp("alfworld") / "game.tw-pddl"
    path.write_text(json.dumps({"pddl_domain": domain, "grammar": grammar, "pddl_problem": PROBLEM, "solvable": True}))
    return path


@pytest.fixture(scope="module")
def tokenizer():
    return char_tokenizer()


def task(game, repeat: int, **args) -> Task:
    return Task("alf/0", {"game": str(game)}, FormatConfig(prompt_key="game"), repeat, args)


def test_actions_and_observations_as_upstream_reads_and_writes_them():
    assert parse_action("<think>hm</think><action> go to fridge 1 </action><action>look</action>") == "go to fridge 1"
    assert parse_action("go to fridge 1") == "" and parse_action("<action>look") == "look"
    assert observe("You see a fridge.") == "Observation: You see a fridge."
    assert observe("Nothing happens.").endswith(
        "Nothing happens.Please check if the action you take is valid or you have carefully followed the action format."
    )


def test_a_solved_game_is_one_experience_per_step_each_with_the_episodes_reward(tokenizer, game):
    steps = load("step_wise_alfworld_workflow")(task(game, 1), Scripted(tokenizer, [SOLVED])).run()
    assert len(steps) == 5 and [e.reward for e in steps] == [1.0] * 5  # the game's reward, on every step
    assert [e.metrics["step_reward"] for e in steps] == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert {(e.metrics["actual_env_steps"], e.metrics["env_done"]) for e in steps} == {(5.0, 1.0)}
    assert len({e.episode for e in steps}) == 1 and steps[0].episode.startswith("alf/0/")
    assert all(e.group == "alf/0" and e.action_mask is None and e.turns() == [(0, len(e.response_ids))] for e in steps)
    # a step's prompt is the whole conversation before it, as the model saw it; its response is its reply alone
    for before, after in zip(steps, steps[1:]):
        assert after.prompt_ids[: len(before.prompt_ids) + len(before.response_ids)] == (
            before.prompt_ids + before.response_ids
        )
    assert [tokenizer.decode(e.response_ids) for e in steps] == [reply + "<eos>" for reply in SOLVED]
    first, last = tokenizer.decode(steps[0].prompt_ids), tokenizer.decode(steps[-1].prompt_ids)
    assert first.startswith(f"system: {SYSTEM}user: Observation: -= Welcome to TextWorld, ALFRED! =-\n\nYou are in ")
    assert first.endswith(
        "you see a countertop 1, and a fridge 1.\n\nYour task is to: put some apple in fridge.assistant: "
    )
    assert last.endswith(
        "user: Observation: You open the fridge 1. The fridge 1 is open. In it, you see nothing.assistant: "
    )


def test_an_episode_out_of_turns_earns_upstreams_minus_a_tenth_on_every_step(tokenizer, game):
    lost = ["<action>take apple 1 from fridge 1</action>", "I am not sure.", "<action>go to fridge 1</action>"]
    model = Scripted(tokenizer, [SOLVED, lost])
    exps = load("step_wise_alfworld_workflow")(task(game, 2, max_env_steps=3), model).run()
    solved, failed = exps[:3], exps[3:]  # three turns are not enough for the first script either
    assert [e.reward for e in exps] == [NOT_DONE] * 6 and {e.metrics["env_done"] for e in exps} == {0.0}
    assert solved[0].episode != failed[0].episode and len({e.episode for e in failed}) == 1
    second = tokenizer.decode(failed[1].prompt_ids)
    assert second.endswith(
        "Observation: Nothing happens.Please check if the action you take is valid or you have "
        "carefully followed the action format.assistant: "
    )


def test_max_env_steps_is_checked_by_its_model():
    alfworld = load("step_wise_alfworld_workflow")
    assert alfworld.arguments == {"max_env_steps": 30}
    with pytest.raises(ValueError, match="max_env_steps: Input should be greater than 0"):
        check_args([alfworld], {"max_env_steps": 0})


def test_games_played_in_threads_at_once_each_play_whole(tokenizer, game):
    """The explorer runs workflows in threads: several games loaded and stepped at once (max_repeat_times_per_runner:
    1, or batches above one) each play to the end, as alone (TextWorld's loading is not thread-safe by itself)."""
    from concurrent.futures import ThreadPoolExecutor

    def play(_):
        return load("step_wise_alfworld_workflow")(task(game, 2), Scripted(tokenizer, [SOLVED, SOLVED])).run()

    with ThreadPoolExecutor(max_workers=6) as pool:
        played = list(pool.map(play, range(6)))
    assert [len(steps) for steps in played] == [10] * 6 and all(e.reward == 1.0 for s in played for e in s)
