"""Trinity-RFT's math workflows beyond math_workflow: math_rm_workflow (chat, the reward reads the conversation,
rewards summed), math_boxed_workflow (its system prompts, use_base's plain-text prompt, math_boxed_reward taking
with_think from workflow_args, a cut reply not trained on) and the async twins, each the same workflow."""

import pytest

from trinity.config.schema.buffer import FormatConfig
from trinity.config.workflows import WORKFLOWS
from trinity.runtime.rewards import BoundReward, bind
from trinity.runtime.workflows import Completion, Task, load
from trinity.runtime.workflows.base import check_args
from trinity.runtime.workflows.math_boxed import BOXED, BOXED_WITH_THINK


class Model:
    """Stands in for the rollout engines with fixed replies, recording what each call was asked: these tests are about
    prompting and scoring, not generating. A reply in `cut` reached its token budget."""

    tokenizer = None

    def __init__(self, texts, cut=()):
        self.texts, self.cut, self.asked = texts, set(cut), []

    def _replies(self, n):
        return [Completion([1], [2, 3], [-0.1, -0.2], t, 5, stopped=t not in self.cut) for t in self.texts[:n]]

    def chat(self, task, messages, n, tools=None):
        self.asked.append(("chat", messages))
        return self._replies(n)

    def generate(self, prompt, n):
        self.asked.append(("generate", prompt))
        return self._replies(n)


def task(repeat=2, workflow_args=None, reward_fn=None, **fmt):
    fmt = FormatConfig(**{"prompt_key": "question", "response_key": "answer", **fmt})
    row = {"question": "What is 2+2?", "answer": "4"}
    return Task("gsm8k/0", row, fmt, repeat, workflow_args or {}, reward_fn=reward_fn)


def test_the_async_twins_are_their_workflows():
    assert WORKFLOWS["async_math_workflow"] == WORKFLOWS["math_workflow"]
    assert WORKFLOWS["async_math_rm_workflow"] == WORKFLOWS["math_rm_workflow"]
    assert WORKFLOWS["async_math_boxed_workflow"] == WORKFLOWS["math_boxed_workflow"]
    assert load("async_math_workflow") is load("math_workflow")


def test_math_rm_chats_and_its_reward_reads_the_conversation_it_answers():
    seen = []

    def judge(response, truth, messages):
        seen.append((response, truth, messages))
        return {"raw": 3.0, "reward": 1.0 if "4" in response else 0.0}

    model = Model(["It is 4.", "5"])
    t = task(system_prompt="Be brief.", reply_prefix="Answer:", reward_fn=BoundReward("judge", judge, {}))
    exps = load("math_rm_workflow")(t, model).run()
    opening = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
    assert model.asked == [("chat", opening)]  # one call for every rollout
    # the reward sees the conversation as asked: the reply prefix is the assistant's opening, as upstream's messages
    assert seen[0] == ("It is 4.", "4", [*opening, {"role": "assistant", "content": "Answer:"}])
    assert [e.reward for e in exps] == [4.0, 3.0]  # the sum of the scores, as upstream's MathRMWorkflow
    assert exps[0].metrics == {"accuracy": 4.0, "raw": 3.0, "reward": 1.0}


def test_math_rm_has_no_reward_of_its_own():
    with pytest.raises(ValueError, match="MathRMWorkflow has no reward function: name one"):
        load("math_rm_workflow")(task(), Model(["4"])).run()
    exps = load("math_rm_workflow")(task(reward_fn=bind("math_reward", {})), Model(["#### 4", "3"])).run()
    assert [e.reward for e in exps] == [1.0, 0.0]  # trinity's rewards take the truth as any workflow gives it


def test_math_boxed_asks_for_a_boxed_answer_and_scores_with_math_boxed_reward():
    model = Model(["so \\boxed{4}", "\\boxed{5}"])
    exps = load("math_boxed_workflow")(task(), model).run()
    assert model.asked == [
        ("chat", [{"role": "system", "content": BOXED}, {"role": "user", "content": "What is 2+2?"}])
    ]
    assert [e.reward for e in exps] == [1.0, 0.0]
    assert [e.action_mask for e in exps] == [None, None] and exps[0].metrics["response_truncated"] == 0.0
    own = Model(["\\boxed{4}"])
    load("math_boxed_workflow")(task(1, system_prompt="Mine."), own).run()
    assert own.asked[0][1][0] == {"role": "system", "content": "Mine."}  # the taskset's system prompt wins


def test_with_think_comes_from_workflow_args_and_changes_the_prompt_and_the_penalty():
    model = Model(["\\boxed{4}", "<think>2+2</think> \\boxed{4}"])
    args = {"with_think": True, "format_score_coef": 0.25}
    exps = load("math_boxed_workflow")(task(workflow_args=args), model).run()
    assert model.asked[0][1][0]["content"] == BOXED_WITH_THINK
    assert [e.reward for e in exps] == [0.75, 1.0]  # the reply without <think> loses format_score_coef
    named = bind("math_boxed_reward", {"with_think": False})  # upstream passes workflow_args' with every call
    exps = load("math_boxed_workflow")(task(workflow_args=args, reward_fn=named), Model(["\\boxed{4}"])).run()
    assert [e.reward for e in exps] == [0.75]


def test_use_base_prompts_with_plain_text():
    model = Model(["\\boxed{4}"])
    load("math_boxed_workflow")(task(1, workflow_args={"use_base": True}), model).run()
    assert model.asked == [("generate", f"System:{BOXED}\nUser:\nWhat is 2+2?\nAssistant:\n")]


def test_another_reward_replaces_math_boxed_reward():
    dapo = bind("math_dapo_reward", {})
    exps = load("math_boxed_workflow")(task(reward_fn=dapo), Model(["\\boxed{4}", "\\boxed{3}"])).run()
    assert [e.reward for e in exps] == [1.0, -1.0]


def test_a_reply_cut_at_its_budget_counts_in_its_group_but_is_not_trained():
    exps = load("math_boxed_workflow")(
        task(), Model(["\\boxed{4}", "\\boxed{4} and then"], cut=["\\boxed{4} and then"])
    ).run()
    assert [e.reward for e in exps] == [1.0, 1.0]
    assert exps[0].action_mask is None and exps[1].action_mask == [0, 0]
    assert [e.metrics["response_truncated"] for e in exps] == [0.0, 1.0]


def test_math_boxed_workflow_args_are_checked_by_their_model():
    boxed = load("math_boxed_workflow")
    assert boxed.arguments == {"use_base": False, "with_think": False, "format_score_coef": 0.1}
    with pytest.raises(ValueError, match=r"'use_bse': no workflow of it reads them \(MathBoxedWorkflow reads use_base"):
        check_args([boxed], {"use_bse": True})
    with pytest.raises(ValueError, match="workflow_args.format_score_coef: Input should be greater than or equal to 0"):
        check_args([boxed], {"format_score_coef": -1})
    with pytest.raises(ValueError, match="workflow_args.use_base: Input should be a valid boolean"):
        check_args([boxed], {"use_base": "perhaps"})


# --- math_ruler_workflow: its judge is the first auxiliary model, asked through the real openai client ---------------


def _judge_client(url: str):
    import openai

    client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)
    client.model_path = "/models/judge"  # as the explorer names an auxiliary model's clients
    return client


def test_math_ruler_rewards_the_judges_scores_and_reports_the_references(monkeypatch):
    from tests.runtime.rewards.judge_standin import judge_standin

    def scores(request):
        assert "Candidate solution 2: 5" in request["messages"][-1]["content"]
        return "The first is right. [1.0, 0.25]"

    model = Model(["#### 4", "5"])
    with judge_standin(scores) as (url, seen):
        model.auxiliary_models = [_judge_client(url)]
        exps = load("math_ruler_workflow")(task(), model).run()
    assert [r["model"] for r in seen] == ["/models/judge"]  # one judge call for the task's group
    assert seen[0]["messages"][0]["role"] == "system" and "What is 2+2?" in seen[0]["messages"][1]["content"]
    assert [e.reward for e in exps] == [1.0, 0.25]
    assert [e.metrics["gold_reward"] for e in exps] == [1.0, 0.0]  # math_reward against the reference, reported
    assert all(e.metrics["judge_success"] == 1.0 for e in exps)


@pytest.mark.parametrize("reply", ["no list at all", "[1.0]", "[1, 'x']", "[__import__('os')]"])
def test_a_judges_reply_without_a_score_for_each_answer_gives_zeros(reply):
    from tests.runtime.rewards.judge_standin import judge_standin

    model = Model(["#### 4", "5"])
    with judge_standin(lambda request: reply) as (url, _):
        model.auxiliary_models = [_judge_client(url)]
        exps = load("math_ruler_workflow")(task(), model).run()
    assert [e.reward for e in exps] == [0.0, 0.0] and all(e.metrics["judge_success"] == 0.0 for e in exps)


def test_scores_are_clipped_to_the_unit_interval():
    from trinity.runtime.workflows.math_ruler import scores_in

    assert scores_in("so: [1.5, -2, 0.5]", 3) == [1.0, 0.0, 0.5]
    assert scores_in("[True, 1]", 2) is None


def test_math_ruler_without_an_auxiliary_model_says_what_to_set():
    with pytest.raises(ValueError, match="set explorer.auxiliary_models"):
        load("math_ruler_workflow")(task(), Model(["4"])).run()
