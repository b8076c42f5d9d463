#!/usr/bin/env python3
"""Sum the results in test logs into one closing line:
"tests: N passed, N failed, N skipped" (skipped: GPU tests on a machine with no driver).

Reads every log given: meson's test log (Criterion suites, and meson's one-line results
of the checks that are not Criterion suites) and tools/run.sh's sanitizer log (Criterion
suites run directly, and "check NAME: OK|FAIL|SKIP ..." lines of its other steps)."""
import re
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    text = open(path, errors="replace").read()
    for m in re.finditer(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)", text):
        tested, ok, bad, crash = map(int, m.groups())
        passed += ok
        failed += bad + crash
    # Criterion leaves skips out of "Tested"; tests a --filter left out are not skips
    skipped += len(re.findall(r"^\[SKIP\] (?!.*: Test is disabled$)", text, re.M))
    # non-Criterion tests (header, link and embedding checks, the fuzz corpus) count once
    # each; meson writes "3/9 project:suite / name  OK" (older: "3/9 project:name  OK")
    for m in re.finditer(r"^\s*\d+/\d+\s+(?:\S+\s+/\s+|\S+:)(\S+)\s+(OK|FAIL|SKIP|TIMEOUT)\b", text, re.M):
        name, res = m.groups()
        if name.startswith(("header", "link", "embedded", "fuzz")):
            if res == "OK":
                passed += 1
            elif res == "SKIP":
                skipped += 1
            else:
                failed += 1
    for m in re.finditer(r"^check \S+: (OK|FAIL|SKIP)\b", text, re.M):
        res = m.group(1)
        if res == "OK":
            passed += 1
        elif res == "SKIP":
            skipped += 1
        else:
            failed += 1
print("tests: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
