"""The explorer role as it sets up and runs workflows: the tokenizer it loads, its tasksets' sampling and workflow
arguments, the model client's chat, replies and truncation, and the reward function each taskset's tasks are
given."""

import json

import pytest

from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.config.rewards import REWARDS
from trinity.runtime.explorer.model_client import ModelClient
from trinity.runtime.explorer.role import Explorer
from trinity.runtime.rewards import load as load_reward
from trinity.runtime.workflows import Completion


@pytest.fixture
def explorer(demo_assets, monkeypatch, tmp_path):
    """An explorer set up in this process on the demo's taskset (GRPO only), with these overrides."""
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))

    def _explorer(*overrides):
        config = resolve(Request(None, ("hardware=cpu", "~stages", *overrides))).config
        role = Explorer(name="explorer", role="explorer", config=config, run_dir=str(tmp_path))
        role.setup([], None, str(demo_assets / "model"))
        return role

    return _explorer


def client(role, ts):
    return ModelClient(None, role.tokenizer, ts.sampling, role.config.explorer.rollout_model)


@pytest.mark.parametrize(
    "overrides,needed",
    [
        ((), False),  # arith_workflow on plain-text prompts: encoding only, by the engine's backend
        (("buffer.explorer_input.default_workflow_type=arith_feedback_workflow",), True),  # its turns: a chat template
        (("buffer.explorer_input.eval_tasksets.0.format.prompt_type=messages",), True),  # chat prompts
    ],
)
def test_setup_loads_hugging_faces_tokenizer_where_a_workflow_or_a_prompt_needs_it(explorer, overrides, needed):
    from transformers import AutoTokenizer

    from trinity.runtime.data.tokenizer import backend_of

    role = explorer(*overrides)  # set up without engines: no backend, so Hugging Face's was loaded
    assert role.tokenizer._hf is not None and role._needs_hugging_face(None)
    spec = backend_of(AutoTokenizer.from_pretrained(role.tokenizer._path))  # what an engine answers
    assert role._needs_hugging_face(spec) is needed


def test_a_taskset_samples_with_the_engines_repetition_penalty(explorer):
    assert explorer("model.repetition_penalty=1.3").train[0].sampling.repetition_penalty == 1.3
    assert explorer("explorer.rollout_model.repetition_penalty=1.1").train[0].sampling.repetition_penalty == 1.1


def test_a_taskset_asks_the_engines_for_its_top_logprobs(explorer):
    assert explorer().train[0].sampling.logprobs == 0  # upstream's default: the sampled token's own only
    assert explorer("model.logprobs=2").train[0].sampling.logprobs == 2
    role = explorer("model.logprobs=2", "+buffer.explorer_input.taskset.rollout_args.logprobs=5")
    assert role.train[0].sampling.logprobs == 5 and role.evals[0].sampling.logprobs == 2


def test_chat_prompts_go_through_the_rollout_models_template(explorer):
    role = explorer(
        "buffer.explorer_input.taskset.format.prompt_type=messages",
        "model.custom_chat_template='Q: {{ messages[-1].content }} A:'",
    )
    ts = role.train[0]
    assert client(role, ts).prompt(ts.tasks[0]) == f"Q: {ts.tasks[0].row['prompt']} A:"


def test_workflow_args_the_workflow_does_not_read_stop_the_taskset_at_load(explorer):
    with pytest.raises(ValueError, match=r"taskset arith: workflow_args 'max_turn': no workflow of it reads them"):
        explorer(
            "buffer.explorer_input.default_workflow_type=arith_feedback_workflow",
            "buffer.explorer_input.taskset.workflow_args={max_turn: 5}",
        )
    role = explorer(
        "buffer.explorer_input.default_workflow_type=arith_feedback_workflow",
        "buffer.explorer_input.taskset.workflow_args={max_turns: 5}",
    )
    assert role.train[0].tasks[0].workflow_args == {"max_turns": 5}


@pytest.mark.parametrize("enabled,limit", [("true", 8), ("false", None)])
def test_truncation_can_be_turned_off(explorer, enabled, limit):
    role = explorer(f"model.enable_prompt_truncation={enabled}")
    assert client(role, role.train[0]).max_prompt_tokens == limit  # the demo: 12 tokens of context, 4 of response


class Recorded:
    """Stands in for an engine's gatherer: records the request, answers with one fixed sample (the engine is not what
    this test is about)."""

    def __init__(self):
        self.requests = []

    def generate(self, ids, n, sampling):
        from trinity.runtime.rollout.samples import Sample

        self.requests.append((ids, n))
        return 4, [Sample([7, 1], [-0.5, -0.5], "9", stopped=True)] * n


class Sampled(Recorded):
    """Recorded, keeping each request's sampling too."""

    def __init__(self):
        super().__init__()
        self.sampling = []

    def generate(self, ids, n, sampling):
        self.sampling.append(sampling)
        return super().generate(ids, n, sampling)


def test_chat_renders_messages_and_tools_through_the_tasks_template(explorer):
    listing = "{% for t in tools %}{{ t.function.name }}{% endfor %}{{ messages[-1].content }}"
    role = explorer(f"model.custom_chat_template='{listing}'")
    ts = role.train[0]
    engine = Recorded()
    chat = ModelClient(engine, role.tokenizer, ts.sampling, role.config.explorer.rollout_model, None)
    tools = [{"type": "function", "function": {"name": "3"}}]
    completions = chat.chat(ts.tasks[0], [{"role": "user", "content": "1+2="}], 2, tools=tools)
    assert engine.requests == [(role.tokenizer("31+2=", add_special_tokens=False)["input_ids"], 2)]
    assert [(c.response_ids, c.text, c.weight_version) for c in completions] == [([7, 1], "9", 4)] * 2


def test_the_engines_own_token_limits_are_what_a_workflows_client_applies(explorer):
    """explorer.rollout_model's prompt limit and least reply, each model.*'s where unset (Trinity-RFT's rollout model
    overrides): the client cuts a prompt to its end and asks every reply for that least; the trainer keeps model.*."""
    derived = explorer()
    assert client(derived, derived.train[0]).max_prompt_tokens == 8  # the demo's model.* (12 - 4)
    assert client(derived, derived.train[0]).sampling.min_tokens == 1
    role = explorer("+explorer.rollout_model.max_prompt_tokens=3", "+explorer.rollout_model.min_response_tokens=2")
    ts, engine = role.train[0], Sampled()
    [completion] = ModelClient(engine, role.tokenizer, ts.sampling, role.config.explorer.rollout_model).generate(
        "12+3=", 1
    )
    assert engine.requests == [(role.tokenizer("2+3=", add_special_tokens=False)["input_ids"][-3:], 1)]
    [asked] = engine.sampling
    assert completion.prompt_truncated and asked.min_tokens == 2 and asked.max_tokens == ts.sampling.max_tokens
    assert (role.config.model.max_prompt_tokens, ts.sampling.min_tokens) == (8, 1)  # model.*, as set


class Turns:
    """Stands in for an engine's gatherer in multi-turn episodes: records each call's requests and answers every
    request with as many tokens as its budget allows, none of them the end of sequence (the engine is not what this
    test is about)."""

    def __init__(self):
        self.calls = []

    def generate_each(self, requests):
        from trinity.runtime.rollout.samples import Sample

        self.calls.append(requests)
        return [
            (2, [Sample([7] * s.max_tokens, [-0.5] * s.max_tokens, "9" * s.max_tokens, stopped=False)])
            for _, _, s in requests
        ]


def test_each_reply_fits_the_context_and_one_cut_by_it_ends_its_episode(explorer):
    role = explorer("model.custom_chat_template='{% for m in messages %}{{ m.content }}{% endfor %}'")
    ts, engine = role.train[0], Turns()
    turns = ModelClient(engine, role.tokenizer, ts.sampling, role.config.explorer.rollout_model, None)
    roomy, tight, full = (turns.conversation(ts.tasks[0]) for _ in range(3))
    limit = role.config.explorer.rollout_model.max_model_len  # the demo's 12 tokens of context
    tight.add_reply([7] * (limit - len(tight.prompt_ids) - 2), [0.0] * (limit - len(tight.prompt_ids) - 2), "", 1)
    full.add_reply([7] * (limit - len(full.prompt_ids)), [0.0] * (limit - len(full.prompt_ids)), "", 1)
    turns.reply([roomy, tight, full])
    (call,) = engine.calls  # one call for the episodes with room; none for the full one
    assert [(len(ids), s.max_tokens, s.min_tokens) for ids, _, s in call] == [
        (len(roomy.prompt_ids), 4, 1),
        (limit - 2, 2, 1),
    ]
    assert (roomy.truncated, tight.truncated, full.truncated) == (False, True, True)
    assert all(len(c.context()) <= limit for c in (roomy, tight, full))
    assert (roomy.turns, tight.turns, full.turns) == (1, 2, 1)  # the full one got no turn
    turns.reply([full])
    assert len(engine.calls) == 1  # nothing with room: no call at all


def test_a_budget_below_min_tokens_asks_for_no_more_than_the_budget(explorer):
    role = explorer(
        "model.custom_chat_template='{% for m in messages %}{{ m.content }}{% endfor %}'", "model.min_response_tokens=3"
    )
    ts, engine = role.train[0], Turns()
    turns = ModelClient(engine, role.tokenizer, ts.sampling, role.config.explorer.rollout_model, None)
    talk = turns.conversation(ts.tasks[0])
    room = role.config.explorer.rollout_model.max_model_len - len(talk.prompt_ids) - 1
    talk.add_reply([7] * room, [0.0] * room, "", 1)
    turns.reply([talk])
    assert [(s.max_tokens, s.min_tokens) for _, _, s in engine.calls[0]] == [(1, 1)]  # vLLM refuses min > max


def test_a_mixed_taskset_loads_each_rows_workflow(explorer, tmp_path):
    rows = [
        {"prompt": "1+1=", "response": "#### 2", "wf": "math_workflow"},
        {"prompt": "2+2=", "response": "4", "wf": ""},
    ]
    (tmp_path / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    role = explorer(
        f"buffer.explorer_input.taskset.path={tmp_path / 'mixed.jsonl'}",
        "buffer.explorer_input.taskset.format.workflow_key=wf",
    )
    ts = role.train[0]
    # an empty one: the taskset's default
    assert [ts.workflows[t.uid].__name__ for t in ts.tasks] == [
        "MathWorkflow",
        "ArithWorkflow",
    ]


class Scripted:
    """Stands in for the model client with fixed completions: these tests are about scoring, not generating."""

    tokenizer = None

    def __init__(self, texts):
        self.texts = texts

    def prompt(self, task):
        return str(task.row["prompt"])

    def generate(self, prompt, n):
        return [Completion([1], [2, 3], [-0.1, -0.1], text, 0) for text in self.texts[:n]]


# name -> (the row's reference, a response, the reward it earns)
EARNS = {
    "exact_match": ("\\boxed{3}", "\\boxed{3}", 1.0),
    "math_reward": ("\\boxed{3}", "so 3", 1.0),
    "accuracy_reward": ("\\boxed{3}", "\\boxed{3.0}", 1.0),
    "format_reward": ("\\boxed{3}", "\\boxed{3}", -0.1),
    "countdown_reward": ({"target": 3, "numbers": [1, 2]}, "<answer>2 + 1</answer>", 1.0),
    "math_boxed_reward": ("\\boxed{3}", "\\boxed{\\frac{6}{2}}", 1.0),  # the same number
    "math_dapo_reward": ("3", "<think>2?</think>\\boxed{3}", 1.0),
    # format, accuracy and brier 0.5 each, both confidence parts 1e-5
    "rlcr_reward": (
        "3",
        "<think>1+2</think><answer>3</answer><analysis>sure</analysis><confidence>1</confidence>",
        0.5 + 0.5 + 0.5 + 1e-5 + 1e-5,  # summed in this order, as the workflow sums the parts
    ),
}
# rewards that ask a judge model: tests/runtime/rewards/test_trajectory_judge.py and a run against a judge stand-in
JUDGES = {"trajectory_accuracy_grader_reward"}


def test_every_builtin_reward_is_classified_here():
    assert set(EARNS) | JUDGES == set(REWARDS) and not set(EARNS) & JUDGES


@pytest.mark.parametrize("name", sorted(EARNS))
@pytest.mark.parametrize("where", ["buffer.explorer_input", "buffer.explorer_input.taskset"])
def test_the_reward_a_taskset_names_scores_its_tasks(explorer, tmp_path, name, where):
    truth, text, reward = EARNS[name]
    (tmp_path / "rows.jsonl").write_text(json.dumps({"prompt": "1+2=", "response": truth}) + "\n")
    role = explorer(
        f"buffer.explorer_input.taskset.path={tmp_path / 'rows.jsonl'}",
        f"{where}.default_reward_fn_type={name}",
        "buffer.explorer_input.eval_tasksets=[]",
    )
    ts = role.train[0]
    task = ts.tasks[0]
    assert task.reward_fn.fn is load_reward(name)
    exps = ts.workflows[task.uid](task, Scripted([text] * task.repeat_times)).run()
    assert [e.reward for e in exps] == [reward] * task.repeat_times


def test_without_a_named_reward_each_workflow_keeps_its_own(explorer):
    role = explorer()
    assert role.config.buffer.explorer_input.default_reward_fn_type is None
    for ts in role.train + role.evals:
        task = ts.tasks[0]
        assert task.reward_fn is None
        workflow = ts.workflows[task.uid](task, Scripted([str(task.row["response"])]))
        assert workflow.reward_fn.name == "exact_match" and workflow.run()[0].reward == 1.0


def test_reward_fn_args_reach_a_users_reward(explorer):
    role = explorer(
        "buffer.explorer_input.default_reward_fn_type=tests.runtime.own_rewards:length_reward",
        "+buffer.explorer_input.taskset.reward_fn_args.per_char=0.5",
    )
    ts = role.train[0]
    exps = ts.workflows[ts.tasks[0].uid](ts.tasks[0], Scripted(["abcd"])).run()
    assert exps[0].reward == 2.0 and exps[0].metrics == {"accuracy": 2.0, "length": 2.0}
    # the eval taskset has its own (no) reward_fn_args: the function's default
    ev = role.evals[0]
    assert ev.workflows[ev.tasks[0].uid](ev.tasks[0], Scripted(["abcd"])).run()[0].reward == 4.0


@pytest.mark.parametrize(
    "name,error",
    [
        ("tests.runtime.no_such:fn", "cannot import 'tests.runtime.no_such:fn'"),
        ("tests.runtime.own_rewards:NOT_A_FUNCTION", "tests.runtime.own_rewards:NOT_A_FUNCTION is not a function"),
    ],
)
def test_a_users_reward_that_cannot_run_stops_setup_naming_the_taskset(explorer, name, error):
    with pytest.raises(ValueError) as err:
        explorer(f"buffer.explorer_input.taskset.default_reward_fn_type={name}")
    message = str(err.value)
    assert message.startswith(f"taskset arith: reward function {name!r}: ") and error in message


# --- which rows a step reads: the tasksets' data selectors ---------------------------------------------------------

SELECTED = [
    {"prompt": f"{i}+1=", "response": str(i + 1), "weak": (i % 4) / 4, "strong": min(1.0, (i % 4) / 4 + 0.5)}
    for i in range(10)
]
FEATURES = {"offline_easy2hard": "[weak]", "difficulty_based": "[weak, strong]"}


def rows_file(tmp_path):
    path = tmp_path / "selected.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in SELECTED))
    return path


def selecting(tmp_path, name, key="data_selector", **kwargs):
    """Overrides giving the training taskset the rows above and the selector `name` (under `key`)."""
    args = ", ".join(f"{k}: {v}" for k, v in kwargs.items())
    setting = f"{{selector_type: {name}, seed: 3, feature_keys: {FEATURES.get(name, '[]')}, kwargs: {{{args}}}}}"
    return (
        f"buffer.explorer_input.taskset.path={rows_file(tmp_path)}",
        f"+buffer.explorer_input.taskset.{key}={setting}",
    )


def read_rows(role, step):
    return [int(task.uid.rsplit("/", 1)[1]) for _, task in role._batch(step)]


@pytest.mark.parametrize("key", ["data_selector", "task_selector"])
@pytest.mark.parametrize("name", ["sequential", "shuffle", "random", "offline_easy2hard", "difficulty_based"])
def test_a_tasksets_selector_chooses_the_rows_each_step_reads(explorer, tmp_path, name, key):
    """Upstream's deprecated task_selector is the training taskset's data_selector."""
    from trinity.config.schema.buffer import DataSelectorConfig
    from trinity.runtime.data import selectors

    role = explorer(*selecting(tmp_path, name, key), "buffer.batch_size=4")
    feature_keys = FEATURES.get(name, "[]").strip("[]").split(", ") if name in FEATURES else []
    picks = selectors.build(SELECTED, DataSelectorConfig(selector_type=name, seed=3, feature_keys=feature_keys))
    assert [read_rows(role, step) for step in (1, 2, 3)] == [picks.pick(p, 4) for p in (0, 4, 8)]


def set_up(config_overrides, demo_assets, feedback, done):
    config = resolve(Request(None, ("hardware=cpu", "~stages", *config_overrides))).config
    role = Explorer(name="explorer", role="explorer", config=config, run_dir=str(demo_assets))
    role.setup([], None, str(demo_assets / "model"), str(feedback) if feedback else None, done)
    return role


def test_a_resumed_explorer_selects_as_if_it_had_never_stopped(explorer, demo_assets, tmp_path):
    """difficulty_based learns each step's pass rates; resumed at step 2's checkpoint, the explorer learns steps 1 and
    2 again from the run directory's log, and its step 3 reads what the unbroken run's would."""
    overrides = (*selecting(tmp_path, "difficulty_based", tau=0), "buffer.batch_size=3")
    feedback = tmp_path / "run" / "selectors" / "stage_0.jsonl"
    first = set_up(overrides, demo_assets, feedback, done=0)
    rates = {}
    for step in (1, 2, 3):
        rates[step] = {task.uid: float(i % 2) for i, (_, task) in enumerate(first._batch(step))}
        first._learn(step, rates[step])
    resumed = set_up(overrides, demo_assets, feedback, done=2)
    unbroken = set_up(overrides, demo_assets, tmp_path / "other.jsonl", done=0)
    for step in (1, 2):
        unbroken._learn(step, rates[step])
    assert read_rows(resumed, 3) == read_rows(unbroken, 3) != read_rows(set_up(overrides, demo_assets, None, 0), 3)
    assert [json.loads(line)["step"] for line in feedback.read_text().splitlines()] == [1, 2]


def test_a_row_names_its_own_reward_function_in_reward_fn_key(explorer, tmp_path):
    rows = [
        {"prompt": "1+2=", "response": "3", "scorer": "format_reward"},
        {"prompt": "2+2=", "response": "4", "scorer": None},
    ]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    role = explorer(
        f"buffer.explorer_input.taskset.path={tmp_path / 'rows.jsonl'}",
        "buffer.explorer_input.taskset.format.reward_fn_key=scorer",
        "buffer.explorer_input.taskset.default_reward_fn_type=exact_match",
    )
    tasks = role.train[0].tasks
    assert [t.reward_fn.name for t in tasks] == ["format_reward", "exact_match"]  # none named: the taskset's
    exps = role.train[0].workflows[tasks[0].uid](tasks[0], Scripted(["\\boxed{3}"])).run()
    assert exps[0].reward == EARNS["format_reward"][2]
    rows[1]["scorer"] = "no_such_reward"
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"taskset arith: unknown reward function 'no_such_reward'.*\(row 1, column "):
        explorer(
            f"buffer.explorer_input.taskset.path={tmp_path / 'rows.jsonl'}",
            "buffer.explorer_input.taskset.format.reward_fn_key=scorer",
        )


@pytest.mark.parametrize(
    "own,rollout,rendered", [(None, "false", "False"), ("true", "false", "True"), ("false", None, "False")]
)
def test_a_tasksets_enable_thinking_renders_its_prompts(explorer, own, rollout, rendered):
    overrides = [
        "buffer.explorer_input.taskset.format.prompt_type=messages",
        "buffer.explorer_input.eval_tasksets.0.format.prompt_type=messages",
        "model.custom_chat_template='{{ enable_thinking }}|{{ messages[-1].content }}'",
    ]
    overrides += [f"+buffer.explorer_input.taskset.format.enable_thinking={own}"] if own else []
    overrides += [f"model.enable_thinking={rollout}"] if rollout else []
    role = explorer(*overrides)
    ts, ev = role.train[0], role.evals[0]
    assert client(role, ts).prompt(ts.tasks[0]) == f"{rendered}|{ts.tasks[0].row['prompt']}"
    # the evaluation taskset sets none: the rollout model's (the template's default where that is null too)
    expected = {"false": "False", None: "None"}[rollout]
    assert client(role, ev).prompt(ev.tasks[0]).startswith(f"{expected}|")


class Failing:
    """A workflow that fails deep inside, as user code does."""

    def __init__(self, task, model):
        pass

    def run(self):
        return {}["a key the workflow's code expected"]


def test_a_failing_workflows_every_try_is_in_the_log_with_its_traceback(explorer, caplog):
    """The run's error carries a failure's last line; the explorer's log keeps where each try failed."""
    from trinity.runtime.explorer.role import TaskFailed

    role = explorer("explorer.max_retry_times=1")
    ts = role.train[0]
    task = ts.tasks[0]
    ts.workflows[task.uid] = Failing
    with caplog.at_level("WARNING", logger=role.log.name), pytest.raises(TaskFailed, match="failed 2 time"):
        role._retried(ts, task, client(role, ts))
    tries = [r for r in caplog.records if r.name == role.log.name and r.exc_info]
    assert [r.getMessage() for r in tries] == [
        f'task {task.uid}, try {n}: KeyError: "a key the workflow\'s code expected"' for n in (1, 2)
    ]
    assert all(r.exc_info[0] is KeyError and r.exc_info[2].tb_next is not None for r in tries)  # the frames inside
