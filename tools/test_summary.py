#!/usr/bin/env python3
"""Sum the results in test logs into one closing line:
"tests: N passed, N failed, N skipped" (skipped: GPU tests on a machine with no driver).

Arguments are meson's testlog.json (Criterion suites, and the result of each test that
is not a Criterion suite), tools/run.sh's sanitizer log (Criterion suites run
directly, and "check NAME: OK|FAIL|SKIP ..." lines of its other steps), and pytest's
JUnit XML file (*.xml). A named pytest file that is missing or holds no tests counts as
one failure."""
import json
import re
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0


def count(res):
    global passed, failed, skipped
    if res == "OK":
        passed += 1
    elif res == "SKIP":
        skipped += 1
    else:
        failed += 1


def pytest_xml(path):
    global passed, failed, skipped
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print("pytest: no results (%s)" % e)
        failed += 1
        return
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


def criterion(text):
    """Add the Criterion results in text; False when it holds none."""
    global passed, failed
    found = False
    for m in re.finditer(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)", text):
        found = True
        tested, ok, bad, crash = map(int, m.groups())
        passed += ok
        failed += bad + crash
    return found


def criterion_skips(text):
    # Criterion leaves skips out of "Tested"; tests a --filter left out are not skips
    global skipped
    skipped += len(re.findall(r"^\[SKIP\] (?!.*: Test is disabled$)", text, re.M))


for path in sys.argv[1:]:
    if path.endswith(".xml"):
        pytest_xml(path)
        continue
    try:
        text = open(path, errors="replace").read()
    except OSError as e:
        print("%s: no results (%s)" % (path, e))
        failed += 1
        continue
    if path.endswith(".json"):  # meson's testlog.json: one test a line
        for line in text.splitlines():
            t = json.loads(line)
            out = (t.get("stdout") or "") + (t.get("stderr") or "")
            if criterion(out):
                criterion_skips(out)
            else:  # not a Criterion suite (header, link, embedding, fuzz corpus, tool, examples): once each
                count({"OK": "OK", "SKIP": "SKIP"}.get(t["result"], "FAIL"))
        continue
    criterion(text)
    criterion_skips(text)
    for m in re.finditer(r"^check \S+: (OK|FAIL|SKIP)\b", text, re.M):
        count(m.group(1))
print("tests: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
