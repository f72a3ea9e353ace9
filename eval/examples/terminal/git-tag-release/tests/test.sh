#!/bin/bash
cd /workspace/repo || { echo 0 > /logs/verifier/reward.txt; exit 0; }
want=$(git log --format='%H %s' | awk '$2 == "release:" && $3 == "1.0" {print $1}')
kind=$(git cat-file -t v1.0 2>/dev/null)
got=$(git rev-list -n 1 v1.0 2>/dev/null)
echo "tag object: $kind, tagged commit: $got, release commit: $want"
if [ "$kind" = "tag" ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
