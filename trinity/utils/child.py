"""The command line that runs one of trinity's modules as a script in a child process."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding this trinity package
# `python -c` (as `-m`) puts the working directory first on the path, where a checkout of another version (or
# Trinity-RFT's own `trinity` package, or a `verl` folder) may sit: the child's path starts at the driver's own trinity
# instead, and the working directory is not on it
# (`''` on the path is the working directory; PYTHONSAFEPATH leaves it out, so the first entry is not always it)
RUN = (
    "import runpy, sys; sys.path[:] = [sys.argv.pop(1), *filter(None, sys.path)]; "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__')"
)


def module_command(module: str, *args: str) -> list[str]:
    """`python` running `module` as `__main__` with `args` (its sys.argv[1:]), from this trinity."""
    return [sys.executable, "-c", RUN, ROOT, module, *args]
