#!/usr/bin/env python3
"""skipped_tests.py - after ctest: which tests were skipped, and why.

  python3 tests/skipped_tests.py [--venv .venv] BUILD_DIR...

For each build directory, reads the JUnit file the last ctest run wrote
(`ctest --output-junit Testing/junit.xml`, as make test, asan and tsan run
it) and prints every test that did not run: skipped by its exit status
(77), by its skip message (tests/run_cli.cmake's "run_cli: skipped"), or
disabled, with the last line it printed, which says why. A skip is allowed
where the tool a test needs is missing; but where the venv (make deps) has
TensorFlow, a skipped test labelled "interop" means a test looked in the
wrong place, so the script fails (exit 1). Labels come from
`ctest --show-only=json-v1`. Only the standard library: it runs before and
without the venv.
"""

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def labels(build):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True,
                         check=True).stdout
    result = {}
    for t in json.loads(out).get("tests", []):
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        result[t["name"]] = props.get("LABELS", [])
    return result


def skipped(build):
    """(name, why) of each test of the last run that did not run, not counting failures."""
    path = os.path.join(build, "Testing", "junit.xml")
    if not os.path.exists(path):
        return None
    result = []
    for case in ET.parse(path).getroot().iter("testcase"):
        status = case.get("status")
        if status not in ("notrun", "disabled"):
            continue
        skip = case.find("skipped")
        message = skip.get("message", "") if skip is not None else "disabled"
        if message == "Fixture dependency failed":  # ctest counts these as failures
            continue
        out = (case.findtext("system-out") or "").strip().splitlines()
        lines = [l for l in out if l.strip()]
        why = lines[-1].strip() if lines else message
        result.append((case.get("name"), why))
    return result


def venv_has_tensorflow(venv):
    python = os.path.join(venv, "bin", "python")
    if not os.access(python, os.X_OK):
        return False
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('tensorflow') is None)"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--venv", default=".venv", help="the tests' venv (make deps)")
    p.add_argument("builds", nargs="+")
    a = p.parse_args()
    tensorflow = venv_has_tensorflow(a.venv)
    bad = []
    for build in a.builds:
        skips = skipped(build)
        if skips is None:
            print(f"skipped tests in {build}: no Testing/junit.xml (ctest --output-junit Testing/junit.xml)")
            continue
        print(f"skipped tests in {build}: {len(skips) or 'none'}")
        test_labels = labels(build) if skips else {}
        for name, why in skips:
            interop = "interop" in test_labels.get(name, [])
            print(f"  {name}{' (interop)' if interop else ''}: {why}")
            if interop and tensorflow:
                bad.append(f"{build}: {name}")
    if bad:
        print(f"FAILED: interop tests skipped though {a.venv} has TensorFlow: {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
