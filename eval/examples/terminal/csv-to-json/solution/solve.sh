#!/bin/bash
python3 -c '
import csv, json
rows = [{"name": r["name"], "age": int(r["age"])} for r in csv.DictReader(open("/workspace/people.csv"))]
json.dump(rows, open("/workspace/people.json", "w"), indent=2)
'
