"""Importing this makes every process a benchmark starts run trinity from the checkout the benchmark is in.

`trinity run` and its Ray workers start in the run's own folder, where a relative PYTHONPATH (or none) finds the
installed trinity: in an A/B of two checkouts that is one of them for both sides. Imported before trinity is.
"""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
