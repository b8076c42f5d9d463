#!/usr/bin/env python3
"""Sum the Criterion results in a meson test log into one closing line:
"tests: N passed, N failed, N skipped" (skipped: GPU tests on a machine with no driver)."""
import re
import sys

text = open(sys.argv[1], errors="replace").read()
passed = failed = skipped = 0
for m in re.finditer(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)", text):
    tested, ok, bad, crash = map(int, m.groups())
    passed += ok
    failed += bad + crash
skipped = len(re.findall(r"^\[SKIP\] ", text, re.M))  # Criterion leaves skips out of "Tested"
# non-Criterion tests (header, link and embedding checks, the fuzz corpus) count once each
for m in re.finditer(r"^\s*\d+/\d+\s+\S+:(\S+)\s+(OK|FAIL|SKIP|TIMEOUT)", text, re.M):
    name, res = m.groups()
    if name.startswith(("header", "link", "embedded", "fuzz")):
        if res == "OK":
            passed += 1
        elif res == "SKIP":
            skipped += 1
        else:
            failed += 1
print("tests: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
