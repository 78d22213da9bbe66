"""What a workflow is: one task in, scored experiences out, through a model client."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from ...config.workflow_args import defaults
from ..experience import Experience, with_accuracy
from ..rewards import bind
from .conversation import Conversation


@dataclass(frozen=True)
class Task:
    """One row of a taskset, with what its workflow needs to know about it."""

    uid: str  # unique within the run: the GRPO group of its rollouts
    row: dict
    format: Any  # the taskset's FormatConfig
    repeat_times: int
    workflow_args: dict = field(default_factory=dict)
    reward_fn_args: dict = field(default_factory=dict)
    is_eval: bool = False
    # the taskset's reward function with its reward_fn_args (rewards.BoundReward); None: the workflow's default
    reward_fn: Callable[..., dict[str, float]] | None = None


@dataclass(frozen=True)
class Completion:
    """One sampled response."""

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    text: str
    weight_version: int
    prompt_truncated: bool = False  # the prompt was cut to explorer.rollout_model.max_prompt_tokens
    stopped: bool = True  # it ended itself; False: it reached its token budget (max_tokens) and was cut there


class ModelClient(Protocol):
    """How a workflow asks the rollout engines for text."""

    tokenizer: Any  # Hugging Face's API: `encode` by the engine's backend, the rest loads Hugging Face's on first use
    auxiliary_models: list  # an `openai.OpenAI` client of each auxiliary model (explorer.auxiliary_models), in order

    def prompt(self, task: Task) -> str:
        """The task's prompt text, by its format and the model's chat template."""

    def generate(self, prompt: str, n: int) -> list[Completion]:
        """`n` samples continuing `prompt`, with the taskset's sampling arguments."""

    def chat(self, task: Task, messages: list[dict], n: int, tools: list[dict] | None = None) -> list[Completion]:
        """`n` replies to `messages` (with `tools` rendered in), through the task's chat template, in one turn."""

    def conversation(
        self, task: Task, messages: list[dict] | None = None, tools: list[dict] | None = None
    ) -> Conversation:
        """A new episode opening with `messages` (default: the task's prompt), in the model's chat template and
        context, with `tools` (OpenAI function schemas; default: the row's, format.tools_key) rendered into it."""

    def reply(self, conversations: list[Conversation]) -> None:
        """One model turn in each conversation, generated together; one without room left ends truncated."""

    def openai_client(self) -> Any:
        """An `openai.OpenAI` client of the engine's OpenAI endpoint, in a session of its own; what its requests leave
        out is sampled as the taskset says. It shares the explorer's connections: do not close it."""

    def recorded_calls(self, client: Any) -> list:
        """The calls made through `client`, with the engine's token ids and log-probs (rollout.history.RecordedCall),
        in order; each is returned once."""


class Workflow:
    """Base of every workflow: subclasses implement `run`, and score responses with `score`."""

    # the reward function (a name in trinity/config/rewards.py) used when the taskset names none
    default_reward: str | None = None
    # the workflow_args it reads, with their defaults (None: it reads them itself, unchecked)
    arguments: dict[str, Any] | None = None
    # the model of its workflow_args in trinity/config/workflow_args.py, where it has one there (validate checks them
    # with it too): `arguments` are then its defaults, and `settings()` the taskset's values through it
    args_model: type[BaseModel] | None = None
    # whether it asks the tokenizer more than to encode a prompt (a chat template for its turns, decode): the explorer
    # then loads Hugging Face's tokenizer as it sets up, not in the first explore step (yours: assumed so)
    uses_tokenizer: bool = True
    # whether `run` plays the task's repeat_times rollouts itself (every built-in workflow does); False: it plays one,
    # and the runner plays it repeat_times times on tasks of repeat_times 1, as explorer.concurrent_mode says
    # (Trinity-RFT's Workflow.can_repeat)
    can_repeat: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.args_model is not None and "arguments" not in cls.__dict__:
            cls.arguments = defaults(cls.args_model)

    @classmethod
    def check_values(cls, args: dict) -> None:
        """Refuse a workflow_args value its model refuses, else one of another type than the argument's default (a
        subclass checks more)."""
        if cls.args_model is not None:
            cls._modelled(args)
            return
        for name, default in (cls.arguments or {}).items():
            value = args.get(name, default)
            if type(value) is not type(default):
                raise ValueError(
                    f"{cls.__name__}: workflow_args.{name} is {value!r}; it takes a {type(default).__name__} "
                    f"(default {default!r})"
                )

    @classmethod
    def _modelled(cls, args: dict) -> Any:
        try:
            return cls.args_model.model_validate(args)
        except ValidationError as exc:
            problems = "; ".join(
                f"workflow_args.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
            )
            raise ValueError(f"{cls.__name__}: {problems}") from None

    def settings(self) -> Any:
        """The taskset's workflow_args through the workflow's model (`args_model`), defaults filled in."""
        return self._modelled(self.task.workflow_args)

    def arg(self, name: str) -> Any:
        """A workflow argument: the taskset's workflow_args value, else the workflow's default."""
        if self.arguments is None or name not in self.arguments:
            raise KeyError(f"{type(self).__name__} declares no argument {name!r} in its `arguments`")
        return self.task.workflow_args.get(name, self.arguments[name])

    def __init__(self, task: Task, model: ModelClient):
        self.task, self.model = task, model
        # Trinity-RFT's: an `openai.OpenAI` client of each auxiliary model (explorer.auxiliary_models, in order), its
        # `model_path` the name requests give; None without any
        self.auxiliary_models: list[Any] | None = getattr(model, "auxiliary_models", None) or None
        self.reward_fn = task.reward_fn
        if self.reward_fn is None and self.default_reward is not None:
            self.reward_fn = bind(self.default_reward, task.reward_fn_args)

    def run(self) -> list[Experience]:
        """Generate, score, and return one experience per rollout."""
        raise NotImplementedError

    def play(self, episodes: list[Conversation], turns: int, step: Callable[[int, Conversation, int], bool]) -> None:
        """Up to `turns` model turns in each episode, the open ones together (one engine call a turn); after each
        reply, `step(i, episode, turn)` judges it, adds the environment's answer, and returns whether it is over."""
        over = [False] * len(episodes)
        for turn in range(1, turns + 1):
            playing = [i for i, e in enumerate(episodes) if not over[i] and not e.truncated]
            if not playing:
                return
            self.model.reply([episodes[i] for i in playing])
            for i in playing:
                if episodes[i].turns == turn:  # else the context had no room for this turn's reply
                    over[i] = step(i, episodes[i], turn)

    def score(
        self, completion: Completion, truth: Any, prompt: str = "", messages: list[dict] | None = None
    ) -> Experience:
        """An experience of this task from one completion, rewarded with the sum of its reward function's scores."""
        scores = self.judge(completion.text, truth, prompt, len(completion.response_ids), messages)
        return self.experience(completion, sum(scores.values()), **scores)

    def judge(
        self, text: str, truth: Any, prompt: str = "", tokens: int = 0, messages: list[dict] | None = None
    ) -> dict[str, float]:
        """The reward function's scores of a response `text` of `tokens` tokens (answering `messages`, where the
        workflow chats)."""
        if self.reward_fn is None:
            raise ValueError(
                f"{type(self).__name__} has no reward function: name one in the taskset's default_reward_fn_type"
            )
        context = {"prompt": prompt, "response_tokens": tokens, "row": self.task.row, "messages": messages}
        return self.reward_fn(text, truth, **context)

    def right(self, text: str, truth: Any, tokens: int = 0) -> bool:
        """Whether the reward function counts `text` as a right answer (its accuracy, else its summed scores, > 0)."""
        scores = self.judge(text, truth, tokens=tokens)
        return scores.get("accuracy", sum(scores.values())) > 0

    def experience(self, completion: Completion, reward: float, /, **metrics: float) -> Experience:
        """An experience of this task from one completion."""
        return Experience(
            prompt_ids=completion.prompt_ids,
            response_ids=completion.response_ids,
            logprobs=completion.logprobs,
            reward=float(reward),
            group=self.task.uid,
            weight_version=completion.weight_version,
            metrics=with_accuracy(reward, metrics) | ({"prompt_truncated": 1.0} if completion.prompt_truncated else {}),
        )


def check_args(classes: Iterable[type[Workflow]], args: dict) -> None:
    """Refuse workflow_args that no workflow of a taskset reads (naming what each reads), and values one refuses. A
    workflow that declares no `arguments` reads its own, unchecked."""
    classes = list(classes)
    if all(c.arguments is not None for c in classes):
        unknown = sorted(set(args) - {name for c in classes for name in c.arguments})
        if unknown:
            reads = "; ".join(f"{c.__name__} reads {', '.join(c.arguments) or 'none'}" for c in classes)
            raise ValueError(f"workflow_args {', '.join(map(repr, unknown))}: no workflow of it reads them ({reads})")
    for cls in classes:
        cls.check_values(args)


def positive(cls: type, args: dict, name: str) -> None:
    """Refuse a workflow argument below 1."""
    if args.get(name, cls.arguments[name]) < 1:
        raise ValueError(
            f"{cls.__name__}: workflow_args.{name} is {args[name]!r}; it takes a whole number of at least 1"
        )
