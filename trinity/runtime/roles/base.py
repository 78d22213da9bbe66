"""What every role actor shares: a light constructor (so a launch can be checked before anything
heavy starts) taking keyword arguments only, a placement report, and a log file of its own in the
run directory. A role that starts processes of its own (vLLM's) also has `close()`, which teardown
calls before Ray kills it. An actor the launch keeps for the run's next stage takes that stage's
constructor arguments in its running process (`restage`): the process, its imports and its process
groups stay; what one stage's setup built is dropped, unless the role keeps it on purpose.

The log file (`<log dir>/<name>.log`; with log.group_by_node, `<log dir>/<node IP>/<name>.log`, as Trinity-RFT's
utils/log.py writes them; records at log.level and above) is where a failed role's cause is found (calls.py shows
its end to the user): every public method logs the traceback of what it raises there, and the actor's process
writes its stderr there. That
is fd 2 itself, redirected, not teed through a pipe: a pipe's reader dies with the process, losing the
last words of one that dies hard (a CUDA or NPU runtime's abort message, faulthandler's stacks), which
are the ones needed; the redirect only takes those lines from Ray's session log of the worker, which
trinity does not stream (`log_to_driver=False`). The log's last line, once the process has ended, says how: the
signal or exit code its sentinel (sentinel.py) read as it ended."""

import faulthandler
import functools
import gc
import importlib
import inspect
import logging
import os
import resource
import sys
from collections.abc import Callable
from contextvars import ContextVar, Token
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...utils import device
from . import sentinel

if TYPE_CHECKING:
    import subprocess

    from ...config.schema import RunConfig
    from ...launch.plan import ActorSpec

# set while a role method runs: a role method it calls leaves logging what they raise to it
_in_role_call: ContextVar[bool] = ContextVar("trinity_in_role_call", default=False)
_stderr_taken = False  # whether this process's fd 2 already goes to a role's log
_sentinel: "subprocess.Popen | None" = None  # the process that writes how this one ended into its log (sentinel.py)


class Role:
    """Base of the role actors: explorer, rollout engine, trainer rank, buffer."""

    WARM: tuple[str, ...] = ()  # modules its setup imports: the launch has them imported as the actor starts

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every public method of a role, its own or inherited, logs what it raises (`_logs_raises`)."""
        super().__init_subclass__(**kwargs)
        for name in dir(cls):
            method = inspect.getattr_static(cls, name)
            if not name.startswith("_") and _plain_method(method) and not hasattr(method, "_logs_raises"):
                setattr(cls, name, _logs_raises(method))

    def __init__(
        self,
        *,
        name: str,
        role: str,
        visible_devices_env: str | None = None,
        log_dir: str | None = None,
        log_level: str = "INFO",
        log_by_node: bool = False,
        workdir: str | None = None,
    ) -> None:
        moved = _work_in(workdir) if workdir else None
        self.name, self.role, self.visible_devices_env = name, role, visible_devices_env
        if log_dir and log_by_node:  # log.group_by_node: a folder per node, named by its IP
            log_dir = str(Path(log_dir) / node_ip())
        self.log = _logger(name, log_dir, log_level)
        if log_dir:
            _stderr_into(log_file(log_dir, name))
        if moved:
            self.log.warning(moved)

    @classmethod
    def plan_arguments(cls, config: "RunConfig", spec: "ActorSpec", run_dir: Path) -> dict[str, Any]:
        """This role's own constructor arguments for the planned actor `spec` of `config`'s run in `run_dir`."""
        raise NotImplementedError(f"{cls.__name__} does not say how the launch plan constructs it")

    def warm(self) -> None:
        """Import the modules setup needs now, while the stage sets up the other roles (verl alone takes ~9 s)."""
        for module in self.WARM:
            importlib.import_module(module)

    def restage(self, **kwargs: Any) -> bool:
        """Become this role in the run's next stage (the same constructor arguments a new actor would get); False
        when this process cannot, and the launch starts a new actor instead."""
        self.release()
        self.__dict__.clear()  # nothing a stage's setup built reaches the next stage unless a role keeps it
        self.__init__(**kwargs)
        gc.collect()
        device.empty_cache()  # the dropped models' cached blocks go back to the device for the next stage's
        return True

    def release(self) -> None:
        """Let go of what this stage's setup opened (pools, files) before `restage` drops it."""

    def report(self) -> dict:
        """Node, devices Ray assigned, and the device decision this process received."""
        import ray

        visible = os.environ.get(self.visible_devices_env) if self.visible_devices_env else None
        return {
            "name": self.name,
            "role": self.role,
            "node_id": ray.get_runtime_context().get_node_id(),
            "visible_devices": visible,
            "device": device.get_device_type(),
            "hardware": os.environ.get(device.HARDWARE_ENV),
            "pid": os.getpid(),
        }

    def peak_rss_mb(self) -> float:
        """Peak resident memory of this process, in MiB."""
        return peak_rss_mb()

    def peak_device_mb(self) -> float | None:
        """Peak device memory torch's allocator reserved in this process, in MiB; None without an accelerator."""
        return peak_device_mb()


def log_file(log_dir: str | Path, name: str) -> Path:
    """The log file of role `name` in the run's `logs` folder."""
    return Path(log_dir) / f"{name}.log"


def found_log(log_dir: str | Path, name: str) -> Path:
    """Where role `name` logs: in the logs folder, or in its node's folder there (log.group_by_node); the former where
    neither exists yet."""
    direct = log_file(log_dir, name)
    return direct if direct.exists() else next(Path(log_dir).glob(f"*/{name}.log"), direct)


def node_ip() -> str:
    """This node's IP address as Ray names the node (a role's folder with log.group_by_node)."""
    import ray

    return ray.util.get_node_ip_address()


def peak_device_mb() -> float | None:
    """The most device memory torch's caching allocator of the calling process reserved, in MiB (what the memory plan
    predicts per device); None where this process has no accelerator or never imported torch."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.accelerator.is_available():
        return None
    return torch.get_device_module(torch.accelerator.current_accelerator()).max_memory_reserved() / 2**20


def peak_rss_mb() -> float:
    """Peak resident memory of the calling process, in MiB: Linux's VmHWM where there is one. ru_maxrss keeps, across
    exec, the peak of the process that started this one (a driver started by a 600 MiB process reports 600)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:  # no procfs (macOS)
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20


def _plain_method(attribute: Any) -> bool:
    """A plain or async function: not a static or class method, a property, or a generator (whose errors surface as
    it is iterated, not when it is called)."""
    return inspect.isfunction(attribute) and not (
        inspect.isgeneratorfunction(attribute) or inspect.isasyncgenfunction(attribute)
    )


def _logs_raises(method: Callable) -> Callable:
    """`method`, logging into the role's log the traceback of what it raises, then raising it unchanged. The wrapper
    reaches its state through module functions: a role class defined outside a module (a test's) is pickled by value,
    and a ContextVar cannot be."""
    if inspect.iscoroutinefunction(method):  # Ray makes an actor with an async method an async actor: stay one

        @functools.wraps(method)
        async def logged(self: Role, *args: Any, **kwargs: Any) -> Any:
            call = _enter()
            try:
                return await method(self, *args, **kwargs)
            except Exception:
                _log_raised(self, method.__qualname__, call)
                raise
            finally:
                _leave(call)

    else:

        @functools.wraps(method)
        def logged(self: Role, *args: Any, **kwargs: Any) -> Any:
            call = _enter()
            try:
                return method(self, *args, **kwargs)
            except Exception:
                _log_raised(self, method.__qualname__, call)
                raise
            finally:
                _leave(call)

    logged._logs_raises = True  # type: ignore[attr-defined]  # a class rebuilt by cloudpickle is not wrapped twice
    return logged


def _enter() -> Token:
    return _in_role_call.set(True)


def _leave(call: Token) -> None:
    _in_role_call.reset(call)


def _log_raised(role: Role, method: str, call: Token) -> None:
    """Log the exception being handled into `role`'s log, unless an outer role method of the same call will: a
    restage that fails in its base class's is logged once."""
    log = role.__dict__.get("log")  # absent when a restage's constructor failed before setting it
    if log is not None and call.old_value is not True:
        log.exception("%s raised", method)


def _logger(name: str, log_dir: str | None, level: str = "INFO") -> logging.Logger:
    log = logging.getLogger(f"trinity.{name}")
    log.setLevel(getattr(logging, level))
    if log_dir and not log.handlers:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file(log_dir, name))
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.propagate = False  # a root handler on stderr would write each record into this file a second time
    return log


def _work_in(folder: str) -> str | None:
    """Work in the folder trinity runs in (`workdir`), where a Ray of the run's own starts its workers anyway: the
    run directory and the config's relative paths are read there on a cluster the run joined as well. Only in a Ray
    actor. Returns why not, for the log, where a node lacks the folder (no shared file system): Ray's stays."""
    if not _in_actor() or os.getcwd() == folder:
        return None
    try:
        os.chdir(folder)
    except OSError as exc:
        here = os.getcwd()
        return f"relative paths are read from {here}: the folder trinity runs in, {folder}, cannot be entered ({exc})"
    return None


def _stderr_into(path: Path) -> None:
    """Point this actor process's fd 2 and faulthandler (its threads' stacks on a fatal signal) at `path`, appending,
    once per process: a kept actor's restage keeps the first. Only in a Ray actor, which is the process's one role: a
    role built in a test or the driver leaves that process's stderr alone. Its sentinel starts beside it."""
    global _stderr_taken, _sentinel
    if _stderr_taken or not _in_actor():
        return
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    faulthandler.enable(file=2, all_threads=True)  # Ray's own registration (fd 2) is replaced, not doubled
    _sentinel = sentinel.start(str(path))  # how this process ends goes into the same log
    _stderr_taken = True


def _in_actor() -> bool:
    ray = sys.modules.get("ray")  # an actor's process has imported it; importing it here would cost a test ~1 s
    return ray is not None and ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None
