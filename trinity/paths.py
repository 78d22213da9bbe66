"""Where trinity's data lives: in the package of a wheel, or at the top of a checkout."""

import os
import tempfile
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
PROFILE_PATH_ENV = "TRINITY_PROFILE_PATH"


@cache
def data_dir(name: str) -> Path:
    """`conf`, `profiles` or `examples`: inside the installed package, else beside it."""
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"trinity data folder '{name}' is missing from {_PACKAGE} and {_PACKAGE.parent}")


def default_run_config() -> Path:
    """The run config used when --config is not given: the embedded arithmetic demo."""
    return data_dir("examples") / "arith" / "arith.yaml"


def profile_files(folder: Path) -> dict[str, Path]:
    """Profile name -> file in one folder: its `*.yaml` files, except those starting with `_`."""
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.yaml")) if not p.name.startswith("_")}


def profile_dirs(extra: tuple[str, ...] = ()) -> tuple[Path, ...]:
    """Profile folders, highest priority first: --profile-dir flags, $TRINITY_PROFILE_PATH, built-in."""
    from_env = [p for p in os.environ.get(PROFILE_PATH_ENV, "").split(os.pathsep) if p]
    return tuple(Path(p).expanduser() for p in (*extra, *from_env)) + (data_dir("profiles"),)


CACHE_ENV = "TRINITY_CACHE_DIR"


def cache_dir() -> Path:
    """What trinity keeps between runs and may lose (a deleted folder costs only time): $TRINITY_CACHE_DIR, else
    $XDG_CACHE_HOME/trinity, else ~/.cache/trinity (no home: a folder of this user's in the temporary folder)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(os.path.expanduser(explicit))
    base = os.path.expanduser(os.environ.get("XDG_CACHE_HOME") or "~/.cache")
    if base.startswith("~"):  # no home to expand (a container's uid without one): not a folder named ~ here
        return Path(tempfile.gettempdir()) / f"trinity-cache-{os.getuid()}"
    return Path(base) / "trinity"
