"""Seconds per test tier, from a pytest JUnit XML (docs/testing.md).

    python -m pytest -q --junitxml=/tmp/j.xml
    python scripts/tier_times.py /tmp/j.xml [--files 5]

tests/conftest.py writes each test's tier (the first of vllm, train, ray it is marked with, else fast) and its tier
markers into the test's <properties>; a test's time in the XML is its setup, call and teardown together, so a
module-scoped fixture counts in its module's first test. "by tier" sums every test once; "by marker" counts a test
under each marker it carries (a vllm test that also starts Ray counts under both). With pytest-xdist's workers the
tests' seconds add up to about the wall time times the workers; the run's own wall time is printed last.
"""

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

TIERS = ("fast", "ray", "train", "vllm")


def cases(path: str) -> list[dict]:
    """One entry per <testcase>: its file, seconds, tier, markers and outcome."""
    found = []
    for case in ET.parse(path).iter("testcase"):
        props = {p.get("name"): p.get("value", "") for p in case.iter("property")}
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        classname = case.get("classname", "")
        found.append(
            {
                "file": classname.replace(".", "/") + ".py" if classname else case.get("file", "?"),
                "seconds": float(case.get("time") or 0),
                "tier": props.get("tier", "unknown"),  # a collection error, or a run without tests/conftest.py
                "markers": [m for m in props.get("markers", "").split(",") if m],
                "outcome": outcome,
            }
        )
    return found


def suite_seconds(path: str) -> float | None:
    """The run's own wall time, as pytest wrote it (collection included)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    times = [float(s.get("time")) for s in suites if s.get("time")]
    return sum(times) if times else None


def table(title: str, groups: dict, total: float) -> list[str]:
    lines = [f"{title:<10} {'tests':>6} {'seconds':>9} {'share':>6}  (not passed)"]
    for name in sorted(groups, key=lambda n: (TIERS.index(n) if n in TIERS else len(TIERS), n)):
        rows = groups[name]
        seconds = sum(r["seconds"] for r in rows)
        others = defaultdict(int)
        for r in rows:
            if r["outcome"] != "passed":
                others[r["outcome"]] += 1
        note = ", ".join(f"{k}: {n}" for k, n in sorted(others.items()))
        share = f"{100 * seconds / total:5.1f}%" if total else "    -"
        lines.append(f"{name:<10} {len(rows):>6} {seconds:>9.1f} {share:>6}  {note}".rstrip())
    return lines


def report(path: str, top_files: int = 0) -> str:
    found = cases(path)
    total = sum(c["seconds"] for c in found)
    by_tier, by_marker = defaultdict(list), defaultdict(list)
    for c in found:
        by_tier[c["tier"]].append(c)
        for marker in c["markers"]:
            by_marker[marker].append(c)
    lines = table("by tier", by_tier, total) + [f"{'all':<10} {len(found):>6} {total:>9.1f}"]
    wall = suite_seconds(path)
    if wall is not None:
        lines.append(f"pytest's wall time: {wall:.1f} s (collection and start-up included)")
    if by_marker:
        lines += [""] + table("by marker", by_marker, total)
    if top_files:
        for tier in sorted(by_tier, key=lambda n: TIERS.index(n) if n in TIERS else len(TIERS)):
            files = defaultdict(float)
            for c in by_tier[tier]:
                files[c["file"]] += c["seconds"]
            lines += ["", f"slowest files, {tier}:"]
            lines += [f"  {s:8.1f}  {f}" for f, s in sorted(files.items(), key=lambda kv: -kv[1])[:top_files]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit_xml", help="the file pytest --junitxml wrote")
    parser.add_argument("--files", type=int, default=0, metavar="N", help="also list each tier's N slowest files")
    args = parser.parse_args(argv)
    try:
        print(report(args.junit_xml, args.files))
    except (OSError, ET.ParseError) as exc:
        print(f"tier_times: cannot read {args.junit_xml}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
