"""Write files so that readers see the old content or the new, never half of it."""

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder and an atomic rename."""
    path = Path(path)
    tmp = _written_beside(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_once(path: Path, text: str, wait_s: float = 5.0) -> str:
    """`path`'s text, written as `text` first where it is absent: of processes making it at once, one's text wins
    (a hard link fails where the name exists; where links are not had, an exclusive create, whose text the others
    wait for up to `wait_s`) and each reads that one."""
    import time

    path = Path(path)
    if not path.exists():
        tmp = _written_beside(path, text)
        try:
            _link_once(tmp, path, text)
        finally:
            tmp.unlink(missing_ok=True)
    deadline = time.monotonic() + wait_s
    while not (said := path.read_text(encoding="utf-8")) and time.monotonic() < deadline:
        time.sleep(0.05)  # an exclusive create's writer is still writing
    return said


def _written_beside(path: Path, text: str) -> Path:
    """A temporary file in `path`'s folder holding `text` on disk, with the permissions `path` has or would get."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode(path))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _link_once(tmp: Path, path: Path, text: str) -> None:
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links (some network and object-store mounts)
        try:
            with path.open("x", encoding="utf-8") as handle:
                handle.write(text)
        except FileExistsError:
            pass


def _mode(path: Path) -> int:
    """The replaced file's permissions, or what a plain open() would give a new file."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def replace_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Have `write` fill a temporary file beside `path`, then rename it over `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def publish_dir(build: Callable[[Path], None], final: Path) -> None:
    """Have `build` fill a temporary folder beside `final`, then rename it to `final` (readers never see half of it)."""
    import shutil

    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        build(tmp)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
