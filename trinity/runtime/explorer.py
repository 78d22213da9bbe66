"""The explorer: runs each task's workflow over the rollout engines and writes experiences.

Tasks go round-robin to the engines; up to `runner_per_model` workflows per engine run at once,
and their requests reach the engine as one call (rollout/gather.py), generated together. A task that fails is retried
`max_retry_times` times, then skipped with its error in the metrics; one that outlives
`max_timeout` is abandoned.
"""

import importlib
import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from typing import Any

from ..config.algorithms.queries import uses_greedy_baseline
from ..config.schema import RunConfig
from .experience import Experience
from .roles import Role


@dataclass
class _TaskSet:
    name: str
    workflows: dict  # task uid -> its workflow class
    tasks: list  # Task
    sampling: Any  # rollout.base.Sampling


class Explorer(Role):
    """Drives workflows; the constructor is light, `setup` loads tasksets and the tokenizer."""

    WARM = ("tokenizers",)
    CHAT_WARM = "transformers.models.auto.tokenization_auto"  # a chat template's: ~4 s of imports, torch among them

    def __init__(self, *, config: RunConfig, **identity: Any) -> None:
        super().__init__(**identity)
        self.config = config

    def warm(self) -> None:
        """As Role's; Hugging Face's tokenizer too where a taskset's prompts go through the chat template (what else
        needs it, setup knows once it has the engine's answer and the workflows)."""
        super().warm()
        if self._chat_prompts():
            importlib.import_module(self.CHAT_WARM)

    def setup(self, engines: list, buffer: Any, model_path: str) -> dict:
        """Load the tasksets and the tokenizer; returns the number of tasks of each."""
        import ray

        from .data.tokenizer import Tokenizer
        from .rollout.gather import Gatherer

        # the tokenizer the engine encodes with, asked now: the engine answers once it has loaded its model
        backend = engines[0].tokenizer_backend.remote(model_path) if engines else None
        self.engines, self.buffer = engines, buffer
        slots = self.config.explorer.runner_per_model
        self.gatherers = [Gatherer(engine, slots) for engine in engines]
        self.pools = [ThreadPoolExecutor(max_workers=slots) for _ in engines]  # runner_per_model per engine
        self.endpoints = self._endpoints(engines)
        train, evals = self._tasksets()
        self.train = [self._load(t, False) for t in train]
        self.evals = [self._load(t, True) for t in evals]
        spec = ray.get(backend) if backend is not None else None
        self.tokenizer = Tokenizer(model_path, self.config.model.trust_remote_code, spec)
        if self._needs_hugging_face(spec):
            self.tokenizer.hf  # noqa: B018 (loaded now, beside the other roles' setup, not in the first step's threads)
        return {ts.name: len(ts.tasks) for ts in self.train + self.evals}

    def _needs_hugging_face(self, spec: dict | None) -> bool:
        """Whether the explorer needs Hugging Face's tokenizer: no backend to encode by (`spec` None), chat prompts,
        or a workflow that asks more of the tokenizer than encoding."""
        workflows = {cls for ts in self.train + self.evals for cls in ts.workflows.values()}
        return spec is None or self._chat_prompts() or any(cls.uses_tokenizer for cls in workflows)

    def _tasksets(self) -> tuple[list, list]:
        """The training tasksets and the evaluation ones."""
        explorer_input = self.config.buffer.explorer_input
        return [t for t in [explorer_input.taskset, *explorer_input.tasksets] if t], list(explorer_input.eval_tasksets)

    def _chat_prompts(self) -> bool:
        """Whether a taskset's prompts go through the chat template."""
        return any(t.format.prompt_type != "plaintext" for t in sum(self._tasksets(), []))

    def _endpoints(self, engines: list) -> list[Any]:
        """An `openai.OpenAI` client of each engine's endpoint, on one connection pool (None: not served)."""
        rollout = self.config.explorer.rollout_model
        if not rollout.enable_openai_api:
            return [None] * len(engines)
        import httpx
        import openai
        import ray

        # one pool for every workflow: a client of its own costs each episode ~30 ms of TLS setup (even for http)
        self.http = httpx.Client(
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=1024),
            timeout=self.config.explorer.max_timeout,  # a task never waits longer than it may run
        )
        urls = ray.get([engine.openai_url.remote() for engine in engines])
        return [openai.OpenAI(base_url=u, api_key=rollout.api_key, http_client=self.http, max_retries=0) for u in urls]

    def release(self) -> None:
        """Stop the workflow threads (the next stage's setup starts its own)."""
        for pool in getattr(self, "pools", ()):
            pool.shutdown(wait=False, cancel_futures=True)
        if getattr(self, "http", None) is not None:
            self.http.close()

    def _load(self, storage: Any, is_eval: bool) -> _TaskSet:
        from .data.prompts import check_columns
        from .data.tasksets import load_rows
        from .rollout.base import Sampling
        from .workflows import Task

        explorer_input = self.config.buffer.explorer_input
        rows = load_rows(storage.path, storage.split, storage.subset_name)
        if not rows:
            raise ValueError(f"taskset {storage.name}: {storage.path} (split {storage.split!r}) has no rows")
        check_columns(f"taskset {storage.name}", storage.format, rows[0])
        kind = "eval" if is_eval else "train"
        reward_fn = _reward(storage, storage.default_reward_fn_type)  # the input's default was filled in by derive
        tasks = [
            Task(
                f"{storage.name}/{kind}/{i}",
                row,
                storage.format,
                storage.repeat_times,
                storage.workflow_args,
                storage.reward_fn_args,
                is_eval,
                reward_fn,
            )
            for i, row in enumerate(rows)
        ]
        args = storage.rollout_args
        max_tokens = args.max_tokens or self.config.model.max_response_tokens or 16
        sampling = Sampling(
            args.temperature,
            args.top_p,
            args.top_k,
            max_tokens,
            self.config.model.min_response_tokens,
            self.config.explorer.rollout_model.repetition_penalty,
        )
        workflows = _row_workflows(storage, rows, storage.default_workflow_type or explorer_input.default_workflow_type)
        from .workflows.base import check_args

        try:
            check_args(dict.fromkeys(workflows), storage.workflow_args)
        except ValueError as exc:
            raise ValueError(f"taskset {storage.name}: {exc}") from None
        return _TaskSet(storage.name, {task.uid: cls for task, cls in zip(tasks, workflows)}, tasks, sampling)

    def steps_per_epoch(self) -> int:
        """Explore steps in one pass over the training tasks."""
        total = sum(len(ts.tasks) for ts in self.train)
        return max(1, -(-total // self.config.buffer.batch_size))

    def explore_step(self, step: int) -> dict:
        """Run the workflows of step `step`'s tasks, write their experiences; returns the step's metrics."""
        started = time.perf_counter()
        batch = self._batch(step)
        calls = self._engine_calls()
        exps, failed = self._run(batch, f"step {step}")
        calls = self._engine_calls() - calls
        for exp in exps:
            exp.step = step
        if exps:
            import ray

            ray.get(self.buffer.put.remote(exps))
        summary = self._summary(exps, time.perf_counter() - started, failed, f"step {step}")
        return summary | {"tasks": len(batch), "engine_calls": calls}

    def _batch(self, step: int) -> list:
        """Tasks of explore step `step` (1-based), cycling through the training tasksets, epoch after epoch."""
        everything = [(ts, task) for ts in self.train for task in ts.tasks]
        size = self.config.buffer.batch_size
        start = (step - 1) * size
        return [everything[i % len(everything)] for i in range(start, start + size)]

    def evaluate(self, step: int) -> list[dict]:
        """Every eval taskset once; returns one metrics record per taskset (accuracy and reward)."""
        out = []
        for ts in self.evals:
            started = time.perf_counter()
            label = f"evaluation of {ts.name} at step {step}"
            exps, failed = self._run([(ts, t) for t in ts.tasks], label)
            accuracy = sum(e.metrics.get("accuracy", e.reward) for e in exps) / len(exps) if exps else 0.0
            out.append(
                {"taskset": ts.name, "accuracy": accuracy, "tasks": len(ts.tasks), "failed": failed}
                | self._summary(exps, time.perf_counter() - started, failed, label)
            )
        return out

    def _run(self, batch: list, label: str) -> tuple[list[Experience], int]:
        engines = itertools.cycle(range(len(self.engines)))
        futures = [self._submit(i, ts, task) for (ts, task), i in zip(batch, engines)]
        exps, errors = [], []
        for future in futures:
            try:
                exps += future.result(timeout=self.config.explorer.max_timeout)
            except (FutureTimeout, TaskFailed) as exc:
                errors.append(str(exc) or f"a task ran past explorer.max_timeout={self.config.explorer.max_timeout} s")
                self.log.warning("%s: a task was skipped: %s", label, errors[-1])
        if batch and not exps:  # nothing to train on would leave the trainer waiting: fail loudly instead
            raise TaskFailed(f"every task of {label} failed; the last: {errors[-1]}")
        return exps, len(errors)

    def _submit(self, engine: int, ts: _TaskSet, task: Any) -> Any:
        self.gatherers[engine].expect()
        return self.pools[engine].submit(self._attempt, ts, task, engine)

    def _engine_calls(self) -> int:
        return sum(g.calls for g in self.gatherers)

    def _summary(self, exps: list[Experience], seconds: float, failed: int, label: str) -> dict:
        """The metrics of one batch of rollouts; cut prompts are also logged, under `label`."""
        summary = batch_metrics(exps, seconds, failed)
        if summary["truncated_prompts"]:
            self.log.warning(
                "%s: %d rollouts had their prompt cut to model.max_prompt_tokens=%s",
                label,
                summary["truncated_prompts"],
                self.config.model.max_prompt_tokens,
            )
        return summary

    def _client(self, engine: int, sampling: Any) -> "_Client":
        """The model client of a workflow on engine `engine`, sampling with `sampling`."""
        return _Client(
            self.gatherers[engine],
            self.tokenizer,
            sampling,
            self.config.explorer.rollout_model,
            self.config.model.max_prompt_tokens,
            self.endpoints[engine],
        )

    def _attempt(self, ts: _TaskSet, task: Any, engine: int) -> list[Experience]:
        try:
            exps = self._retried(ts, task, self._client(engine, ts.sampling))
            if not task.is_eval and uses_greedy_baseline(self.config.algorithm.advantage_fn):
                exps = self._with_baseline(ts, task, engine, exps)
            return exps
        finally:
            self.gatherers[engine].leave()

    def _retried(self, ts: _TaskSet, task: Any, client: Any) -> list[Experience]:
        from .workflows.conversation import ConversationError

        errors = []
        for _ in range(self.config.explorer.max_retry_times + 1):
            try:
                return ts.workflows[task.uid](task, client).run()
            except Exception as exc:  # a workflow is user code: any error is retried, then reported
                if _is_engine_death(exc):
                    raise
                errors.append(f"{type(exc).__name__}: {exc}")
                if isinstance(exc, ConversationError):
                    break  # the task's conversation cannot be held in this template or context: a retry would too
        raise TaskFailed(f"task {task.uid} failed {len(errors)} time(s); last: {errors[-1]}")

    def _with_baseline(self, ts: _TaskSet, task: Any, engine: int, exps: list[Experience]) -> list[Experience]:
        """`exps` with the reward of one greedy rollout of the task as their baseline (ReMax); that rollout is not
        trained on."""
        client = self._client(engine, replace(ts.sampling, temperature=0.0))
        rewards = [e.reward for e in self._retried(ts, replace(task, repeat_times=1), client)]
        if not rewards:
            raise TaskFailed(f"task {task.uid}: its greedy rollout (ReMax's baseline) returned no experience")
        baseline = sum(rewards) / len(rewards)  # one rollout; a workflow that returns several is averaged
        return [replace(e, baseline=baseline) for e in exps]


def _row_workflows(storage: Any, rows: list[dict], default: str | None) -> list[type]:
    """Each row's workflow class: the one its format.workflow_key column names, else the taskset's default."""
    from .workflows import load

    classes: dict[str, type] = {}
    out = []
    for i, row in enumerate(rows):
        name = (row.get(storage.format.workflow_key) if storage.format.workflow_key else None) or default
        if name is None:
            raise ValueError(
                f"taskset {storage.name}: row {i} names no workflow in column {storage.format.workflow_key!r}, and "
                "the taskset has no default_workflow_type"
            )
        if not isinstance(name, str):
            raise ValueError(
                f"taskset {storage.name}: row {i}: column {storage.format.workflow_key!r} holds {name!r}, not a "
                "workflow name"
            )
        if name not in classes:
            try:
                classes[name] = load(name)
            except ValueError as exc:
                raise ValueError(f"taskset {storage.name}: row {i}: {exc}") from None
        out.append(classes[name])
    return out


def _reward(storage: Any, name: str | None) -> Any:
    """The taskset's reward function with its reward_fn_args; None leaves each workflow its default."""
    from .rewards import bind

    if name is None:
        return None
    try:
        return bind(name, storage.reward_fn_args)
    except ValueError as exc:
        raise ValueError(f"taskset {storage.name}: {exc}") from None


class TaskFailed(RuntimeError):
    """A task that failed every retry."""


def _is_engine_death(exc: Exception) -> bool:
    import ray

    return isinstance(exc, ray.exceptions.RayActorError)


class _Client:
    """The model client a workflow sees: prompt formatting and generation on one engine (through its gatherer)."""

    def __init__(
        self,
        engine: Any,
        tokenizer: Any,
        sampling: Any,
        rollout: Any,
        max_prompt_tokens: int | None,
        endpoint: Any = None,
    ):
        self.engine, self.tokenizer, self.sampling, self.rollout = engine, tokenizer, sampling, rollout
        # None: prompts go whole
        self.max_prompt_tokens = max_prompt_tokens if rollout.enable_prompt_truncation else None
        self.endpoint = endpoint  # an openai.OpenAI client of the engine's OpenAI endpoint (None: not served)

    def openai_client(self) -> Any:
        """An `openai.OpenAI` client of this task's engine endpoint, in a session of its own: every call made through
        it is recorded with the engine's token ids and log-probs (`recorded_calls`); what a request leaves out is
        sampled as the taskset says (rollout_args). It shares the explorer's connections: do not close it."""
        if self.endpoint is None:
            raise RuntimeError(
                "this workflow calls the engines' OpenAI endpoint, which is not served: set "
                "explorer.rollout_model.enable_openai_api: true"
            )
        import json
        import uuid
        from dataclasses import asdict

        from .rollout.history import SAMPLING_HEADER, SESSION_HEADER

        headers = {SESSION_HEADER: uuid.uuid4().hex, SAMPLING_HEADER: json.dumps(asdict(self.sampling))}
        return self.endpoint.with_options(default_headers=headers)

    def recorded_calls(self, client: Any) -> list:
        """The calls made through `client` (rollout.history.RecordedCall), in order, each once."""
        import ray

        from .rollout.history import SESSION_HEADER

        return ray.get(self.engine.engine.history.remote(client.default_headers[SESSION_HEADER]))

    def prompt(self, task: Any) -> str:
        from .data.prompts import prompt_text

        return prompt_text(
            task.row, task.format, self.tokenizer, self.rollout.enable_thinking, self.rollout.chat_template
        )

    def generate(self, prompt: str, n: int) -> list:
        from .workflows import Completion

        ids, truncated = fit_prompt(self.tokenizer.encode(prompt, add_special_tokens=False), self.max_prompt_tokens)
        version, samples = self.engine.generate(ids, n, self.sampling)
        return [Completion(ids, s.response_ids, s.logprobs, s.text, version, truncated) for s in samples]

    def chat(self, task: Any, messages: list[dict], n: int, tools: list[dict] | None = None) -> list:
        from .data.prompts import tools_of

        template = self._template(task, tools if tools is not None else tools_of(task.row, task.format))
        return self.generate(template.render(messages, generation_prompt=True) + (task.format.reply_prefix or ""), n)

    def conversation(self, task: Any, messages: list[dict] | None = None, tools: list[dict] | None = None) -> Any:
        from .data.prompts import prompt_messages, tools_of
        from .workflows.conversation import Conversation, ConversationError

        if task.format.reply_prefix:
            raise ConversationError("format.reply_prefix is for single-turn prompts; a conversation has none")
        template = self._template(task, tools if tools is not None else tools_of(task.row, task.format))
        opening = prompt_messages(task.row, task.format) if messages is None else messages
        return Conversation(template, opening, self.rollout.max_model_len)

    def _template(self, task: Any, tools: list[dict] | None) -> Any:
        """The task's chat template (its data set's, else the rollout model's, else the tokenizer's), with `tools`."""
        from .data.prompts import template_of
        from .workflows.conversation import ChatTemplate

        return ChatTemplate(
            self.tokenizer, template_of(task.format, self.rollout.chat_template), self.rollout.enable_thinking, tools
        )

    def reply(self, conversations: list) -> None:
        turns = []  # (conversation, its token budget) of those with room for a reply
        for c in conversations:
            room = c.room()
            budget = self.sampling.max_tokens if room is None else min(self.sampling.max_tokens, room)
            if c.truncated or budget <= 0:
                c.truncated = True  # the context is full: the episode ends here
            else:
                turns.append((c, budget))
        if not turns:
            return
        # min_tokens above a context-cut budget would be refused (vLLM) for the whole gathered call
        sampled = [replace(self.sampling, max_tokens=b, min_tokens=min(self.sampling.min_tokens, b)) for _, b in turns]
        requests = [(c.context(), 1, sampling) for (c, _), sampling in zip(turns, sampled)]
        for (c, budget), (version, (sample,)) in zip(turns, self.engine.generate_each(requests)):
            c.add_reply(sample.response_ids, sample.logprobs, sample.text, version)
            # cut by the context rather than by max_tokens: the episode cannot go on
            c.truncated = budget < self.sampling.max_tokens and not sample.stopped


def fit_prompt(ids: list[int], limit: int | None) -> tuple[list[int], bool]:
    """(the prompt's last `limit` tokens, whether any were cut); a None limit keeps it whole."""
    if limit is None or len(ids) <= limit:
        return ids, False
    return ids[-limit:], True  # the end holds the question and the chat template's cue to answer


def batch_metrics(exps: list[Experience], seconds: float, failed: int = 0) -> dict:
    """The metrics of a batch of rollouts made in `seconds` (an explore or serve step), `failed` tasks aside."""
    tokens = sum(sum(e.mask()) for e in exps)  # the model's: an episode's environment turns were not generated
    versions = [e.weight_version for e in exps]
    # what the workflows measured beyond the reward (accuracy, turns, tool_calls, ...), as a mean over the rollouts
    named = sorted({k for e in exps for k in e.metrics} - {"prompt_truncated"})
    means = {f"{k}_mean": sum(e.metrics.get(k, 0.0) for e in exps) / len(exps) for k in named}
    return {
        "workflow_metrics": means,
        "reward_mean": sum(e.reward for e in exps) / len(exps) if exps else 0.0,
        "response_length_mean": tokens / len(exps) if exps else 0.0,
        "tokens_per_s": tokens / seconds if seconds > 0 else 0.0,
        "weight_version": max(versions) if versions else None,
        "experiences": len(exps),
        "failed_tasks": failed,
        "truncated_prompts": sum(1 for e in exps if e.metrics.get("prompt_truncated")),
        "seconds": seconds,
    }
