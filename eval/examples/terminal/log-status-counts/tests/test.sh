#!/bin/bash
python3 - <<'PY'
import collections, pathlib
codes = collections.Counter(line.split()[8] for line in open("/workspace/access.log") if line.strip())
want = "".join(f"{code} {codes[code]}\n" for code in sorted(codes, key=int))
path = pathlib.Path("/workspace/status_counts.txt")
got = path.read_text() if path.exists() else ""
print("expected:", want.replace("\n", "; "), "got:", got.replace("\n", "; "))
pathlib.Path("/logs/verifier/reward.txt").write_text("1" if got.strip() == want.strip() else "0")
PY
