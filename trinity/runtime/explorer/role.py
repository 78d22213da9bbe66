"""The explorer role: runs each task's workflow over the rollout engines and writes experiences.

Tasks go round-robin to the engines; up to `runner_per_model` workflows per engine run at once,
and their requests reach the engine as one call (rollout/gather.py), generated together. Which rows a step reads is
its tasksets' data selectors' (schedule.py). With
`explorer.max_repeat_times_per_runner`, a task's rollouts are split into runs of at most that many, each a workflow of
its own on the next engine's free runner, and gathered back in run order (runs.py). A task that fails is retried
`max_retry_times` times, then skipped with its error in the metrics; one that outlives
`max_timeout` (or its dynamic timeout, explorer.dynamic_timeout) from the moment its runner took it is cut: skipped,
and its model client refuses further calls (runners.py). A workflow that plays one rollout (`can_repeat = False`) is
played repeat_times times as explorer.concurrent_mode says; every explorer.runner_state_report_interval seconds, what
each runner runs goes to the explorer's log. What the engines said of each reply completes the workflow's experiences
(replies.py); the experience operators (operators.py) then filter a step's experiences before they reach the buffer, and
pass_rate_calculator's pass rates go back to the selectors that learn from them. Under sync_style fully_async several
explore steps (and an evaluation) run at once, each on a thread of the explorer's steps group (launch/plan.py): their
tasks share the runners; each step's tasks are chosen in step order, and its experiences written whole, one step at a
time.
"""

import importlib
import itertools
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...config.algorithms.queries import uses_greedy_baseline
from ...config.schema import RunConfig
from ...launch.plan import ActorSpec
from ..experience import Experience
from ..roles.base import Role
from . import operators, runners, runs
from .model_client import ModelClient
from .results import EVAL_STATS, batch_metrics, task_spread
from .runners import TaskFailed, is_engine_death
from .tasksets import TaskSet, load_taskset

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..rollout.samples import Sampling
    from ..workflows.base import Task


ORDER_WAIT_S = 2.0  # an explore step's wait for those before it to choose (their threads start milliseconds apart)


class Explorer(Role):
    """Drives workflows; the constructor is light, `setup` loads tasksets and the tokenizer."""

    WARM = ("tokenizers",)
    CHAT_WARM = "transformers.models.auto.tokenization_auto"  # a chat template's: ~4 s of imports, torch among them

    @classmethod
    def plan_arguments(cls, config: RunConfig, spec: ActorSpec, run_dir: Path) -> dict[str, Any]:
        return {"config": config, "run_dir": str(run_dir)}

    def __init__(self, *, config: RunConfig, run_dir: str, **identity: Any) -> None:
        super().__init__(**identity)
        self.config, self.run_dir = config, Path(run_dir)
        # explore steps running at once (fully_async): the batches are chosen in step order, and what a step writes
        # (saved input, selector feedback, the buffer) is written one step at a time
        self._steps = threading.Condition()
        self._next_batch = 1  # the explore step whose batch is chosen next
        self._in_flight: dict[int, int] = {}  # explore step running -> the most steps that ran at once meanwhile

    def warm(self) -> None:
        """As Role's; Hugging Face's tokenizer too where a taskset's prompts go through the chat template (what else
        needs it, setup knows once it has the engine's answer and the workflows)."""
        super().warm()
        if self._chat_prompts():
            importlib.import_module(self.CHAT_WARM)

    def setup(
        self,
        engines: list,
        buffer: Any,
        model_path: str,
        feedback: str | None = None,
        done: int = 0,
        auxiliary: list | None = None,
    ) -> dict:
        """Load the tasksets and the tokenizer; returns the number of tasks of each. A selector that learns is given
        back, from the log at `feedback`, the pass rates of steps 1 .. `done` (the steps a resumed stage did).
        `auxiliary`: each auxiliary model's engines, whose endpoints the workflows reach (self.auxiliary_models)."""
        import ray

        from ..data.tokenizer import Tokenizer
        from ..rollout.gather import Gatherer

        # the tokenizer the engine encodes with, asked now: the engine answers once it has loaded its model
        backend = engines[0].tokenizer_backend.remote(model_path) if engines else None
        self.engines, self.buffer = engines, buffer
        slots = self.config.explorer.runner_per_model
        self.gatherers = [Gatherer(engine, slots) for engine in engines]
        # an external (API) model stands for the engines: one lane of runner_per_model runners asking it (external.py)
        self.external = self._external()
        lanes = len(engines) if self.external is None else 1
        # runner_per_model per engine; a runner's thread is named runner<engine>_<n> (runners.Board)
        self.pools = [ThreadPoolExecutor(max_workers=slots, thread_name_prefix=f"runner{i}") for i in range(lanes)]
        explorer = self.config.explorer
        self.timeouts = runners.Timeouts(explorer.max_timeout, explorer.dynamic_timeout)
        self.board = runners.Board(lanes, slots)
        interval = explorer.runner_state_report_interval
        self.reporter = runners.Reporter(self.board, interval, self.log) if interval > 0 else None
        self.endpoints = self._endpoints(engines)
        self.auxiliary = self._auxiliary(auxiliary or [])
        self.pipeline = operators.pipeline(self.config)
        self.saved_input = operators.input_store(self.config, self.run_dir)
        train, evals = self._tasksets()
        self.train = [load_taskset(self.config, t, False) for t in train]
        self.evals = [load_taskset(self.config, t, True) for t in evals]
        from .schedule import FeedbackLog, Schedule  # here: the selectors take numpy, which the driver need not load

        self.schedule = Schedule([ts.selector for ts in self.train], self.config.buffer.batch_size)
        self.slots = {task.uid: (t, i) for t, ts in enumerate(self.train) for i, task in enumerate(ts.tasks)}
        self.feedback = FeedbackLog(Path(feedback)) if feedback and self.schedule.learns else None
        self._next_batch = done + 1
        if self.feedback:
            self.feedback.replay(self.schedule, done)
        spec = ray.get(backend) if backend is not None else None
        if self.external is not None:  # the API's model's tokenizer is not here (model_path may be a name only)
            self.tokenizer = None
            return {ts.name: len(ts.tasks) for ts in self.train + self.evals}
        self.tokenizer = Tokenizer(model_path, self.config.model.trust_remote_code, spec)
        if self._needs_hugging_face(spec):
            self.tokenizer.hf  # noqa: B018 (loaded now, beside the other roles' setup, not in the first step's threads)
        return {ts.name: len(ts.tasks) for ts in self.train + self.evals}

    def _external(self) -> tuple | None:
        """(the endpoint, its `openai.OpenAI` client) of the run's external model; None when the engines answer."""
        if not self.config.model.external_model.enable:
            return None
        from .external import External

        api = External.of(self.config)
        self.log.info("the rollout model is %s at %s (model.external_model)", api.model, api.url)
        return api, api.client(self.config.explorer.max_timeout)

    def _needs_hugging_face(self, spec: dict | None) -> bool:
        """Whether the explorer needs Hugging Face's tokenizer: no backend to encode by (`spec` None), chat prompts,
        or a workflow that asks more of the tokenizer than encoding."""
        workflows = {cls for ts in self.train + self.evals for cls in ts.workflows.values()}
        return spec is None or self._chat_prompts() or any(cls.uses_tokenizer for cls in workflows)

    def _tasksets(self) -> tuple[list, list]:
        """The training tasksets and the evaluation ones."""
        explorer_input = self.config.buffer.explorer_input
        return explorer_input.training, list(explorer_input.eval_tasksets)

    def _chat_prompts(self) -> bool:
        """Whether a taskset's prompts go through the chat template."""
        return any(t.format.prompt_type != "plaintext" for t in sum(self._tasksets(), []))

    def _endpoints(self, engines: list) -> list[Any]:
        """An `openai.OpenAI` client of each engine's endpoint, on one connection pool (None: not served)."""
        rollout = self.config.explorer.rollout_model
        if not rollout.enable_openai_api:
            return [None] * len(engines)
        import openai
        import ray

        urls = ray.get([engine.openai_url.remote() for engine in engines])
        return [
            openai.OpenAI(base_url=u, api_key=rollout.api_key, http_client=self._http(), max_retries=0) for u in urls
        ]

    def _http(self) -> Any:
        """The one connection pool of every workflow's endpoint clients (the rollout and auxiliary engines'): a client
        of its own costs each episode ~30 ms of TLS setup (even for http)."""
        if getattr(self, "http", None) is None:
            import httpx

            self.http = httpx.Client(
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=1024),
                timeout=self.config.explorer.max_timeout,  # a task never waits longer than it may run
            )
        return self.http

    def _auxiliary(self, groups: list[list]) -> list[list[Any]]:
        """An `openai.OpenAI` client of each auxiliary model's engine endpoints (Trinity-RFT's auxiliary_models: one
        client per model in a workflow), on one connection pool; each has `model_path`, the name its requests give."""
        if not groups:
            return []
        import openai
        import ray

        found = []
        for model, engines in zip(self.config.explorer.auxiliary_models, groups):
            urls = list(dict.fromkeys(ray.get([e.openai_url.remote() for e in engines])))  # parts share the head's
            clients = []
            for url in urls:
                client = openai.OpenAI(base_url=url, api_key=model.api_key, http_client=self._http(), max_retries=0)
                client.model_path = model.model_path  # what the endpoint serves (upstream's attribute)
                clients.append(client)
            self.log.info("auxiliary model %s at %s", model.model_path, ", ".join(urls))
            found.append(clients)
        return found

    def _auxiliary_for(self, lane: int) -> list[Any]:
        """The auxiliary models' clients of the workflows on lane `lane`: one engine of each model, in turn."""
        return [clients[lane % len(clients)] for clients in self.auxiliary]

    def replace_engines(self, engines: list, replaced: list[int]) -> None:
        """The engines at `replaced` were replaced (a dead one's, by the driver): the next tasks reach the new ones;
        the tasks of the failed step still on a dead one fail at once and are not waited for."""
        from ..rollout.gather import Gatherer

        self.engines = engines
        for i in replaced:
            self.gatherers[i] = Gatherer(engines[i], self.config.explorer.runner_per_model)
            self.endpoints[i] = self._endpoints([engines[i]])[0]

    def release(self) -> None:
        """Stop the workflow threads (the next stage's setup starts its own)."""
        for pool in getattr(self, "pools", ()):
            pool.shutdown(wait=False, cancel_futures=True)
        if getattr(self, "reporter", None) is not None:
            self.reporter.stop()
            self.reporter = None
        if getattr(self, "http", None) is not None:
            self.http.close()
            self.http = None

    def steps_per_epoch(self) -> int:
        """Explore steps in one pass over the training tasks."""
        total = sum(len(ts.tasks) for ts in self.train)
        return max(1, -(-total // self.config.buffer.batch_size))

    def explore_step(self, step: int) -> dict:
        """Run the workflows of step `step`'s tasks, write their experiences; returns the step's metrics (engine
        calls counted while other steps ran count theirs too)."""
        started = time.perf_counter()
        batch = self._start(step)
        calls = self._engine_calls()
        try:
            exps, failed, behind = self._run(batch, f"step {step}", step, over_rollout=True)
        finally:
            with self._steps:
                at_once = self._in_flight.pop(step)
        self.timeouts.step_done()  # every task of the step ended (done, failed or cut): Trinity-RFT's completed step
        calls = self._engine_calls() - calls
        for exp in exps:
            exp.step = step
        with self._steps:
            written, counted = self._write(step, exps)
        summary = self._summary(exps, time.perf_counter() - started, failed, f"step {step}")
        summary["workflow_metrics"] |= counted  # what the operators counted, on the explorer's line
        extra = {"tasks": len(batch), "engine_calls": calls, "experiences": len(written), "steps_in_flight": at_once}
        return summary | extra | {"tasks_left_behind": behind}

    def _write(self, step: int, exps: list[Experience]) -> tuple[list[Experience], dict]:
        """Step `step`'s experiences through the operators into the buffer; returns those written (none where its
        predecessor, replaced since, had stored the step) and what the operators counted."""
        if self.saved_input is not None:  # data_processor.experience_pipeline.save_input: as made, before operators
            self.saved_input.add(exps)
        written, counted = operators.apply(self.pipeline, exps)
        self._learn(step, counted.pop(operators.PASS_RATES, {}))
        if written:
            import ray

            written = written if ray.get(self.buffer.put.remote(written, step)) else []
        return written, counted

    def _start(self, step: int) -> list:
        """Step `step`'s tasks, chosen once the steps before it chose theirs (started in order, their threads may not),
        or after ORDER_WAIT_S (a step done before a replaced explorer took over never comes); it is then in flight."""
        with self._steps:
            self._steps.wait_for(lambda: self._next_batch >= step, timeout=ORDER_WAIT_S)
            batch = self._batch(step)
            self._next_batch = max(self._next_batch, step + 1)
            self._in_flight[step] = 0
            for other in self._in_flight:
                self._in_flight[other] = max(self._in_flight[other], len(self._in_flight))
            self._steps.notify_all()
        return batch

    def _batch(self, step: int) -> list:
        """Tasks of explore step `step` (1-based), as the training tasksets' selectors choose them (schedule.py)."""
        return [(self.train[t], self.train[t].tasks[row]) for t, row in self.schedule.batch(step)]

    def _learn(self, step: int, rates: dict[str, float]) -> None:
        """Each task's pass rate this step (pass_rate_calculator's, by task) to the selectors, and to the log a
        resumed run replays."""
        found = {self.slots[uid]: rate for uid, rate in rates.items() if uid in self.slots}
        if not found or not self.schedule.learns:
            return
        self.schedule.feedback(found)
        if self.feedback:
            self.feedback.add(step, found)

    def evaluate(self, step: int) -> list[dict]:
        """Every eval taskset once; returns one metrics record per taskset (accuracy and reward)."""
        from . import schedule

        out = []
        for ts in self.evals:
            started = time.perf_counter()
            label = f"evaluation of {ts.name} at step {step}"
            tasks = [ts.tasks[i] for i in schedule.eval_rows(ts.selector, self.config.buffer.batch_size)]
            exps, failed, _ = self._run([(ts, t) for t in tasks], label, f"{step}/{ts.name}")
            accuracy = sum(e.metrics.get("accuracy", e.reward) for e in exps) / len(exps) if exps else 0.0
            record = {"taskset": ts.name, "accuracy": accuracy, "tasks": len(tasks), "failed": failed}
            record |= self._summary(exps, time.perf_counter() - started, failed, label)
            record["workflow_metrics"] |= task_spread(exps, EVAL_STATS[self.config.monitor.detailed_stats])
            out.append(record)
        return out

    def _run(
        self, batch: list, label: str, batch_id: int | str = 0, over_rollout: bool = False
    ) -> tuple[list[Experience], int, int]:
        """Every task's rollouts (each split into runs: runs.split), how many tasks lost some of theirs, and, with
        `over_rollout` (a training step's), how many explorer.over_rollout left behind: a task left behind gives its
        ended runs' experiences only with return_partial_tasks. A run's workflow id is Trinity-RFT's: batch/task/first
        run (the batch an explore step, or step/taskset for an evaluation)."""
        engines = itertools.cycle(range(len(self.pools)))
        most = self.config.explorer.max_repeat_times_per_runner
        tasks = []
        for i, (ts, task) in enumerate(batch):
            parts = []
            for base, part in runs.split(task, most):
                run = runners.Run(f"{batch_id}/{i}/{base}", counted=not task.is_eval)
                parts.append((self._submit(next(engines), ts, part, base, run), run))
            tasks.append(parts)
        exps, errors, failed, behind = [], [], 0, 0
        every = [run for parts in tasks for _, run in parts]  # cut as soon as they overrun, whichever is waited for
        quorum = self._quorum(tasks) if over_rollout else None
        partial = self.config.explorer.over_rollout.return_partial_tasks
        for parts in tasks:  # one task's runs, gathered back in run order
            found, got, left = len(errors), [], False
            for future, run in parts:
                try:
                    got += runners.wait(future, run, self.config.explorer.max_timeout, self.timeouts, every, quorum)
                except runners.TaskLeftBehind:
                    left = True
                except (runners.TaskCut, TaskFailed) as exc:
                    errors.append(str(exc))
                    self.log.warning("%s: a task's runs were skipped: %s", label, errors[-1])
            failed += len(errors) > found
            behind += left
            exps += got if partial or not left else []
        if batch and not exps:  # nothing to train on would leave the trainer waiting: fail loudly instead
            raise TaskFailed(f"every task of {label} failed; the last: {errors[-1]}")
        if behind:
            self.log.info("%s: %d of %d tasks left behind (explorer.over_rollout)", label, behind, len(tasks))
        return exps, failed, behind

    def _quorum(self, tasks: list) -> runners.Quorum | None:
        """explorer.over_rollout's quorum for a training step of `tasks` (each its runs): ceil(tasks x (1 - ratio))
        of them (upstream's min_wait_num); None with ratio 0, or where that is every task."""
        over = self.config.explorer.over_rollout
        least = math.ceil(len(tasks) * (1 - over.ratio))
        return runners.Quorum(tasks, least, over.wait_after_min) if least < len(tasks) else None

    def _submit(
        self, engine: int, ts: TaskSet, task: "Task", base: int = 0, run: runners.Run | None = None
    ) -> "Future[list[Experience]]":
        """Task `task` (its runs numbered from `base`) on a free runner of engine `engine`."""
        if self.gatherers:
            self.gatherers[engine].expect()
        return self.pools[engine].submit(self._attempt, ts, task, engine, base, run or runners.Run("-", False))

    def _engine_calls(self) -> int:
        return sum(g.calls for g in self.gatherers)

    def _summary(self, exps: list[Experience], seconds: float, failed: int, label: str) -> dict:
        """The metrics of one batch of rollouts; cut prompts are also logged, under `label`."""
        summary = batch_metrics(exps, seconds, failed)
        if summary["truncated_prompts"]:
            self.log.warning(
                "%s: %d rollouts had their prompt cut to explorer.rollout_model.max_prompt_tokens=%s",
                label,
                summary["truncated_prompts"],
                self.config.explorer.rollout_model.max_prompt_tokens,
            )
        return summary

    def _client(self, engine: int, sampling: "Sampling") -> ModelClient:
        """The model client of a workflow on engine `engine`, sampling with `sampling`."""
        if self.external is not None:
            from .external import ExternalModelClient

            client = ExternalModelClient(*self.external, sampling, self.config.explorer.rollout_model)
        else:
            client = ModelClient(
                self.gatherers[engine],
                self.tokenizer,
                sampling,
                self.config.explorer.rollout_model,
                self.endpoints[engine],
            )
        client.auxiliary_models = self._auxiliary_for(engine)  # the workflow's self.auxiliary_models
        return client

    def _attempt(self, ts: TaskSet, task: "Task", engine: int, base: int, run: runners.Run) -> list[Experience]:
        """The task's experiences, completed with what the engines said of their replies, numbered from run `base`;
        its runner starts `run`'s clock now, with the timeout a task starting now has."""
        run.begin(self.timeouts.limit())
        self.board.begin(engine, run.workflow_id)
        try:
            if run.cut.is_set():  # given up on while it waited for a runner
                raise runners.TaskCut(f"task {run.workflow_id} was given up on before a runner took it")
            client = self._client(engine, ts.sampling)
            client.cut = run.cut
            exps = [client.replies.complete(e) for e in self._retried(ts, task, client)]
            if not task.is_eval and uses_greedy_baseline(self.config.algorithm.advantage_fn):
                exps = self._with_baseline(ts, task, engine, exps, run)
            return runs.numbered(exps, base)
        finally:
            run.end()
            self.board.end(engine)
            if self.gatherers:
                self.gatherers[engine].leave()

    def _retried(self, ts: TaskSet, task: "Task", client: ModelClient) -> list[Experience]:
        from ..workflows.conversation import ConversationError

        errors = []
        workflow = ts.workflows[task.uid]
        for _ in range(self.config.explorer.max_retry_times + 1):
            try:
                if getattr(workflow, "can_repeat", True):
                    return workflow(task, client).run()
                # a workflow that plays one rollout: repeat_times of them, as explorer.concurrent_mode says
                return runners.repeats(self.config.explorer.concurrent_mode, task, lambda t: workflow(t, client).run())
            except Exception as exc:  # a workflow is user code: any error is retried, then reported
                if is_engine_death(exc) or isinstance(exc, runners.TaskCut):
                    raise
                errors.append(f"{type(exc).__name__}: {exc}")
                # the whole traceback in the explorer's log (the run's error carries its last line only)
                self.log.warning("task %s, try %d: %s", task.uid, len(errors), errors[-1], exc_info=exc)
                if isinstance(exc, ConversationError):
                    break  # the task's conversation cannot be held in this template or context: a retry would too
        raise TaskFailed(f"task {task.uid} failed {len(errors)} time(s); last: {errors[-1]}")

    def _with_baseline(
        self, ts: TaskSet, task: "Task", engine: int, exps: list[Experience], run: runners.Run
    ) -> list[Experience]:
        """`exps` with the reward of one greedy rollout of the task as their baseline (ReMax); that rollout is not
        trained on."""
        client = self._client(engine, replace(ts.sampling, temperature=0.0))
        client.cut = run.cut
        rewards = [e.reward for e in self._retried(ts, replace(task, repeat_times=1), client)]
        if not rewards:
            raise TaskFailed(f"task {task.uid}: its greedy rollout (ReMax's baseline) returned no experience")
        baseline = sum(rewards) / len(rewards)  # one rollout; a workflow that returns several is averaged
        return [replace(e, baseline=baseline) for e in exps]
