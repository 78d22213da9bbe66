"""Rewrite every golden render and derivation record: python tests/golden/update.py"""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.chdir(REPO)
for name in [k for k in os.environ if k.startswith("TRINITY_")]:
    del os.environ[name]

from tests.golden.renders import GOLDEN, golden_path, pairs  # noqa: E402
from trinity.utils.atomic import write_text_atomic  # noqa: E402

for example, profile in pairs():
    for kind, make in GOLDEN.items():
        target = golden_path(example, profile, kind)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, make(example, profile))
        print(target.relative_to(REPO))
