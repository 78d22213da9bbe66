"""verl's refusals of the training stages' trainer sections, found in a process of its own.

`trinity run`'s preflight runs this module as a script (utils.child.module_command: the driver's own trinity)
on a folder, early: it imports verl while the driver checks the rest and starts Ray, then waits for the end of its
stdin, which the driver closes once it has written the stages to the folder (stages.pickle), and writes the issues found
(issues.pickle: a pickled list, empty when verl accepts every section). verl holds torch, which the driver would
otherwise keep for the whole run.
"""

import importlib
import pickle
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...config.algorithms.queries import uses_critic
from ...config.schema import RunConfig
from ...errors import ConfigError, Issue
from .config import build, build_critic

WARM = ("verl.utils.config", "verl.workers.config.optimizer", "hydra")  # what `refusals` imports: ~8 s on 2 cores
INSTALL = "install trinity's extra for this machine: pip install 'trinity[cpu]' (or [gpu], [npu])"


def refusals(stages: list[RunConfig]) -> list[Issue]:
    """Every issue verl's dataclasses find in the stages' actor (and critic) sections."""
    try:
        import verl  # noqa: F401
    except ImportError as exc:
        return [Issue(f"the trainer needs verl, which this Python cannot import: {exc}", key="trainer", hint=INSTALL)]
    issues: list[Issue] = []
    # verl warns about every optional engine it lacks (torchtitan, megatron, ...) as build imports it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for config in stages:
            found = [issue for builder, args in questions(config) for issue in _refused(builder, *args)]
            issues += [i for i in found if i not in issues]
    return issues


def questions(config: RunConfig) -> list[tuple[Callable[..., Any], tuple]]:
    """What verl is asked of one stage, as (builder, its arguments): the actor's section and, for an algorithm that
    trains one, the critic's (accepted.py keys verl's answers by them)."""
    lora = config.model.lora_configs
    asked: list[tuple[Callable[..., Any], tuple]] = [
        (build, (config, str(config.model.model_path), 1, lora[0].path if lora else None))
    ]
    if uses_critic(config.algorithm.advantage_fn):
        asked.append((build_critic, (config, str(config.model.critic_model_path), 1)))
    return asked


def _refused(build: Callable[..., Any], *args: Any) -> list[Issue]:
    try:
        build(*args)
    except ConfigError as err:
        return err.issues
    return []


def warm() -> None:
    """Import what `refusals` needs before the stages arrive; what fails to import, `refusals` reports."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # as in `refusals`
        for module in WARM:
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 (a broken verl is refusals' to report, as an issue or a traceback)
                return


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    warm()
    sys.stdin.buffer.read()  # the end of stdin: the stages are written
    issues = refusals(pickle.loads((folder / "stages.pickle").read_bytes()))
    (folder / "issues.pickle.tmp").write_bytes(pickle.dumps(issues))
    (folder / "issues.pickle.tmp").rename(folder / "issues.pickle")  # whole or absent: a killed child leaves no half
