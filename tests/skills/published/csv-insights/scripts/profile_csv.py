#!/usr/bin/env python3
"""Profile a CSV file: one JSON line per column (type, missing, range or top values)."""

import argparse
import csv
import json
import sys
from collections import Counter


def profile(rows, columns):
    for index, column in enumerate(columns):
        values = [row[index] for row in rows if index < len(row)]
        present = [v for v in values if v.strip()]
        numbers = []
        for value in present:
            try:
                numbers.append(float(value))
            except ValueError:
                break
        info = {"column": column, "missing": len(rows) - len(present)}
        if present and len(numbers) == len(present):
            info.update(type="number", min=min(numbers), max=max(numbers))
        else:
            info.update(type="text", top=Counter(present).most_common(3))
        yield info


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file")
    parser.add_argument("--delimiter", default=",")
    parser.add_argument("--sample", type=int, default=0)
    args = parser.parse_args()
    with open(args.file, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter=args.delimiter)
        columns = next(reader, None)
        if columns is None:
            sys.exit(f"{args.file}: empty file")
        rows = []
        for row in reader:
            rows.append(row)
            if args.sample and len(rows) >= args.sample:
                break
    for info in profile(rows, columns):
        print(json.dumps(info))


if __name__ == "__main__":
    main()
