#!/bin/bash
# The checks run from /tests, so editing the workspace's tests changes nothing.
cd /workspace && python3 /tests/check_calc.py && echo 1 > /logs/verifier/reward.txt \
    || echo 0 > /logs/verifier/reward.txt
