#!/usr/bin/env python3
"""Sum the Criterion results in a meson test log, and pytest's in a JUnit XML file when one
is named, into one closing line: "tests: N passed, N failed, N skipped" (skipped: GPU tests
on a machine with no driver). A named pytest file that is missing or holds no tests counts
as one failure."""
import re
import sys
import xml.etree.ElementTree as ET

text = open(sys.argv[1], errors="replace").read()
passed = failed = skipped = 0
for m in re.finditer(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)", text):
    tested, ok, bad, crash = map(int, m.groups())
    passed += ok
    failed += bad + crash
skipped = len(re.findall(r"^\[SKIP\] ", text, re.M))  # Criterion leaves skips out of "Tested"
# non-Criterion tests (header, link and embedding checks) count once each
for m in re.finditer(r"^\s*\d+/\d+\s+\S+:(\S+)\s+(OK|FAIL|SKIP|TIMEOUT)", text, re.M):
    name, res = m.groups()
    if name.startswith(("header", "link", "embedded")):
        if res == "OK":
            passed += 1
        elif res == "SKIP":
            skipped += 1
        else:
            failed += 1
if len(sys.argv) > 2:  # pytest --junitxml
    try:
        root = ET.parse(sys.argv[2]).getroot()
        suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
        total = sum(int(x.get("tests", 0)) for x in suites)
        bad = sum(int(x.get("failures", 0)) + int(x.get("errors", 0)) for x in suites)
        skip = sum(int(x.get("skipped", 0)) for x in suites)
        if total == 0:
            print("pytest: no tests ran")
            failed += 1
        passed += total - bad - skip
        failed += bad
        skipped += skip
    except (OSError, ET.ParseError) as e:
        print("pytest: no results (%s)" % e)
        failed += 1
print("tests: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
