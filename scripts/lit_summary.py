#!/usr/bin/env python3
"""Summarizes a lit run from its xunit XML (lit --xunit-xml-output): each
skipped test with the reason, each failed test with the end of its output,
and the counts. scripts/test.sh and scripts/test-sanitizers.sh print it
last, so that the end of a CI log, which is often all a reader sees, says
which test failed and why (the full output is further up, in lit's own).

  python3 scripts/lit_summary.py RESULTS.xml [--label "lit under sanitizers"]
"""

import argparse
import sys
import xml.etree.ElementTree as ET

# Lines of a failed test's output repeated in the summary: its last commands
# and their messages, enough for a cmake or FileCheck error.
TAIL_LINES = 40


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="lit's xunit XML")
    parser.add_argument("--label", default="lit")
    args = parser.parse_args()
    try:
        root = ET.parse(args.results).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit(f"no lit results in {args.results}: {e}")
    passed = 0
    failures, skipped = [], []
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name', '')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            failures.append((name, (bad.text or bad.get("message", ""))))
        elif case.find("skipped") is not None:
            skipped.append((name, case.find("skipped").get("message", "")))
        else:
            passed += 1
    for name, why in skipped:
        print(f"SKIPPED {name}: {why}")
    for name, output in failures:
        lines = output.rstrip().splitlines()
        print(f"FAILED {name}: the last {min(len(lines), TAIL_LINES)} of "
              f"{len(lines)} lines of its output")
        for line in lines[-TAIL_LINES:]:
            print(f"  | {line}")
    print(f"{args.label}: {passed} passed, {len(failures)} failed, "
          f"{len(skipped)} skipped")


if __name__ == "__main__":
    main()
