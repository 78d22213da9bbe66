"""Checks before Ray starts: everything a run reads is on this machine and every role can be built.

Run in the driver in seconds, so a wrong path, a column a data set lacks, an engine this version lacks, or a
trainer value verl refuses ends the run before ten minutes of start-up rather than after. verl's own check runs in
a child process, so the driver holds no verl or torch for the rest of the run; `trinity run` starts a local Ray
while it runs and takes its answer before anything is created in Ray.
"""

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ...config import engines, modes
from ...config.auxiliary import engine_views
from ...config.local_inputs import auxiliary_issues, data_issues, model_issues, teacher_issues
from ...config.provenance import WRITTEN
from ...config.resolve import ResolvedConfig
from ...config.schema import RunConfig
from ...config.workflow_checks import workflow_issues
from ...errors import ConfigError, Issue, error_of
from ...platforms import get_platform
from ...platforms.detect import Probes
from ...platforms.health import stack_problems
from ...utils.child import module_command
from ...utils.imports import import_path
from ..data.preflight import column_issues
from ..explorer import external
from ..records.metrics import PACKAGES
from ..verl import accepted

ENGINE = ("explorer", "rollout_model", "engine_type")
CHILD_TIMEOUT_S = 300  # importing verl takes 5 to 15 s on a 2-core machine; a hung one would hold a started Ray


def check(resolved: ResolvedConfig) -> None:
    """Raise one ConfigError listing every problem found."""
    start(resolved).wait()


def check_inputs(resolved: ResolvedConfig) -> None:
    """Raise one ConfigError listing what is wrong with what the run reads from disk (`input_issues`): run again once
    the names of hub repos are fetched, on the config naming their folders."""
    issues = input_issues(resolved)
    if issues:
        raise ConfigError(issues)


def input_issues(resolved: ResolvedConfig) -> list[Issue]:
    """What the run reads from disk: its data sets' columns, its model folder (and code it would run), its teacher.
    Names of hub repos are left out: the driver fetches them, and this runs again on their folders."""
    stages = [config for _, config in resolved.runs]
    loads_model = not stages[0].model.external_model.enable  # an external (API) model's model_path is a name only
    issues = (data_issues(resolved) or column_issues(resolved)) + (
        (model_issues(stages[0], resolved) or _remote_code_issues(stages, resolved)) if loads_model else []
    )
    return issues + teacher_issues(resolved) + auxiliary_issues(resolved)


def early(resolved: ResolvedConfig) -> "VerlCheck":
    """verl's check of `resolved`'s training stages, importing verl from now on (while the demo's assets are built
    and Ray starts) unless verl accepted them before; `start` gives it the stages. A run that trains nothing gets a
    check that finds nothing."""
    stages = training_stages(resolved)
    return VerlCheck(get_platform(resolved.config.hardware.device_type).verl_env() if stages else None, stages)


def start(resolved: ResolvedConfig, verl: "VerlCheck | None" = None) -> "VerlCheck":
    """Raise one error listing every problem the driver finds (`driver_checks`); then give verl's check (`verl`,
    started by `early`, or a new one) the training stages: it answers in `wait()` (a local Ray can start meanwhile)."""
    driver_checks(resolved)
    verl = verl or early(resolved)
    verl.ask(training_stages(resolved))
    return verl


def driver_checks(resolved: ResolvedConfig, fetching: list[Issue] | None = None) -> None:
    """Raise one error listing every problem the driver finds, with `fetching` (the keys whose names of hub repos
    cannot be had, found before anything is downloaded)."""
    stages = [config for _, config in resolved.runs]
    issues = input_issues(resolved) + _monitor_issues(resolved) + external.issues(resolved)
    issues += [i for i in workflow_issues(resolved) if i not in issues]  # args, reward, packages: found, not imported
    node = _stack_issues(resolved)
    issues += [i for i in _engine_issues(stages, resolved) if i not in issues]
    for config, provenance in zip(stages, resolved.stage_provenance or [resolved.provenance]):
        issues += [i for i in _attention_issues(config, resolved, provenance) if i not in issues]
    if issues or node or fetching:
        raise error_of(issues, node, fetching or [])


def _stack_issues(resolved: ResolvedConfig) -> list[Issue]:
    """What `trinity doctor` finds wrong with this node's vendor stack for the profile's device type (on NPUs: its
    CANN release and the torch, torch_npu, vLLM and vllm-ascend it pairs with), before Ray starts."""
    hardware = resolved.config.hardware
    return [
        Issue(message, key="hardware", source=f"this node, for {hardware.name} ({hardware.selected_by})", hint=hint)
        for severity, message, hint in stack_problems(hardware.device_type, Probes())
        if severity == "error"
    ]


def training_stages(resolved: ResolvedConfig) -> list[RunConfig]:
    """The configs of the stages that train: what verl's check reads."""
    return [config for _, config in resolved.runs if modes.mode(config.mode).trains]


class VerlCheck:
    """What verl refuses in the stages' trainer sections, asked of a child process (runtime/verl/refusals.py): the
    driver, which lives as long as the run, keeps no verl and no torch. The child imports verl from construction on,
    takes the stages in `ask()` and answers in `wait()`; leaving a `with` block, or `cancel()`, stops it. Stages verl
    accepted before (runtime/verl/accepted.py) start no child, or stop it when asked."""

    def __init__(self, verl_env: dict[str, str] | None, expected: list[RunConfig] | None = None) -> None:
        """Start the child with `verl_env` (verl reads its platform at import), unless verl accepted the `expected`
        stages before (runtime/verl/accepted.py); None: nothing to check."""
        self.proc: subprocess.Popen | None = None
        self.folder: Path | None = None
        self.asked = False
        self.verl_env = verl_env
        self.key: str | None = None  # what ask() was given, named; known before: no child
        if verl_env is None or (expected is not None and accepted.known(accepted.key(expected, verl_env))):
            return
        self._start()

    def _start(self) -> None:
        assert self.verl_env is not None
        self.folder = Path(tempfile.mkdtemp(prefix="trinity-preflight-"))
        try:
            with (self.folder / "stderr").open("wb") as stderr:  # a file: a pipe nobody reads could fill and stall it
                self.proc = subprocess.Popen(
                    module_command("trinity.runtime.verl.refusals", str(self.folder)),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    env={**os.environ, **self.verl_env},
                )
        except BaseException:
            self.cancel()
            raise

    def __enter__(self) -> "VerlCheck":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.cancel()

    def ask(self, stages: list[RunConfig]) -> None:
        """Give the child the stages to check (none: it finds nothing): written to its folder, then its stdin closed.
        Not through the pipe, which holds 64 KiB: a run of many stages would wait there for verl's import."""
        self.asked = True
        if self.verl_env is None:
            return
        self.key = accepted.key(stages, self.verl_env)
        if accepted.known(self.key):  # verl accepted these before: nothing to ask, wait() finds nothing
            self.cancel()
            self.proc = self.folder = None
            return
        if self.proc is None:  # the stages differ from those expected, which verl had accepted
            self._start()
        assert self.proc is not None and self.proc.stdin is not None and self.folder is not None
        (self.folder / "stages.pickle").write_bytes(pickle.dumps(stages))
        self.proc.stdin.close()  # nothing buffered to flush: a child that died already is wait()'s to report

    def wait(self) -> None:
        """Raise one ConfigError listing what verl refused (an acceptance is remembered: accepted.py); a child that
        failed is a RuntimeError of one line."""
        try:
            issues = self._issues()
        finally:
            self.cancel()
        if issues:
            raise ConfigError(issues)
        if self.key is not None:
            accepted.remember(self.key)

    def cancel(self) -> None:
        """Stop the child if it still runs and remove its files (wait() does this; so does a run that ends first)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _issues(self) -> list[Issue]:
        if self.verl_env is None:
            return []
        if not self.asked:
            raise RuntimeError("verl's check was never given the stages to check")
        if self.proc is None or self.folder is None:  # verl accepted the stages asked before
            return []
        try:
            code = self.proc.wait(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"checking the trainer config with verl took over {CHILD_TIMEOUT_S} s") from None
        out = self.folder / "issues.pickle"
        if code != 0 or not out.is_file():
            stderr = (self.folder / "stderr").read_bytes().decode(errors="replace").strip()
            last = stderr.splitlines()[-1] if stderr else "no output"
            message = f"checking the trainer config with verl failed (exit {code}): {last}"
            raise RuntimeError(message) from ChildProcessError(stderr[-6000:])  # --debug shows the child's traceback
        return pickle.loads(out.read_bytes())


def _remote_code_issues(stages: list, resolved: ResolvedConfig) -> list[Issue]:
    """A model or tokenizer whose class only its own folder's code defines needs model.trust_remote_code in
    every stage; transformers would refuse it in every role after start-up."""
    untrusted = [i for i, config in enumerate(stages) if not config.model.trust_remote_code]
    if not untrusted:
        return []
    trust = (
        "model.trust_remote_code"
        if len(untrusted) == len(stages)
        else " and ".join(f"stages.{i}.model.trust_remote_code" for i in untrusted)
    )
    folder = Path(stages[0].model.model_path)  # a later stage starts from a checkpoint of it, which carries its code
    where = resolved.provenance.where(("model", "model_path"))
    issues = []
    for what, file, auto, known in (
        ("model", "config.json", "AutoModelForCausalLM", _known_model),
        ("tokenizer", "tokenizer_config.json", "AutoTokenizer", _known_tokenizer),
    ):
        meta, problem = _read_json(folder / file)
        code = (meta.get("auto_map") or {}).get(auto)
        if problem:
            issues.append(
                Issue(
                    problem,
                    key="model.model_path",
                    source=where,
                    hint=f"fix or replace {file}; transformers reads it in every role",
                )
            )
        elif code and not known(meta):
            shown = code if isinstance(code, str) else next(c for c in code if c)
            message = f"{str(folder)!r} has a {what} defined by its own code ({shown}), which runs only with {trust}"
            issues.append(
                Issue(
                    message,
                    key="model.model_path",
                    source=where,
                    hint=f"read the .py files in the model folder; if you trust them, set {trust}: true",
                )
            )
    return issues


def _read_json(path: Path) -> tuple[dict, str]:
    """(the file's object, '') or ({}, what is wrong); a missing optional file is an empty object."""
    if not path.is_file():
        return {}, ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return {}, f"{path} is not readable JSON: {exc}"
    return (data, "") if isinstance(data, dict) else ({}, f"{path} holds {type(data).__name__}, not a JSON object")


def _known_model(meta: dict) -> bool:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return meta.get("model_type") in CONFIG_MAPPING_NAMES  # transformers loads its own class for a type it knows


def _known_tokenizer(meta: dict) -> bool:
    import transformers

    return bool(meta.get("tokenizer_class")) and hasattr(transformers, meta["tokenizer_class"])


def _engine_issues(stages: list, resolved: ResolvedConfig) -> list[Issue]:
    """Each engine type the exploring stages run: its entry's preflight check, else its package found; engine
    arguments only for an engine that takes them."""
    by_type: dict[str, list] = {}
    for config in stages:
        # an external (API) model answers instead of engines: none starts, so none needs its packages
        if modes.mode(config.mode).runs_engines and not config.model.external_model.enable:
            by_type.setdefault(config.explorer.rollout_model.engine_type, []).append(config)
        if modes.mode(config.mode).runs_engines:  # each auxiliary model's engines, checked as rollout engines of it
            for view in engine_views(config):
                by_type.setdefault(view.explorer.rollout_model.engine_type, []).append(view)
    issues: list[Issue] = []
    for kind, configs in by_type.items():
        entry = engines.engine(kind)
        # an engine with a check of its own looks for its packages there (vLLM's plugin depends on the platform)
        found = import_path(entry.preflight, kind)(configs, resolved) if entry.preflight else _needs(entry, resolved)
        found += [i for config in configs for i in _engine_args_issues(entry, config, resolved)]
        issues += [i for i in found if i not in issues]
    return issues


def _needs(entry: engines.EngineEntry, resolved: ResolvedConfig) -> list[Issue]:
    """The engine's package must be importable here (found, never imported)."""
    if importlib.util.find_spec(entry.needs) is not None:
        return []
    return [
        Issue(
            f"engine type {entry.name!r} needs the {entry.needs} package, which this Python cannot import",
            key="explorer.rollout_model.engine_type",
            source=resolved.provenance.where(ENGINE),
            hint=f"install {entry.needs} on every node, or choose another explorer.rollout_model.engine_type",
        )
    ]


def _engine_args_issues(entry: engines.EngineEntry, config: RunConfig, resolved: ResolvedConfig) -> list[Issue]:
    """extra_engine_args reach only an engine that takes them (its own preflight checks their names)."""
    if entry.engine_args or not config.explorer.rollout_model.extra_engine_args:
        return []
    takers = [e for e in engines.ENGINES.values() if e.engine_args]
    return [
        Issue(
            f"{' or '.join(e.label for e in takers)} engine arguments, but the engine is {entry.name!r}",
            key="explorer.rollout_model.extra_engine_args",
            source=resolved.provenance.where(("explorer", "rollout_model", "extra_engine_args")),
            hint=f"remove them, or set explorer.rollout_model.engine_type: {takers[0].name}",
        )
    ]


def _monitor_issues(resolved: ResolvedConfig) -> list[Issue]:
    """The monitor's package must be importable in the driver, which writes the metrics: found, never imported."""
    kind = resolved.config.monitor.monitor_type
    package = PACKAGES.get(kind)
    if package is None or importlib.util.find_spec(package) is not None:
        return []
    return [
        Issue(
            f"monitor_type {kind!r} needs the {package} package, which this Python cannot import",
            key="monitor.monitor_type",
            source=resolved.provenance.where(("monitor", "monitor_type")),
            allowed="tensorboard, or a monitor whose package is installed",
            hint=f"pip install {package}, or set monitor.monitor_type: tensorboard",
        )
    ]


def _attention_issues(config: RunConfig, resolved: ResolvedConfig, provenance: Any) -> list[Issue]:
    """The trainer's attention kernel must be importable where the platform needs a package for it
    (flash_attention_2 on GPUs: transformers raises at model init otherwise); found, never imported."""
    kernel, path = config.trainer.attn_implementation, ("trainer", "attn_implementation")
    needed = get_platform(config.hardware.device_type).attn_modules.get(kernel)
    if not modes.mode(config.mode).trains or needed is None or importlib.util.find_spec(needed[0]) is not None:
        return []
    if provenance.set_by(path, *WRITTEN):
        source, came = provenance.written_where(path), "set in the config"
    else:
        source, came = (
            resolved.profile.where(("facts", "attn_implementation")),
            f"the {config.hardware.name} profile's attn_implementation",
        )
    message = (
        f"{kernel!r} ({came}) needs the {needed[0]} package, which this Python cannot import: the trainer "
        "would fail at model init"
    )
    return [
        Issue(
            message,
            key="trainer.attn_implementation",
            source=source,
            allowed="sdpa, eager, or an installed kernel",
            hint=f"{needed[1]} on every node, or set trainer.attn_implementation: sdpa",
        )
    ]
