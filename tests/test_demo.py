"""The embedded demo's assets: built on `trinity run`'s first use, in a process of their own, once."""

import os
import subprocess
import sys

from tests.conftest import REPO
from trinity import demo

# what `trinity run` without --config does first, then which heavy modules its driver holds
DRIVER = (
    "import argparse, sys; from trinity.cli.run_cmd import _ensure_demo; "
    "_ensure_demo(argparse.Namespace(quiet=False, debug=False)); "
    "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
)


def driver(folder, *args):
    env = {**os.environ, demo.DIR_ENV: str(folder)}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120)


def test_the_driver_builds_the_assets_apart_and_holds_no_torch_after(tmp_path):
    first = driver(tmp_path / "demo", "-c", DRIVER)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "[]\n"
    assert f"building the demo's model, tokenizer and problems in {tmp_path / 'demo'}" in first.stderr
    assert demo.complete(tmp_path / "demo")
    again = driver(tmp_path / "demo", "-c", DRIVER)
    assert again.returncode == 0 and again.stdout == "[]\n" and again.stderr == ""  # built once


def test_a_demo_folder_that_cannot_be_written_is_one_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    proc = driver(tmp_path / "file" / "demo", "-m", "trinity", "run", "--quiet")
    assert proc.returncode == 2
    assert (
        f"error: $TRINITY_DEMO_DIR: cannot build the demo's assets in {tmp_path / 'file' / 'demo'}: "
        "NotADirectoryError" in proc.stderr
    )
    assert "hint: set TRINITY_DEMO_DIR to a folder you can write" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_build_runs_the_driver_s_own_trinity_whatever_the_working_directory_holds(tmp_path):
    (tmp_path / "trinity").mkdir()  # another `trinity` package (Trinity-RFT's, an old checkout) where the run starts
    (tmp_path / "trinity" / "__init__.py").write_text("")
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path[0] = {str(REPO)!r}; {DRIVER}"],  # as the `trinity` script
        cwd=tmp_path,
        env={**os.environ, demo.DIR_ENV: str(tmp_path / "demo")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout == "[]\n", proc.stderr
    assert demo.complete(tmp_path / "demo")
