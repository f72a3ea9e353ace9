#!/bin/bash
cd /workspace/service || { echo 0 > /logs/verifier/reward.txt; exit 0; }
python3 app.py > /tmp/service.log 2>&1 &
pid=$!
python3 - <<'PY'
import pathlib, time, urllib.request
reward = "0"
for _ in range(30):
    try:
        with urllib.request.urlopen("http://127.0.0.1:8080/health", timeout=1) as reply:
            reward = "1" if reply.read() == b"ok" else "0"
            break
    except OSError:
        time.sleep(0.1)
pathlib.Path("/logs/verifier/reward.txt").write_text(reward)
PY
kill "$pid" 2>/dev/null
cat /tmp/service.log
