"""What the engines said of each reply (top-k log-probs, whether it stopped) completes the experiences a workflow
returns: through the model client, for a single-turn workflow and for a conversation's turns."""

import pytest

from tests.runtime.explorer.test_role import client as plain_client
from tests.runtime.explorer.test_role import explorer  # noqa: F401 (the fixture)
from trinity.runtime.experience import Experience
from trinity.runtime.explorer.model_client import ModelClient
from trinity.runtime.explorer.replies import Replies
from trinity.runtime.rollout.samples import Sample


def top(*ids):
    return {i: -0.1 * (n + 1) for n, i in enumerate(ids)}


class TopK:
    """Stands in for an engine's gatherer: answers each request with tokens 7, 8 (stopped where the budget allows
    more) and two likeliest tokens at each (the engine is not what this test is about)."""

    def __init__(self, stop=True):
        self.stop = stop

    def generate(self, ids, n, sampling):
        return 1, [Sample([7, 8], [-0.5, -0.5], "78", self.stop, [top(7, 3), top(8, 4)]) for _ in range(n)]

    def generate_each(self, requests):
        return [self.generate(ids, n, s) for ids, n, s in requests]


def model_client(role, engine):
    ts = role.train[0]
    return ModelClient(engine, role.tokenizer, ts.sampling, role.config.explorer.rollout_model, None), ts


def test_a_completions_experience_gets_its_top_logprobs(explorer):  # noqa: F811
    role = explorer()
    chat, ts = model_client(role, TopK())
    [completion] = chat.generate("1+1=", 1)
    made = Experience(completion.prompt_ids, completion.response_ids, completion.logprobs, 1.0, "g")
    done = chat.replies.complete(made)
    assert done.top_logprobs == [top(7, 3), top(8, 4)] and done.truncated is False
    assert done.logprobs == made.logprobs  # what the trainer reads is unchanged
    cut, _ = model_client(role, TopK(stop=False))
    [completion] = cut.generate("1+1=", 1)
    assert cut.replies.complete(Experience(completion.prompt_ids, completion.response_ids)).truncated is True


@pytest.mark.parametrize("stop", [True, False])
def test_a_conversations_turns_get_theirs_and_the_environments_tokens_none(explorer, stop):  # noqa: F811
    role = explorer("model.custom_chat_template='{% for m in messages %}{{ m.content }}{% endfor %}'")
    chat, ts = model_client(role, TopK(stop))
    talk = chat.conversation(ts.tasks[0])
    chat.reply([talk])
    talk.add_messages([{"role": "user", "content": "9"}])
    chat.reply([talk])
    done = chat.replies.complete(talk.experience(1.0, "g"))
    tops = done.top_logprobs
    assert [t for t, own in zip(tops, done.mask()) if own] == [top(7, 3), top(8, 4)] * 2
    assert all(t == {} for t, own in zip(tops, done.mask()) if not own)
    assert done.truncated is not stop  # the last reply ended at its budget


def test_an_experience_whose_tokens_no_reply_made_is_left_as_it_is():
    replies = Replies()
    replies.add([1], [Sample([7, 8], [-0.5, -0.5], "", True, [top(7), top(8)])])
    other = Experience([1], [7, 9])
    assert replies.complete(other) == other  # a workflow's own tokens (or the OpenAI endpoint's)
    longer = Experience([1], [7, 8, 9, 9], action_mask=[1, 1, 1, 1])
    assert replies.complete(longer) == longer  # its last tokens came from no reply kept here


def test_without_top_k_only_the_cut_is_marked(explorer):  # noqa: F811
    role = explorer()
    ts = role.train[0]
    assert ts.sampling.logprobs == 0  # the demo asks for none
    replies = Replies()
    replies.add([1], [Sample([7, 8], [-0.5, -0.5], "", False)])
    done = replies.complete(Experience([1], [7, 8]))
    assert done.top_logprobs is None and done.truncated is True
    assert plain_client(role, ts).replies.by_context == {}
