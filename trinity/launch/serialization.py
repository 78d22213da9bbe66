"""Ray's serialization in the run's processes, without its Arrow serializers.

Ray registers serializers for Arrow tables in a process's serialization context, made on its first
serialization, wherever pyarrow imports: pyarrow's libraries then hold ~35 MiB of every process of the
run (the driver's peak went 170 -> 134 MiB without them, a bare role actor's 126 -> 90), though no role
sends an Arrow table through Ray. Each process makes its context while `import pyarrow` fails, as where
pyarrow is not installed (Ray's own sign to skip them): the driver once Ray is up, every worker of the
run's job by Ray's `worker_process_setup_hook` (JOB_ENV). pyarrow imports normally afterwards (a taskset
in Parquet), and a process that already holds it keeps Ray's serializers.
"""

import sys

JOB_ENV = {"worker_process_setup_hook": f"{__name__}.serialize_without_arrow"}  # ray.init's runtime_env


def serialize_without_arrow() -> None:
    """Make this process's Ray serialization context while pyarrow cannot be imported."""
    if "pyarrow" in sys.modules:
        return
    import ray._private.worker as ray_worker  # a worker's hook runs before it may `ray.put`: the context directly

    make = getattr(ray_worker.global_worker, "get_serialization_context", None)
    if make is None:  # a Ray without it: its serializers stay as they are
        return
    sys.modules["pyarrow"] = None  # `import pyarrow` raises ModuleNotFoundError
    try:
        make()
    except Exception:  # a setup hook that raises ends its worker: Ray then makes its context as usual
        pass
    finally:
        del sys.modules["pyarrow"]
