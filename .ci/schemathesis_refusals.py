#!/usr/bin/env python3
"""Which schema-valid requests a node refused in a Schemathesis run, and why.

    python3 .ci/schemathesis_refusals.py REPORT.ndjson...

Reads Schemathesis's NDJSON reports and prints, most frequent first, the positive test cases
(data valid by the document) answered 400 or 422, grouped by operation, status, the error's
`field` and its message (quoted values and numbers blanked). The run passes them: these
operations accept 422 for the rules no schema can state (docs/api.md, "Contract tests"). A
group that is not one of those rules is a rule the document could state and does not: make
the schema say it (src/api/contract.rs) or the validator take it.
"""

import base64
import collections
import json
import re
import sys


def refusals(paths):
    groups = collections.Counter()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                event = json.loads(line).get("ScenarioFinished")
                if not event or "recorder" not in event:
                    continue
                recorder = event["recorder"]
                cases = recorder.get("cases", {})
                for case_id, interaction in recorder.get("interactions", {}).items():
                    case = cases.get(case_id, {}).get("value", {})
                    mode = case.get("meta", {}).get("generation", {}).get("mode")
                    response = interaction.get("response")
                    if mode != "positive" or not response:
                        continue
                    status = response["status_code"]
                    if status not in (400, 422):
                        continue
                    try:
                        error = json.loads(base64.b64decode(response["content"]["$base64"]))["error"]
                    except (KeyError, TypeError, ValueError):
                        error = {}
                    message = re.sub(r"'[^']*'", "'…'", error.get("message") or "")
                    message = re.sub(r"(?<![A-Za-z0-9])\d+", "N", message)[:100]
                    label = case.get("method", "") + " " + case.get("path", recorder["label"])
                    groups[(label.strip(), status, error.get("field"), message)] += 1
    return groups


# Groups printed, the largest first.
TOP = 40


def main(paths):
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    groups = refusals(paths)
    total = sum(groups.values())
    print(f"schema-valid requests refused: {total}, in {len(groups)} groups")
    for (label, status, field, message), n in groups.most_common(TOP):
        print(f"{n:6}  {status} {label}  {field}: {message}")
    if len(groups) > TOP:
        print(f"({len(groups) - TOP} smaller groups left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
