"""The engines' OpenAI endpoint, driven by the real `openai` package over HTTP: the transformers engine's answers with
the ids and log-probs it generated, every call recorded by session, tool calls parsed in the configured format, each
bad request refused by name; and the ReAct agent's episode over it, token by token."""

import asyncio
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")

from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.runtime.rollout import episodes  # noqa: E402
from trinity.runtime.rollout.base import RolloutEngine  # noqa: E402
from trinity.runtime.rollout.history import SAMPLING_HEADER, SESSION_HEADER, History, RecordedCall  # noqa: E402
from trinity.runtime.rollout.samples import Sample  # noqa: E402
from trinity.runtime.rollout.transformers_engine import TransformersEngine  # noqa: E402
from trinity.runtime.workflows.calculator import calculate  # noqa: E402
from trinity.runtime.workflows.react import react  # noqa: E402
from trinity.runtime.workflows.toolbox import Toolbox  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
CALCULATE = Toolbox({"calculate": calculate}).schemas()


def config_of(demo_assets, monkeypatch, *overrides):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    example = REPO / "examples/arith_react/arith_react.yaml"
    return resolve(Request(example, ("hardware=cpu", *overrides))).stage("grpo")


def serve(engine, model_path, body):
    """Set the engine up, then run `body(url)` in its event loop (the endpoint answers while the body awaits)."""

    async def main():
        info = await engine.setup(str(model_path), 3)
        return await body(info["openai_url"])

    return asyncio.run(main())


@pytest.fixture
def engine(demo_assets, monkeypatch):
    config = config_of(demo_assets, monkeypatch)
    return TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)


def client(url, session="s1", **headers):
    return openai.AsyncOpenAI(base_url=url, api_key="EMPTY", default_headers={SESSION_HEADER: session, **headers})


def test_a_chat_answer_carries_the_engines_ids_and_logprobs_and_is_recorded(engine, demo_assets):
    async def body(url):
        api = client(url)
        name = (await api.models.list()).data[0].id
        messages = [{"role": "user", "content": "12+34+56="}]
        answer = await api.chat.completions.create(
            model=name,
            messages=messages,
            temperature=0.7,
            logprobs=True,
            extra_body={"return_token_ids": True, "min_tokens": 0},
        )
        return name, answer, engine.history("s1"), engine.history("s1")

    name, answer, recorded, again = serve(engine, demo_assets / "model-tools", body)
    assert name == engine.config.explorer.rollout_model.model_path
    choice, extra = answer.choices[0], answer.model_extra
    prompt = engine.tokenizer("12+34+56=", add_special_tokens=False)["input_ids"]  # the template writes it as is
    assert extra["prompt_token_ids"] == prompt and extra["weight_version"] == 3
    ids, logprobs = choice.model_extra["token_ids"], [t.logprob for t in choice.logprobs.content]
    assert len(ids) == len(logprobs) == answer.usage.completion_tokens and 1 <= len(ids) <= 12  # max_response_tokens
    assert [t.token for t in choice.logprobs.content] == engine.tokenizer.convert_ids_to_tokens(ids)
    assert choice.finish_reason == ("stop" if ids[-1] == engine.tokenizer.eos_token_id else "length")
    assert recorded == [RecordedCall(answer.id, prompt, ids, logprobs, choice.message.content, 3, choice.finish_reason)]
    assert again == []  # each call is taken once
    with torch.no_grad():  # the log-probs are the model's own, at the sampling temperature (min_tokens 0: no mask)
        logits = engine.model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1]
    expected = torch.log_softmax(logits / 0.7, dim=-1).gather(1, torch.tensor(ids)[:, None]).squeeze(1)
    assert torch.allclose(torch.tensor(logprobs), expected, atol=1e-4)


def test_a_session_samples_as_its_taskset_says_unless_a_request_says_otherwise(engine, demo_assets):
    greedy = json.dumps({"temperature": 0.0, "top_p": 1.0, "top_k": -1, "max_tokens": 3, "min_tokens": 3,
                         "repetition_penalty": 1.0})  # fmt: skip

    async def body(url):
        api = client(url, "s2", **{SAMPLING_HEADER: greedy})
        name = (await api.models.list()).data[0].id
        runs = [await api.completions.create(model=name, prompt="7+8=") for _ in range(2)]
        longer = await api.completions.create(model=name, prompt="7+8=", max_tokens=5, extra_body={"min_tokens": 5})
        return runs, longer, engine.history("s2")

    runs, longer, recorded = serve(engine, demo_assets / "model-tools", body)
    assert runs[0].choices[0].text == runs[1].choices[0].text  # greedy
    assert [len(c.response_ids) for c in recorded] == [3, 3, 5]
    assert longer.choices[0].finish_reason == "length" and longer.usage.completion_tokens == 5


def test_token_id_prompts_and_several_choices_are_one_call_each(engine, demo_assets):
    async def body(url):
        api = client(url, "s3")
        name = (await api.models.list()).data[0].id
        answer = await api.completions.create(model=name, prompt=[4, 5, 6], n=3, max_tokens=2, logprobs=0)
        return answer, engine.history("s3")

    answer, recorded = serve(engine, demo_assets / "model-tools", body)
    assert len(answer.choices) == len(recorded) == 3 and {c.id for c in recorded} == {answer.id}
    assert all(c.prompt_ids == [4, 5, 6] for c in recorded)
    assert [c.logprobs.token_logprobs for c in answer.choices] == [c.logprobs for c in recorded]


def test_calls_without_a_session_are_answered_and_not_kept(engine, demo_assets):
    async def body(url):
        api = openai.AsyncOpenAI(base_url=url, api_key="EMPTY")
        name = (await api.models.list()).data[0].id
        await api.completions.create(model=name, prompt="1+1=", max_tokens=1)
        return engine.api.history._sessions

    assert serve(engine, demo_assets / "model-tools", body) == {}


BAD = [
    ({"model": "gpt-4o", "prompt": "1"}, 404, "the model 'gpt-4o' does not exist; this endpoint serves '"),
    ({"prompt": "1", "stop": ["\n"]}, 400, "stop is not supported by trinity's endpoint (it takes: model, n,"),
    ({"prompt": "1", "stream": True}, 400, "stream: true is not supported by trinity's endpoint"),
    (
        {"prompt": "1", "max_tokens": 40},
        400,
        "40 reply tokens after the prompt's 1 pass the context (max_model_len=32)",
    ),
    ({"prompt": "1" * 32}, 400, "the prompt is 32 tokens and the context (max_model_len) holds 32 with the reply"),
    ({"prompt": [99999]}, 400, "prompt token ids must be non-empty and in [0, "),
    ({"prompt": "1", "temperature": -1}, 400, "temperature: Input should be greater than or equal to 0"),
    ({"prompt": "1", "logprobs": 5}, 400, "logprobs: Input should be 0"),
    ({"prompt": "1", "max_tokens": 2, "min_tokens": 3}, 400, "min_tokens=3 is above the reply's limit, 2"),
]


@pytest.mark.parametrize("request_body, status, message", BAD)
def test_a_bad_request_is_refused_by_name_with_openais_error(engine, demo_assets, request_body, status, message):
    async def body(url):
        api = client(url)
        name = (await api.models.list()).data[0].id
        body = {"model": name} | request_body
        extra = {k: body.pop(k) for k in ("min_tokens",) if k in body}  # vLLM's: not an openai argument
        with pytest.raises(openai.APIStatusError) as caught:
            await api.completions.create(**body, extra_body=extra)
        return caught.value

    error = serve(engine, demo_assets / "model-tools", body)
    assert error.status_code == status and message in error.message, error.message
    assert error.body["type"] == {400: "BadRequestError", 404: "NotFoundError"}[status]


def test_chat_requests_with_tools_need_a_call_format_and_a_key_when_one_is_set(demo_assets, monkeypatch):
    # validate refuses react_agent_workflow without a call format: the endpoint alone is tested without one
    config = with_rollout(
        config_of(demo_assets, monkeypatch, "explorer.rollout_model.api_key=s3cret"), tool_call_parser=None
    )
    engine = TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)
    messages = [{"role": "user", "content": "1+2+3="}]

    async def body(url):
        errors = []
        for key, extra in (("wrong", {}), ("s3cret", {"tools": CALCULATE}), ("s3cret", {"messages": []})):
            api = openai.AsyncOpenAI(base_url=url, api_key=key)
            try:
                await api.chat.completions.create(**({"model": config.explorer.rollout_model.model_path,
                                                      "messages": messages} | extra))  # fmt: skip
            except openai.APIStatusError as exc:
                errors.append((exc.status_code, exc.message))
        api = openai.AsyncOpenAI(base_url=url, api_key="s3cret")
        name = config.explorer.rollout_model.model_path
        answer = await api.chat.completions.create(model=name, messages=messages, tools=CALCULATE, tool_choice="none")
        return errors, answer

    errors, answer = serve(engine, demo_assets / "model-tools", body)
    assert errors[0][0] == 401 and "explorer.rollout_model.api_key" in errors[0][1]
    assert errors[1][0] == 400 and "set explorer.rollout_model.tool_call_parser (hermes, brackets)" in errors[1][1]
    assert errors[2][0] == 400 and "messages: List should have at least 1 item" in errors[2][1]
    assert answer.choices[0].message.tool_calls is None  # tool_choice none: the tools are shown, no call is read


def test_history_keeps_sessions_apart_and_drops_the_oldest_past_its_bound():
    history = History(max_sessions=2)
    call = RecordedCall("c", [1], [2], [-0.5], "x", 0, "stop")
    for session in ("a", "b", "a", "c"):
        history.record(session, [call])
    assert history.take("b") == [] and history.take("a") == [call, call] and history.take("c") == [call]


class ScriptedEngine(RolloutEngine):
    """A stand-in for a model whose replies a test scripts (text per turn), behind the engine interface: the real
    endpoint, HTTP, `openai` client and recording run over it."""

    def __init__(self, replies: list[str], **kwargs):
        super().__init__(**kwargs)
        self.replies = list(replies)

    def _load(self, model_path):
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_path)

    def _tokenizer(self, model_path):
        return self.tokenizer

    def _generate(self, requests):
        out = []
        for _, n, _ in requests:
            text = self.replies.pop(0)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            out.append([Sample(ids, [-0.25] * len(ids), text, stopped=True)] * n)
        return out

    def _params(self):
        return {}


# each format's call as a reply writes it, and a template that renders a parsed call back as the model wrote it
HERMES_CALL = '<tool_call>{"name": "calculate", "arguments": {"expression": "12+34+56"}}</tool_call>'
HERMES_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'tool' %}={% endif %}{{ m['content'] }}"
    "{% for c in (m['tool_calls'] or []) %}<tool_call>{\"name\": \"{{ c['function']['name'] }}\", \"arguments\": "
    "{{ c['function']['arguments'] | tojson }}}</tool_call>{% endfor %}"
    "{% if m['role'] == 'assistant' %}<eos>{% endif %}{% endfor %}"
)
FORMATS = {"brackets": ("[12+34+56]", None), "hermes": (HERMES_CALL, HERMES_TEMPLATE)}


def with_rollout(config, **values):
    """The config with explorer.rollout_model's `values` (a template too long for an override)."""
    rollout = config.explorer.rollout_model.model_copy(update=values)
    return config.model_copy(update={"explorer": config.explorer.model_copy(update={"rollout_model": rollout})})


@pytest.mark.parametrize("call_format", FORMATS)
def test_a_react_episode_over_the_endpoint_is_one_experience_of_the_models_turns(demo_assets, monkeypatch, call_format):
    call, template = FORMATS[call_format]
    config = config_of(demo_assets, monkeypatch)  # the brackets format and its template (examples/arith_react)
    if template:
        config = with_rollout(config, tool_call_parser=call_format, chat_template=template)
    engine = ScriptedEngine([call, "102"], name="rollout.engine0", role="rollout", config=config, index=0)
    toolbox = Toolbox({"calculate": calculate})

    async def body(url):
        api = openai.OpenAI(base_url=url, api_key="EMPTY", default_headers={SESSION_HEADER: "ep"})
        messages = [{"role": "user", "content": "12+34+56="}]
        name = config.explorer.rollout_model.model_path
        answer = await asyncio.to_thread(react, api, name, messages, toolbox, 3)
        return answer, engine.history("ep")

    (answer, full), calls = serve(engine, demo_assets / "model-tools", body)
    assert (answer, full, toolbox.calls, toolbox.errors) == ("102", False, 1, 0)
    ids = lambda text: engine.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    eos = engine.tokenizer.eos_token_id
    assert [c.finish_reason for c in calls] == ["tool_calls", "stop"]
    # the second prompt is the first, the reply as the model wrote it (the template renders the parsed call back),
    # and the tool's result
    assert calls[1].prompt_ids == ids("12+34+56=") + ids(call) + [eos] + ids("=102")
    [exp] = episodes.experiences(calls, 1.0, "task-0", "0")
    assert exp.prompt_ids == ids("12+34+56=")
    assert exp.response_ids == ids(call) + [eos] + ids("=102") + ids("102") + [eos]
    replied = len(ids(call)) + 1
    assert exp.action_mask == [1] * replied + [0] * 4 + [1] * 4
    assert exp.logprobs == [-0.25] * replied + [0.0] * 4 + [-0.25] * 4
    assert exp.metrics == {"accuracy": 1.0, "turns": 2.0}


def test_calls_that_do_not_continue_each_other_are_experiences_of_their_own():
    first = RecordedCall("a", [1, 2], [3, 4], [-1.0, -1.0], "", 1, "stop")
    follows = RecordedCall("b", [1, 2, 3, 4, 9], [5], [-2.0], "", 2, "stop")
    rewritten = RecordedCall("c", [1, 7], [8], [-3.0], "", 2, "stop")
    assert [len(c) for c in episodes.chains([first, follows, rewritten])] == [2, 1]
    merged, alone = episodes.experiences([first, follows, rewritten], 0.5, "g", "ep", tool_calls=1.0)
    assert (merged.response_ids, merged.action_mask, merged.weight_version) == ([3, 4, 9, 5], [1, 1, 0, 1], 2)
    assert (alone.prompt_ids, alone.response_ids, alone.reward) == ([1, 7], [8], 0.5)
    assert (merged.episode, alone.episode) == ("ep", "ep")  # one episode: a step-wise advantage counts it once
    assert alone.metrics == {"accuracy": 0.5, "turns": 1.0, "tool_calls": 1.0}


def test_serve_mode_keeps_every_call_by_its_id_until_feedback_makes_it_an_experience(demo_assets, monkeypatch):
    storage = "buffer.trainer_input.experience_buffer.storage_type=sql"
    config = config_of(demo_assets, monkeypatch, "mode=serve", storage)
    engine = ScriptedEngine(["[12+34+56]", "102", "7"], name="rollout.engine0", role="rollout", config=config, index=0)
    toolbox = Toolbox({"calculate": calculate})

    async def body(url):
        import httpx

        api = openai.OpenAI(base_url=url, api_key="EMPTY")  # an outside agent: no session
        name = config.explorer.rollout_model.model_path
        messages = [{"role": "user", "content": "12+34+56="}]
        await asyncio.to_thread(react, api, name, messages, toolbox, 3)
        lone = await asyncio.to_thread(api.completions.create, model=name, prompt="1+2=")
        ids = list(engine.api.history._sessions)
        async with httpx.AsyncClient() as http:
            feedback = url.removesuffix("/v1") + "/feedback"
            answers = [
                await http.post(feedback, json={"ids": ids[:2], "reward": 1.0, "group": "g"}),
                await http.post(feedback, json={"ids": [ids[0]], "reward": 1.0}),
                await http.post(feedback, json={"ids": [lone.id], "reward": 0.0, "extra": 1}),
                await http.post(feedback, json={"ids": [lone.id], "reward": 0.0}),
            ]
            made, again = engine.take_experiences(), engine.take_experiences(final=True)
            late = await http.post(feedback, json={"ids": [ids[1]], "reward": 1.0})  # the run stops: refused
        return ids, lone.id, answers + [late], made, again

    ids, lone, answers, made, again = serve(engine, demo_assets / "model-tools", body)
    assert len(ids) == 3 and ids[2] == lone  # by response id, in the order answered
    assert [a.status_code for a in answers] == [200, 404, 400, 200, 503]
    assert "the serve run is stopping" in answers[4].text
    assert answers[0].json() == {"experiences": 1} and "waits for a reward here" in answers[1].text
    assert "extra is not supported by trinity's endpoint (it takes: ids, reward, group)" in answers[2].text
    episode, single = made
    assert (episode.group, episode.reward, episode.metrics["turns"]) == ("g", 1.0, 2.0)
    assert (episode.episode, single.episode) == (ids[0], lone)  # an episode is named by its first call
    assert sum(episode.action_mask) == len(episode.response_ids) - 4  # the tool's reply "=102" is not trained
    assert (single.group, single.reward, single.prompt_ids) == (lone, 0.0, engine.tokenizer("1+2=")["input_ids"])
    assert again == []


def test_feedback_is_serve_modes(engine, demo_assets):
    async def body(url):
        import httpx

        async with httpx.AsyncClient() as http:
            return await http.post(url.removesuffix("/v1") + "/feedback", json={"ids": ["x"], "reward": 1.0})

    answer = serve(engine, demo_assets / "model-tools", body)
    assert answer.status_code == 404 and "/feedback is serve mode's (mode: serve)" in answer.text


def test_an_engine_error_reaches_the_client_by_name(engine, demo_assets):
    async def body(url):
        engine.asleep = True  # colocate: the trainer holds the devices, and the engine refuses to generate
        api = client(url)
        with pytest.raises(openai.InternalServerError) as caught:
            await api.completions.create(model=engine.config.explorer.rollout_model.model_path, prompt="1+1=")
        return caught.value

    error = serve(engine, demo_assets / "model-tools", body)
    assert (
        error.status_code == 500 and "RuntimeError: rollout.engine0 was asked to generate while asleep" in error.message
    )


def test_a_bad_sampling_header_or_tool_call_is_refused_and_health_needs_no_key(demo_assets, monkeypatch):
    config = config_of(demo_assets, monkeypatch, "explorer.rollout_model.api_key=s3cret")
    engine = TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)
    name = config.explorer.rollout_model.model_path

    async def body(url):
        import httpx

        async with httpx.AsyncClient() as http:
            health = await http.get(url.removesuffix("/v1") + "/health")
        api = openai.AsyncOpenAI(
            base_url=url, api_key="s3cret", default_headers={SAMPLING_HEADER: '{"temperature": "hot"}'}
        )
        with pytest.raises(openai.BadRequestError) as header:
            await api.completions.create(model=name, prompt="1")
        call = {"role": "assistant", "content": "", "tool_calls": ["calculate(1)"]}
        api = openai.AsyncOpenAI(base_url=url, api_key="s3cret")
        with pytest.raises(openai.BadRequestError) as tool_call:
            await api.chat.completions.create(model=name, messages=[{"role": "user", "content": "1"}, call])
        return health, header.value, tool_call.value

    health, header, tool_call = serve(engine, demo_assets / "model-tools", body)
    assert health.status_code == 200 and health.json() == {"status": "ok", "weight_version": 3}
    assert "the X-Trinity-Sampling header is not trinity's sampling JSON" in header.message
    assert "a message's tool_calls are not OpenAI's [{id, type, function: {name, arguments}}]" in tool_call.message


# --- Trinity-RFT's vLLM server flags on trinity's endpoint ---------------------------------------------------------


def test_a_request_outside_a_workflow_samples_with_the_engines_own_defaults_and_is_logged(
    demo_assets, monkeypatch, caplog
):
    """model.top_k and explorer.rollout_model's token limits are what a session-less request leaves out (Trinity-RFT's
    vLLM defaults); enable_log_requests puts each request, with its sampling, in the engine's log."""
    import logging

    overrides = (
        "model.top_k=3",
        "+explorer.rollout_model.max_response_tokens=3",
        "+explorer.rollout_model.min_response_tokens=2",
        "explorer.rollout_model.enable_log_requests=true",
    )
    engine = TransformersEngine(
        name="rollout.engine0", role="rollout", config=config_of(demo_assets, monkeypatch, *overrides), index=0
    )

    async def body(url):
        api = openai.AsyncOpenAI(base_url=url, api_key="EMPTY")
        return await api.completions.create(model=engine.config.explorer.rollout_model.model_path, prompt="7+8=")

    with caplog.at_level(logging.INFO, logger="trinity.rollout.engine0.requests"):
        answer = serve(engine, demo_assets / "model-tools", body)
    assert answer.usage.completion_tokens in (2, 3)  # the engines' own max and min, not model.*'s 12 and 1
    logged = [r.getMessage() for r in caplog.records if r.name == "trinity.rollout.engine0.requests"]
    assert len(logged) == 2  # the endpoint's line, then the engine's
    assert logged[0].startswith(f"OpenAI request for {engine.config.explorer.rollout_model.model_path}: 4 prompt")
    assert all("top_k=3, max_tokens=3, min_tokens=2" in line for line in logged), logged


def test_requests_are_not_logged_unless_asked(engine, demo_assets, caplog):
    import logging

    async def body(url):
        api = openai.AsyncOpenAI(base_url=url, api_key="EMPTY")
        return await api.completions.create(model=engine.config.explorer.rollout_model.model_path, prompt="7+8=")

    with caplog.at_level(logging.DEBUG, logger="trinity.rollout.engine0"):
        serve(engine, demo_assets / "model-tools", body)
    assert [r for r in caplog.records if r.name == "trinity.rollout.engine0.requests"] == []
