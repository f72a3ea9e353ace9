#!/bin/bash
cd /workspace
got=$(./bin/run.sh 2>&1)
echo "./bin/run.sh printed: $got"
if [ "$got" = "ready" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
