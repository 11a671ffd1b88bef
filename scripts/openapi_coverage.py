#!/usr/bin/env python3
"""Which routes of the OpenAPI document the integration suite checks against their schemas.

  scripts/openapi_coverage.py [BUILD_DIR] [-- gtest options]

Runs build/tests/integration/integration_test once with GP_OPENAPI_COVERAGE and GP_OPENAPI_DOC
set (the harness checks every successful JSON answer against its route's schema and records the
route), then prints, per operation of the document, whether some answer was checked, and the
totals. Takes several minutes: it runs the whole integration suite in one process.
"""
import json
import os
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "--" else "build"
extra = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
binary = os.path.join(build, "tests", "integration", "integration_test")
with tempfile.TemporaryDirectory() as tmp:
    covered_file, doc_file = os.path.join(tmp, "covered"), os.path.join(tmp, "doc.json")
    env = dict(os.environ, GP_OPENAPI_COVERAGE=covered_file, GP_OPENAPI_DOC=doc_file)
    run = subprocess.run([binary, "--gtest_brief=1"] + extra, env=env,
                         stdout=subprocess.DEVNULL if not sys.stdout.isatty() else None)
    doc = json.load(open(doc_file))
    covered = set(open(covered_file).read().split("\n")) if os.path.exists(covered_file) else set()
ops = sorted((m.upper(), p) for p, o in doc["paths"].items() for m in o
             if m in ("get", "post", "put", "patch", "delete"))
answering = [(m, p) for m, p in ops
             if any(status.startswith("2") and "application/json" in r.get("content", {})
                    for status, r in doc["paths"][p][m.lower()]["responses"].items())]
missing = [f"{m} {p}" for m, p in answering if f"{m} {p}" not in covered]
for line in missing:
    print(f"  not checked: {line}")
print(f"{len(answering) - len(missing)} of {len(answering)} operations that answer JSON were "
      f"checked against their schema ({len(ops)} operations in all); suite exit {run.returncode}")
sys.exit(run.returncode)
