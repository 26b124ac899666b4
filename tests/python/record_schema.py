"""Validates recorded lines against the JSON Schema of one line of the record format
(docs/record-format.schema.json) with the `jsonschema` package (draft 2020-12), for
tests/record_format.rs.

usage: record_schema.py SCHEMA LINES RESULTS
  LINES    a JSON array of strings, each one line of a recording
  RESULTS  written: a JSON array with {"errors": [...]} per line, empty when valid
"""

import json
import sys

from jsonschema import Draft202012Validator


def main(schema_path, lines_path, results_path):
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    with open(lines_path, encoding="utf-8") as f:
        lines = json.load(f)
    results = []
    for line in lines:
        try:
            instance = json.loads(line)
        except ValueError as e:
            results.append({"errors": ["not JSON: %s" % e]})
            continue
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
        results.append({"errors": [
            "%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message[:300])
            for e in errors[:3]
        ]})
    with open(results_path, "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
