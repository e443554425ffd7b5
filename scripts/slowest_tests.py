"""Prints the slowest tests of a nextest run, from its JUnit report.

nextest writes target/nextest/default/junit.xml (.config/nextest.toml asks
for it); scripts/test.sh prints the slowest at the end of every run, so
each run says which tests its minutes went to and how close each came to
nextest's limit. Usage: slowest_tests.py JUNIT_XML [N]
"""

import sys
import xml.etree.ElementTree as ET


def main() -> None:
    path = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        binary = case.get("classname", "")
        cases.append((float(case.get("time", "0")), f"{binary} {case.get('name', '')}", failed))
    cases.sort(reverse=True)
    print(f"== the {min(count, len(cases))} slowest of {len(cases)} tests")
    for secs, name, failed in cases[:count]:
        print(f"   {secs:8.1f} s  {name}{'  (failed)' if failed else ''}")


if __name__ == "__main__":
    main()
