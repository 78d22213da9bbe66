"""frozen_lake_workflow on gymnasium's real FrozenLakeEnv: the lakes a row's size, p and seed generate (upstream's
draws), the observations the model reads, its moves parsed from backticks, episodes ending on the goal, in a hole or
out of turns, each one experience of the model's turns only; a judge's reward replacing the lake's, and the lake's
standing when the judge fails. The conversations and their tokens are real (a character tokenizer made here)."""

import pytest

pytest.importorskip("gymnasium")

from tests.runtime.rewards.judge_standin import judge_standin  # noqa: E402
from tests.runtime.workflows.scripted import Scripted, char_tokenizer  # noqa: E402
from trinity.config.schema.buffer import FormatConfig  # noqa: E402
from trinity.runtime.workflows import Task, load  # noqa: E402
from trinity.runtime.workflows.frozen_lake import INVALID, SYSTEM, observe  # noqa: E402
from trinity.runtime.workflows.frozen_lake_env import Lake, generate, parse_action, reachable  # noqa: E402

LAKE = ["SFF", "FHF", "FFG"]


@pytest.fixture(scope="module")
def tokenizer():
    return char_tokenizer("√")


def lake_task(repeat: int, row: dict | None = None, **args) -> Task:
    return Task("lake/0", row or {"seed": 3}, FormatConfig(), repeat, args)


def test_a_generated_lake_is_upstreams_and_has_a_path_within_the_bound():
    # upstream's generate_random_map(4, 0.8, seed 42, max_steps 8) draws this lake (checked against its code)
    assert generate(4, 0.8, 42, 8) == ["FFSF", "FHFF", "FFFH", "GHFF"]
    for seed in range(20):
        rows = generate(5, 0.6, seed, 4)
        board = [list(r) for r in rows]
        start = next((r, c) for r, row in enumerate(rows) for c, cell in enumerate(row) if cell == "S")
        assert "".join(rows).count("G") == 1 and reachable(board, start, 4)
    with pytest.raises(ValueError, match="a frozen lake's size is at least 2"):
        generate(1, 0.8, 42, 8)  # upstream's default size would draw forever


def test_moves_are_read_from_the_last_backticks():
    assert [parse_action(t) for t in ("so ```Up```", "```left``` no, ```2```", "``` RIGHT ```", "```3")] == [4, 2, 3, 0]
    assert [parse_action(t) for t in ("Up", "```jump```", "```5```")] == [0, 0, 0]


def test_the_lake_as_the_model_reads_it():
    lake = Lake.make(LAKE, slippery=False, seed=0)
    assert lake.render() == " P \t _ \t _ \t\n _ \t O \t _ \t\n _ \t _ \t G \t"
    assert lake.step(2) == (0.0, False)  # down
    assert lake.step(3) == (0.0, True)  # right: into the hole
    assert lake.render() == " _ \t _ \t _ \t\n _ \t X \t _ \t\n _ \t _ \t G \t"


def test_episodes_end_on_the_goal_in_a_hole_or_out_of_turns(tokenizer):
    scripts = [
        ["```Right```", "```Right```", "Now ```Down```", "```down```"],  # the goal in 4 moves
        ["```Down```", "```Right```"],  # into the hole
        ["I wait.", "```Up```", "```Left```", "```Left```"],  # no move, then into the wall: out of turns
    ]
    model = Scripted(tokenizer, scripts)
    goal, hole, lost = load("frozen_lake_workflow")(lake_task(3, desc=LAKE, agent_max_steps=4), model).run()
    assert [e.reward for e in (goal, hole, lost)] == [1.0, 0.0, 0.0]
    assert [(e.metrics["env_steps"], e.metrics["env_done"]) for e in (goal, hole, lost)] == [(4, 1), (2, 1), (4, 0)]
    assert [e.metrics["turns"] for e in (goal, hole, lost)] == [4, 2, 4]
    # the model's replies are trained, the lake's observations are not; nothing follows the last reply
    for e in (goal, hole, lost):
        assert len(e.turns()) == e.metrics["turns"] and e.action_mask[-1] == 1
    text = tokenizer.decode(lost.prompt_ids + lost.response_ids)
    assert text.startswith(f"system: {SYSTEM}user: Current Observation (0): \n P \t _ \t _ \t\n")
    assert "The maximum number of steps remaining is 4." in text
    assert observe(Lake.make(LAKE, False, 0), 1, 4, INVALID) in text  # "I wait." changed nothing
    assert text.count("Your last response is invalid") == 3  # the wait, then Up and Left into the wall


def test_a_generated_lake_from_the_rows_size_p_and_seed(tokenizer):
    model = Scripted(tokenizer, [["```Up```"]])
    (exp,) = load("frozen_lake_workflow")(
        lake_task(1, {"size": 4, "p": 0.8, "seed": 42}, agent_max_steps=1), model
    ).run()
    opening = tokenizer.decode(exp.prompt_ids)
    assert " _ \t _ \t P \t _ \t\n _ \t O \t _ \t _ \t\n _ \t _ \t _ \t O \t\n G \t O \t _ \t _ \t" in opening


def test_a_judge_scores_the_whole_conversation_and_the_lake_stands_when_it_fails(tokenizer, monkeypatch):
    args = {
        "desc": LAKE,
        "agent_max_steps": 1,
        "reward_fn_type": "trajectory_accuracy_grader_reward",
        "reward_fn_args": {"judge_api_base_url_env": "LAKE_JUDGE"},
    }
    with judge_standin(lambda request: '{"reason": "close", "score": 2}') as (url, seen):
        monkeypatch.setenv("LAKE_JUDGE", url)
        (exp,) = load("frozen_lake_workflow")(lake_task(1, **args), Scripted(tokenizer, [["```Right```"]])).run()
    assert exp.reward == 0.5  # the judge's normalised grade replaces the lake's 0
    shown = seen[0]["messages"][-1]["content"]
    assert "[system] You are a helpful assistant walking on a frozen lake." in shown
    assert "[assistant] ```Right```\n</trajectory>" in shown  # the conversation ends with the model's move
    monkeypatch.setenv("LAKE_JUDGE", "http://127.0.0.1:9/v1")  # nothing answers: upstream keeps the lake's reward
    args["agent_max_steps"] = 4
    (exp,) = load("frozen_lake_workflow")(
        lake_task(1, **args), Scripted(tokenizer, [["```Right```", "```Right```", "```Down```", "```Down```"]])
    ).run()
    assert exp.reward == 1.0


def test_frozen_lake_workflow_args_are_checked_by_their_model():
    from trinity.runtime.workflows.base import check_args

    lake = load("frozen_lake_workflow")
    assert lake.arguments["env_max_steps"] == 8 and lake.arguments["agent_max_steps"] == 10
    for bad, message in [
        ({"desc": ["SF", "FGG"]}, "rows of one length"),
        ({"desc": ["SX", "FG"]}, "found 'X'"),
        ({"desc": ["FF", "FG"]}, "exactly one start"),
        ({"agent_max_steps": 0}, "agent_max_steps: Input should be greater than 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_args([lake], bad)
