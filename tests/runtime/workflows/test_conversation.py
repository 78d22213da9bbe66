"""Multi-turn episodes as the model saw them: the model's ids kept as generated, the environment's turns rendered by
the chat template after the reply, each token marked as the model's (trained) or the environment's; the context
limit; and arith_feedback_workflow's episodes, checked token by token."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trinity.config.schema.buffer import FormatConfig
from trinity.runtime.workflows import Task, load
from trinity.runtime.workflows.conversation import ChatTemplate, Conversation, ConversationError

# the example's template (examples/arith_feedback): each message as written, the model's turns closed by <eos>
PLAIN = "{% for m in messages %}{{ m['content'] }}{% if m['role'] == 'assistant' %}<eos>{% endif %}{% endfor %}"
# a template that closes a turn with more than the end-of-sequence token, as Qwen's "<|im_end|>\n" does
CLOSED = "{% for m in messages %}{{ m['content'] }}{% if m['role'] == 'assistant' %}<eos>={% endif %}{% endfor %}"


@pytest.fixture(scope="module")
def tokenizer(demo_assets):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(demo_assets / "model-feedback")


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def tokens(tokenizer, conversation):
    """(token, mask) of each response token."""
    return list(zip(tokenizer.convert_ids_to_tokens(conversation.response_ids), conversation.action_mask))


def reply(conversation, tokenizer, text, ended=True, version=1):
    body = ids(tokenizer, text) + ([tokenizer.eos_token_id] if ended else [])
    conversation.add_reply(body, [-0.5] * len(body), text, version)


def test_the_models_tokens_are_trained_and_the_feedback_is_not(tokenizer):
    talk = Conversation(ChatTemplate(tokenizer, PLAIN), [{"role": "user", "content": "12+34="}], limit=24)
    assert tokenizer.convert_ids_to_tokens(talk.prompt_ids) == list("12+34=")
    reply(talk, tokenizer, "45")
    assert talk.add_messages([{"role": "user", "content": "<"}])
    reply(talk, tokenizer, "46", version=2)
    assert tokens(tokenizer, talk) == [("4", 1), ("5", 1), ("<eos>", 1), ("<", 0), ("4", 1), ("6", 1), ("<eos>", 1)]
    assert talk.context() == ids(tokenizer, "12+34=45<eos><46<eos>")  # what a one-shot rendering would give
    exp = talk.experience(1.0, "t/0")
    assert exp.action_mask == [1, 1, 1, 0, 1, 1, 1] and exp.logprobs == [-0.5] * 3 + [0.0] + [-0.5] * 3
    assert (exp.weight_version, exp.metrics, exp.truncated) == (2, {"accuracy": 1.0, "turns": 2.0}, False)


def test_turns_rewarded_on_their_own_leave_the_rest_of_the_episodes_reward_to_the_last(tokenizer):
    talk = Conversation(ChatTemplate(tokenizer, PLAIN), [{"role": "user", "content": "12+34="}])
    with pytest.raises(ConversationError, match="add a reply first"):
        talk.reward_turn(0.5)
    reply(talk, tokenizer, "45")
    talk.reward_turn(-0.25)
    talk.add_messages([{"role": "user", "content": "<"}])
    reply(talk, tokenizer, "46")
    exp = talk.experience(1.0, "t/0")  # the last turn's share is what the episode's total leaves
    assert (exp.turn_rewards, exp.reward, exp.turns()) == ([-0.25, 1.25], 1.0, [(0, 3), (4, 7)])
    talk.reward_turn(0.5)
    assert talk.experience(0.25, "t/0").turn_rewards == [-0.25, 0.5]
    with pytest.raises(ConversationError, match="reward_turn gave the last turn 0.5, and the episode's reward 2.0"):
        talk.experience(2.0, "t/0")  # the turns' rewards are part of the total, not added to it
    unrewarded = Conversation(ChatTemplate(tokenizer, PLAIN), [{"role": "user", "content": "1+2="}])
    reply(unrewarded, tokenizer, "3")
    assert unrewarded.experience(1.0, "t/0").turn_rewards is None  # the reward is the last turn's alone


def test_replies_with_nothing_between_them_are_one_turn_and_an_empty_one_none(tokenizer):
    talk = Conversation(ChatTemplate(tokenizer, PLAIN), [{"role": "user", "content": "1+2="}])
    reply(talk, tokenizer, "1", ended=False)
    talk.reward_turn(0.25)
    talk.add_reply([], [], "", 1)  # no tokens: no turn of its own
    reply(talk, tokenizer, "2")  # continues the reply: the same turn
    talk.reward_turn(0.25)
    talk.add_messages([{"role": "user", "content": ">"}])
    reply(talk, tokenizer, "3")
    exp = talk.experience(1.0, "t/0")
    assert (exp.turns(), exp.turn_rewards) == ([(0, 3), (4, 6)], [0.5, 0.5])


def test_a_reply_cut_before_its_end_gets_the_templates_closing_from_the_environment(tokenizer):
    talk = Conversation(ChatTemplate(tokenizer, CLOSED), [{"role": "user", "content": "1+2="}])
    reply(talk, tokenizer, "3")  # ended: its <eos> closes the turn, the "=" after it is the template's
    talk.add_messages([{"role": "user", "content": "?"}])
    reply(talk, tokenizer, "99", ended=False)  # cut at max_tokens: the whole closing is the environment's
    talk.add_messages([{"role": "user", "content": ">"}])
    reply(talk, tokenizer, "3")
    assert tokens(tokenizer, talk) == [
        *[("3", 1), ("<eos>", 1), ("=", 0), ("?", 0)],
        *[("9", 1), ("9", 1), ("<eos>", 0), ("=", 0), (">", 0)],
        *[("3", 1), ("<eos>", 1)],
    ]


def test_the_environments_last_words_are_not_part_of_the_experience(tokenizer):
    talk = Conversation(ChatTemplate(tokenizer, PLAIN), [{"role": "user", "content": "1+2="}])
    reply(talk, tokenizer, "4")
    talk.add_messages([{"role": "user", "content": ">"}])
    exp = talk.experience(0.0, "t/0")
    assert tokenizer.convert_ids_to_tokens(exp.response_ids) == ["4", "<eos>"] and exp.action_mask == [1, 1]


def test_a_turn_past_the_context_ends_the_conversation_as_truncated(tokenizer):
    talk = Conversation(ChatTemplate(tokenizer, PLAIN), [{"role": "user", "content": "12+34="}], limit=10)
    reply(talk, tokenizer, "45")  # 9 tokens: the feedback would leave no room for a reply
    assert talk.room() == 1
    assert not talk.add_messages([{"role": "user", "content": "<"}])
    exp = talk.experience(0.0, "t/0")
    assert exp.truncated and exp.metrics["truncated"] == 1.0 and len(exp.response_ids) == 3
    with pytest.raises(ConversationError, match=r"first prompt is 6 tokens, and the context \(max_model_len\) holds 6"):
        Conversation(ChatTemplate(tokenizer, PLAIN), [{"role": "user", "content": "12+34="}], limit=6)


def test_templates_that_cannot_grow_a_conversation_are_refused_by_what_is_wrong(tokenizer):
    with pytest.raises(ConversationError, match="needs a chat template.*model.custom_chat_template"):
        Conversation(ChatTemplate(tokenizer), [{"role": "user", "content": "1+2="}])
    # a template that drops earlier replies (as some do with reasoning) rewrites the past
    dropping = (
        "{% for m in messages %}{% if m['role'] != 'assistant' or loop.last %}{{ m['content'] }}{% endif %}{% endfor %}"
    )
    talk = Conversation(ChatTemplate(tokenizer, dropping), [{"role": "user", "content": "1+2="}])
    reply(talk, tokenizer, "3")
    with pytest.raises(ConversationError, match="changes a reply's turn when a turn is added"):
        talk.add_messages([{"role": "user", "content": "?"}])
    fresh = Conversation(ChatTemplate(tokenizer, PLAIN), [{"role": "user", "content": "1+2="}])
    with pytest.raises(ConversationError, match="add a reply first"):
        fresh.add_messages([{"role": "user", "content": "?"}])


@given(st.lists(st.tuples(st.sampled_from(["1", "23", "456"]), st.booleans(), st.sampled_from("<>?")), max_size=4))
def test_the_context_is_the_prompt_then_the_turns_in_order_and_the_mask_marks_exactly_the_replies(turns):
    from transformers import AutoTokenizer

    from trinity import demo

    tokenizer = _property_tokenizer(AutoTokenizer, demo)
    talk = Conversation(ChatTemplate(tokenizer, CLOSED), [{"role": "user", "content": "9+9="}])
    replies = []
    for text, ended, feedback in turns:
        reply(talk, tokenizer, text, ended)
        replies.append(ids(tokenizer, text) + ([tokenizer.eos_token_id] if ended else []))
        talk.add_messages([{"role": "user", "content": feedback}])
    assert [t for t, m in zip(talk.response_ids, talk.action_mask) if m] == [t for r in replies for t in r]
    assert sum(talk.action_mask) == sum(map(len, replies)) and len(talk.logprobs) == len(talk.response_ids)
    assert talk.context()[: len(talk.prompt_ids)] == ids(tokenizer, "9+9=")


_TOKENIZERS: dict = {}


def _property_tokenizer(auto, demo):
    """The feedback vocabulary without the session's files (hypothesis runs outside fixtures)."""
    if "t" not in _TOKENIZERS:
        _TOKENIZERS["t"] = demo._tokenizer(demo.problems(0)[0], demo.FEEDBACK)
    return _TOKENIZERS["t"]


class Played:
    """Stands in for the rollout engines with scripted replies, one script per episode in the order they open; the
    conversations are the real ones."""

    def __init__(self, tokenizer, scripts):
        self.tokenizer, self.scripts, self.calls, self.opened = tokenizer, scripts, [], {}

    def conversation(self, task, messages=None):
        talk = Conversation(ChatTemplate(self.tokenizer, PLAIN), [{"role": "user", "content": task.row["prompt"]}], 24)
        self.opened[id(talk)] = list(self.scripts[len(self.opened)])
        return talk

    def reply(self, conversations):
        self.calls.append(len(conversations))
        for talk in conversations:
            reply(talk, self.tokenizer, self.opened[id(talk)].pop(0), True, 3)


def feedback_task(repeat, **args):
    fmt = FormatConfig(prompt_type="plaintext", prompt_key="prompt", response_key="response")
    return Task("arith/train/0", {"prompt": "12+34=", "response": "46"}, fmt, repeat, workflow_args=args)


def test_arith_feedback_episodes_token_by_token(tokenizer):
    """Three episodes play in step: solved at once, solved on the third turn after "<" and "?", never solved."""
    model = Played(tokenizer, [["46"], ["40", "+", "46"], ["50", "47", "48"]])
    first, third, never = load("arith_feedback_workflow")(feedback_task(3), model).run()
    assert model.calls == [3, 2, 2]  # one call per turn, for the episodes still playing
    assert [e.reward for e in (first, third, never)] == pytest.approx([1.0, 1 / 3, 0.0])  # a retry is worth less
    assert [e.metrics["accuracy"] for e in (first, third, never)] == [1.0, 1.0, 0.0]  # success within max_turns
    assert [e.metrics["first_try"] for e in (first, third, never)] == [1.0, 0.0, 0.0]
    assert [e.metrics["turns"] for e in (first, third, never)] == [1.0, 3.0, 3.0]
    pairs = lambda e: list(zip(tokenizer.convert_ids_to_tokens(e.response_ids), e.action_mask))  # noqa: E731
    assert pairs(first) == [("4", 1), ("6", 1), ("<eos>", 1)]
    assert pairs(third) == [
        *[("4", 1), ("0", 1), ("<eos>", 1), ("<", 0)],
        *[("+", 1), ("<eos>", 1), ("?", 0)],
        *[("4", 1), ("6", 1), ("<eos>", 1)],
    ]
    assert pairs(never) == [
        *[("5", 1), ("0", 1), ("<eos>", 1), (">", 0)],
        *[("4", 1), ("7", 1), ("<eos>", 1), (">", 0)],
        *[("4", 1), ("8", 1), ("<eos>", 1)],  # the last turn gets no feedback: the episode is over
    ]
    assert all(e.group == "arith/train/0" and e.weight_version == 3 for e in (first, third, never))


def test_a_template_that_marks_only_the_last_reply_still_grows_a_conversation(tokenizer):
    """Qwen3 writes an empty think block before the last assistant turn only: the text before a reply may change as
    turns are added; the episode keeps its own ids for it, and only what follows the reply must agree."""
    marked = (
        "{% for m in messages %}{% if m['role'] == 'assistant' %}{% if loop.last %}=={% endif %}{{ m['content'] }}"
        "<eos>{% else %}{{ m['content'] }}{% endif %}{% endfor %}"
    )
    talk = Conversation(ChatTemplate(tokenizer, marked), [{"role": "user", "content": "1+2="}])
    reply(talk, tokenizer, "4")
    assert talk.add_messages([{"role": "user", "content": ">"}])
    assert tokens(tokenizer, talk) == [("4", 1), ("<eos>", 1), (">", 0)]


def test_arith_feedback_reads_its_arguments_and_refuses_others():
    from trinity.runtime.workflows.base import check_args

    feedback, arith = load("arith_feedback_workflow"), load("arith_workflow")
    assert feedback.arguments == {"max_turns": 3, "too_low": "<", "too_high": ">", "not_a_number": "?"}
    check_args([feedback, arith], {"max_turns": 5})  # a mixed taskset: read by one of its workflows
    with pytest.raises(ValueError, match=r"'max_turn': no workflow of it reads them \(ArithFeedbackWorkflow reads "):
        check_args([feedback], {"max_turn": 5})
    with pytest.raises(ValueError, match=r"\(ArithWorkflow reads none\)"):
        check_args([arith], {"max_turns": 5})
    with pytest.raises(ValueError, match=r"workflow_args.max_turns is '3x'; it takes a int \(default 3\)"):
        check_args([feedback], {"max_turns": "3x"})
    with pytest.raises(ValueError, match=r"workflow_args.max_turns is 0; it takes a whole number of at least 1"):
        check_args([feedback], {"max_turns": 0})


def test_arith_feedback_stops_after_max_turns(tokenizer):
    model = Played(tokenizer, [["40", "46"]])
    (exp,) = load("arith_feedback_workflow")(feedback_task(1, max_turns=1), model).run()
    assert model.calls == [1] and exp.reward == 0.0 and exp.metrics["turns"] == 1.0 and exp.action_mask == [1, 1, 1]
