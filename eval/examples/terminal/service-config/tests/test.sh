#!/bin/bash
cd /workspace/service || { echo 0 > /logs/verifier/reward.txt; exit 0; }
python3 app.py > /tmp/service.log 2>&1 &
python3 - "$!" <<'PY'
import pathlib, sys, time, urllib.request


def running(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


pid, reward = sys.argv[1], "0"
for _ in range(50):
    try:
        with urllib.request.urlopen("http://127.0.0.1:8080/health", timeout=1) as reply:
            reward = "1" if reply.read() == b"ok" else "0"
            break
    except OSError:
        if not running(pid):
            break  # the service exited: it will never answer
        time.sleep(0.1)
pathlib.Path("/logs/verifier/reward.txt").write_text(reward)
PY
kill "$!" 2>/dev/null
cat /tmp/service.log
