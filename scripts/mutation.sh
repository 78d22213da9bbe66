#!/usr/bin/env bash
# Mutation testing of the derivation rules (trinity/config/derive/) and the launch arithmetic
# (trinity/launch/{plan,feasibility,reconcile}.py) against the tests that cover them; the files,
# tests and pytest options are in pyproject.toml under [tool.mutmut]. Prints the survivors and
# the score (killed / (killed + survived)); the goal is >= 85 %. Exit 1 below the goal.
#
#     pip install -e '.[test,cpu,mutation]' && scripts/mutation.sh      # JOBS=N for N workers (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONPATH  # mutmut puts its mutated copy (./mutants) first; nothing else may shadow it
export RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0 HYPOTHESIS_PROFILE=mutation
GOAL=${GOAL:-85}
rm -rf mutants
python -m mutmut run --max-children "${JOBS:-2}" >mutants.log 2>&1 || { tail -40 mutants.log >&2; exit 1; }
python -m mutmut results | grep -v ': killed$' || true
python -m mutmut export-cicd-stats >/dev/null
python - "$GOAL" <<'PY'
import json, sys
s = json.load(open("mutants/mutmut-cicd-stats.json"))
judged = s["killed"] + s["survived"]
score = 100 * s["killed"] / judged if judged else 0.0
others = {k: s[k] for k in ("no_tests", "timeout", "suspicious", "skipped", "segfault") if s.get(k)}
print(f"mutants: {s['total']}, killed {s['killed']}, survived {s['survived']}, other {others or 0}")
print(f"mutation score: {score:.1f} % (goal {sys.argv[1]} %)")
sys.exit(0 if score >= float(sys.argv[1]) else 1)
PY
