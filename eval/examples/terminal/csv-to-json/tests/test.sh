#!/bin/bash
python3 - <<'PY'
import csv, json, pathlib
want = [{"name": r["name"], "age": int(r["age"])} for r in csv.DictReader(open("/workspace/people.csv"))]
try:
    got = json.loads(pathlib.Path("/workspace/people.json").read_text())
except (OSError, ValueError) as exc:
    got = f"unreadable: {exc}"
print("got:", got)
pathlib.Path("/logs/verifier/reward.txt").write_text("1" if got == want else "0")
PY
